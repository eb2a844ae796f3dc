"""Images placed with M-RoPE (Qwen2-VL's way): the bundled model rewritten as a qwen2vl model
(tests/mmproj_tools.qwen2vl_copy) with the tiny qwen2vl_merger projector. An image of rows ×
cols tokens takes max(rows, cols) positions; its embeddings are decoded at positions of four
sections. The replies are checked against libmtmd's own helper, token for token, and the
conversation's cells are reused with the image in them."""

from __future__ import annotations

import hashlib
import io
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from inglenook.core.images import read_image
from inglenook.core.load import LoadParams
from inglenook.core.messages import GenerationRequest, ImageRef, Message
from inglenook.engine.client import EngineClient, EngineError
from inglenook.engine.host.llama import Batch, Context, Model
from inglenook.engine.host.mtmd import EmbeddingBatch, Projector
from tests.integration.conftest import finish_of, stats_of
from tests.integration.test_vision_engine import SHORT, chat, image_file, reference_reply
from tests.mmproj_tools import qwen2vl_copy, write_qwen2vl_mmproj

ROWS, COLS = 4, 5  # a 40 × 30 image, sized by libmtmd to 40 × 32: 5 × 4 tokens of 8 × 8 pixels


@pytest.fixture(scope="module")
def qwen(bundled_model: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("qwen2vl")
    return (qwen2vl_copy(bundled_model, folder / "qwen2vl-tiny.gguf"),
            write_qwen2vl_mmproj(folder / "mmproj-qwen2vl.gguf", 576))


@pytest.fixture(scope="module")
def seeing(qwen: tuple[Path, Path]) -> Iterator[tuple[EngineClient, Path]]:
    model, mmproj = qwen
    client = EngineClient(log_path=model.parent / "engine.log")
    info = client.load(LoadParams(str(model), n_ctx=1024, n_slots=1, mmproj_path=str(mmproj)))
    assert info.vision
    yield client, model.parent
    client.close()


def plain_reply(model_path: Path, mmproj: Path, tokens: list[int], image: Path) -> str:
    """What the reply would be with the image at one position per embedding (as before)."""
    model = Model(str(model_path), 0, True, False)
    ctx = Context(model, 1024, 1, 512, 2, 2, True, "f16")
    projector = Projector(str(mmproj), model, n_threads=2, use_gpu=False)
    picture = read_image(image)
    run = projector.image(picture.rgb, picture.width, picture.height, picture.sha256)
    batch, embd = Batch(512), EmbeddingBatch(512, projector.n_embd)
    try:
        (chunk,) = run.chunks
        rows = chunk.encode(lambda: False)
        assert rows is not None
        first = next(i for i, t in enumerate(tokens) if t < 0)
        for i, token in enumerate(tokens[:first]):
            batch.add(token, i, 0, False)
        assert ctx.decode(batch) == 0
        flat = np.tile(np.arange(first, first + len(rows), dtype=np.int32), (4, 1))
        assert embd.decode(ctx, rows, flat, 0, False) == 0
        pos, rest, reply = first + len(rows), tokens[first + len(rows):], b""
        for _ in range(SHORT.max_tokens):
            batch.clear()
            for i, token in enumerate(rest):
                batch.add(token, pos + i, 0, i == len(rest) - 1)
            assert ctx.decode(batch) == 0
            pos += len(rest)
            token = int(np.argmax(ctx.logits(len(rest) - 1)))
            if model.is_eog(token):
                break
            reply += model.piece(token)
            rest = [token]
        return reply.decode("utf-8", errors="replace")
    finally:
        batch.close()
        embd.close()
        run.close()
        projector.close()
        ctx.close()
        model.close()


def test_an_m_rope_image_takes_fewer_positions_and_reads_as_llama_cpp_reads_it(
        seeing: tuple[EngineClient, Path], qwen: tuple[Path, Path]) -> None:
    client, folder = seeing
    red = image_file(folder, "red.png", (255, 0, 0))
    turn = (Message("user", "What is in this picture?", images=(red,)),)
    seen = client.inspect(GenerationRequest(1, turn, SHORT))
    mark = f"[image 1: {ROWS * COLS} tokens]"  # a cell per embedding, as the meter counts
    assert f"<|vision_start|>{mark}<|vision_end|>" in seen.prompt
    reply, events = chat(client, turn, 2, "chat:qwen")
    assert finish_of(events).finish.reason in ("stop", "length")
    assert stats_of(events).stats.context_used == len(seen.tokens) + SHORT.max_tokens - 1
    tokens = [t.id for t in seen.tokens]
    expected = reference_reply(*qwen, tokens, Path(red.path))
    assert reply == expected
    assert plain_reply(*qwen, tokens, Path(red.path)) != expected  # the positions matter


def test_a_conversation_with_an_m_rope_image_reuses_its_cells(
        seeing: tuple[EngineClient, Path], qwen: tuple[Path, Path]) -> None:
    client, folder = seeing
    blue = image_file(folder, "blue.png", (0, 0, 255))
    # Long enough that its state is kept (kv_reuse.MIN_SAVE_TOKENS).
    question = "What is in this picture? Describe the colours, the shapes and the light. " * 3
    turn = (Message("user", question, images=(blue,)),)
    reply, events = chat(client, turn, 3, "chat:blue")
    first = stats_of(events).stats
    again, events = chat(client, turn, 4, "chat:blue")  # a regenerate: the same prompt
    regenerated = stats_of(events).stats
    assert again == reply
    assert (regenerated.cache_source, regenerated.cached_tokens) == (
        "live", first.prompt_tokens - 1)
    # Another chat runs between, so the next turn finds its cells in a saved state.
    chat(client, (Message("user", "Hi."),), 5, "chat:other")
    history = (*turn, Message("assistant", reply), Message("user", "And now?"))
    view = client.inspect(GenerationRequest(6, history, SHORT))
    second, events = chat(client, history, 6, "chat:blue")
    restored = stats_of(events).stats
    assert restored.cache_source in ("ram", "disk")
    assert restored.cached_tokens >= first.prompt_tokens  # the image was not encoded again
    assert second == reference_reply(*qwen, [t.id for t in view.tokens], Path(blue.path))


def test_a_cut_inside_an_m_rope_image_is_refused_and_a_copy_keeps_its_positions(
        qwen: tuple[Path, Path]) -> None:
    model = Model(str(qwen[0]), 0, True, False)
    ctx = Context(model, 256, 2, 64, 2, 2, True, "f16")
    projector = Projector(str(qwen[1]), model, n_threads=2, use_gpu=False)
    rgb = np.random.default_rng(4).integers(0, 256, (30, 40, 3), np.uint8).tobytes()
    run = projector.image(rgb, 40, 30, "d" * 64)
    batch, embd = Batch(64), EmbeddingBatch(64, projector.n_embd)
    memory, other = ctx.sequence(0), ctx.sequence(1)
    try:
        assert projector.mrope
        (chunk,) = run.chunks
        assert (chunk.n_tokens, chunk.n_pos) == (ROWS * COLS, max(ROWS, COLS))
        rows = chunk.encode(lambda: False)
        assert rows is not None
        text = model.tokenize(b"Look:", special=False)
        for i, token in enumerate(text):
            batch.add(token, i, 0, False)
        assert ctx.decode(batch) == 0
        memory.appended(text)
        at = chunk.positions(len(text))
        assert at[:, COLS + 2].tolist() == [len(text), len(text) + 1, len(text) + 2, 0]
        assert embd.decode(ctx, rows, at, 0, False) == 0
        memory.appended([-1] * len(rows), at[0].tolist(), len(text) + chunk.n_pos)
        batch.clear()
        batch.add(text[0], memory.next_pos, 0, True)
        assert ctx.decode(batch) == 0  # text goes on n_pos after the image's start
        memory.appended(text[:1])
        assert memory.n == len(text) + ROWS * COLS + 1
        assert memory.next_pos == len(text) + max(ROWS, COLS) + 1
        state, tokens = memory.save(), memory.tokens()
        assert not memory.keep(len(text) + 3)  # llama.cpp would drop the whole image
        assert memory.keep(memory.n - 1) and memory.next_pos == len(text) + max(ROWS, COLS)
        assert memory.restore(state, tokens) and memory.next_pos == len(text) + 6
        other.copy_from(memory, memory.n - 1)  # another slot starts from the image's cells
        assert other.next_pos == len(text) + max(ROWS, COLS)
        batch.clear()
        batch.add(text[1], other.next_pos, 1, True)
        assert ctx.decode(batch) == 0  # llama.cpp takes it: after the image's positions
        assert memory.keep(len(text)) and memory.next_pos == len(text) and memory.n == len(text)
    finally:
        memory.clear()
        other.clear()
        batch.close()
        embd.close()
        run.close()
        projector.close()
        ctx.close()
        model.close()


def test_an_m_rope_image_read_in_pieces_reads_as_in_one(qwen: tuple[Path, Path]) -> None:
    model, mmproj = qwen
    client = EngineClient(log_path=model.parent / "engine-pieces.log")
    try:
        # 8 a batch: the image's 20 embeddings are read in three steps, all at its start.
        client.load(LoadParams(str(model), n_ctx=512, n_slots=1, n_batch=8,
                               mmproj_path=str(mmproj)))
        green = image_file(model.parent, "green.png", (0, 255, 0))
        turn = (Message("user", "What is in this picture?", images=(green,)),)
        seen = client.inspect(GenerationRequest(1, turn, SHORT))
        reply, events = chat(client, turn, 2, "chat:pieces")
        assert finish_of(events).finish.reason in ("stop", "length")
        assert reply == reference_reply(model, mmproj, [t.id for t in seen.tokens],
                                        Path(green.path))
    finally:
        client.close()


def test_an_image_costs_what_its_size_takes_before_it_is_sent(
        seeing: tuple[EngineClient, Path]) -> None:
    """A Qwen2-VL projector keeps an image's aspect and size (up to its pixel limit): the
    window is told what each image costs at its own size, not what a 512 × 512 one does."""
    client, folder = seeing
    counted = client.count_images([(40, 30), (160, 120), (40, 30)])
    small, large, again = counted.tokens
    assert counted.projector == str(folder / "mmproj-qwen2vl.gguf")
    assert small == again < large
    assert large > 3 * small
    for size, tokens in (((40, 30), small), ((160, 120), large)):
        out = io.BytesIO()
        Image.new("RGB", size, (9, 99, 199)).save(out, "PNG")
        path = folder / f"{size[0]}x{size[1]}.png"
        path.write_bytes(out.getvalue())
        picture = ImageRef(hashlib.sha256(out.getvalue()).hexdigest(), str(path))
        seen = client.inspect(GenerationRequest(
            7, (Message("user", "Look.", images=(picture,)),), SHORT))
        text_only = client.inspect(GenerationRequest(8, (Message("user", "Look."),), SHORT))
        assert len(seen.tokens) - len(text_only.tokens) == tokens  # what the prompt holds
    with pytest.raises(EngineError, match="No image is read at 0 × 30"):
        client.count_images([(0, 30)])
