"""Images through the engine host (a real child process): the bundled model loaded with the tiny
projector of tests/mmproj_tools.py. Replies are nonsense (random projector weights); what is
checked is every step: the image's positions in the prompt, streaming, the conversation's KV
state restored with the image in its history, and refusals."""

from __future__ import annotations

import ctypes
import hashlib
import io
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from llama_cpp import mtmd_cpp as mtmd
from PIL import Image

from inglenook.core.images import read_image
from inglenook.core.load import LoadParams
from inglenook.core.messages import GenerationRequest, ImageRef, Message
from inglenook.core.sampling import SamplingParams
from inglenook.engine import protocol as p
from inglenook.engine.client import EngineClient
from inglenook.engine.host.llama import Batch, Context, Model
from inglenook.engine.host.mtmd import Projector
from tests.integration.conftest import GREEDY, ask, finish_of, stats_of
from tests.mmproj_tools import (
    GEMMA3_TOKENS,
    IMAGE_TOKENS,
    model_n_embd,
    write_gemma3_mmproj,
    write_mmproj,
)

SHORT = SamplingParams(temperature=0.0, seed=42, repeat_penalty=1.0, max_tokens=4)


def chat(client: EngineClient, messages: tuple[Message, ...], rid: int, conversation: str
         ) -> tuple[str, list[object]]:
    events = list(client.generate(GenerationRequest(rid, messages, SHORT,
                                                    conversation=conversation)))
    return "".join(e.text for e in events if isinstance(e, p.Delta)), events


def image_file(folder: Path, name: str, color: tuple[int, int, int]) -> ImageRef:
    out = io.BytesIO()
    Image.new("RGB", (40, 30), color).save(out, "PNG")
    path = folder / name
    path.write_bytes(out.getvalue())
    return ImageRef(hashlib.sha256(out.getvalue()).hexdigest(), str(path))


@pytest.fixture(scope="module")
def seeing(bundled_model: Path, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[tuple[EngineClient, Path]]:
    folder = tmp_path_factory.mktemp("vision")
    mmproj = write_mmproj(folder / "mmproj-tiny.gguf", model_n_embd(bundled_model))
    client = EngineClient(log_path=folder / "engine.log")
    info = client.load(LoadParams(str(bundled_model), n_ctx=1024, n_slots=1,
                                  mmproj_path=str(mmproj)))
    assert info.vision
    yield client, folder
    client.close()


def test_an_image_takes_its_positions_and_the_conversation_restores_it(
        seeing: tuple[EngineClient, Path]) -> None:
    client, folder = seeing
    red = image_file(folder, "red.png", (255, 0, 0))
    # Long enough that its state is kept (kv_reuse.MIN_SAVE_TOKENS).
    question = "What is in this picture? Describe the colours, the shapes and the light. " * 3
    turn = (Message("user", question, images=(red,)),)
    plain = client.inspect(GenerationRequest(1, (Message("user", question),), SHORT))
    seen = client.inspect(GenerationRequest(1, turn, SHORT))
    assert len(seen.tokens) == len(plain.tokens) + IMAGE_TOKENS
    mark = f"[image 1: {IMAGE_TOKENS} tokens]"
    assert [t.piece for t in seen.tokens].count(mark) == 1
    assert seen.prompt.index(mark) < seen.prompt.index("What is in this picture?")
    blue = image_file(folder, "blue.png", (0, 0, 255))
    both = client.inspect(GenerationRequest(1, (Message("user", "Compare.", images=(red, blue)),),
                                            SHORT))
    assert [t.piece for t in both.tokens if t.piece.startswith("[image")] == [
        mark, f"[image 2: {IMAGE_TOKENS} tokens]"]
    reply, events = chat(client, turn, 2, "chat:red")
    assert finish_of(events).finish.reason in ("stop", "length")
    first = stats_of(events).stats
    assert first.prompt_tokens == len(seen.tokens)
    # Another chat runs between, so the next turn finds its cells in a saved state.
    chat(client, (Message("user", "Hi."),), 3, "chat:other")
    history = (*turn, Message("assistant", reply), Message("user", "And now?"))
    _, events = chat(client, history, 4, "chat:red")
    again = stats_of(events).stats
    assert again.cache_source in ("ram", "disk")
    assert again.cached_tokens >= first.prompt_tokens  # the image was restored, not re-read


def test_another_image_in_the_same_place_is_not_taken_from_the_state(
        seeing: tuple[EngineClient, Path]) -> None:
    client, folder = seeing
    blue = image_file(folder, "blue.png", (0, 0, 255))
    green = image_file(folder, "green.png", (0, 255, 0))
    _, events = ask(client, (Message("user", "Look.", images=(blue,)),), 5, SHORT)
    before = stats_of(events).stats
    _, events = ask(client, (Message("user", "Look.", images=(green,)),), 6, SHORT)
    after = stats_of(events).stats
    # The text before the image is shared; no position of the image is.
    assert after.cached_tokens < before.prompt_tokens - IMAGE_TOKENS


def test_an_image_whose_file_changed_is_refused(seeing: tuple[EngineClient, Path]) -> None:
    client, folder = seeing
    ref = image_file(folder, "changed.png", (1, 2, 3))
    image_file(folder, "changed.png", (3, 2, 1))
    _, events = ask(client, (Message("user", "Look.", images=(ref,)),), 7, SHORT)
    finish = finish_of(events).finish
    assert finish.reason == "error" and "contents changed" in finish.message


def test_a_stop_while_the_image_is_read_ends_the_reply(
        seeing: tuple[EngineClient, Path]) -> None:
    client, folder = seeing
    ref = image_file(folder, "stop.png", (9, 9, 9))
    request = GenerationRequest(8, (Message("user", "Look.", images=(ref,)),), GREEDY)
    client.cancel(8)  # before it starts: it is stopped at its first check
    events = list(client.generate(request))
    assert finish_of(events).finish.reason == "cancelled"


def test_a_model_without_a_projector_says_it_cannot_see(engine: EngineClient,
                                                         tmp_path: Path) -> None:
    ref = image_file(tmp_path, "any.png", (5, 5, 5))
    _, events = ask(engine, (Message("user", "Look.", images=(ref,)),), 9)
    finish = finish_of(events).finish
    assert finish.reason == "error" and "cannot see images" in finish.message


def test_message_text_cannot_spell_an_image(seeing: tuple[EngineClient, Path]) -> None:
    client, _folder = seeing
    view = client.inspect(GenerationRequest(10, (Message("user", "\ufffc here \ufffc"),), SHORT))
    assert not any(t.id < 0 for t in view.tokens)
    assert "\ufffc" not in view.prompt and "\ufffd here \ufffd" in view.prompt


@pytest.fixture(scope="module")
def gemma3(bundled_model: Path, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[tuple[EngineClient, Path, Path]]:
    folder = tmp_path_factory.mktemp("gemma3")
    mmproj = write_gemma3_mmproj(folder / "mmproj-gemma3.gguf", model_n_embd(bundled_model))
    client = EngineClient(log_path=folder / "engine.log")
    client.load(LoadParams(str(bundled_model), n_ctx=1024, n_slots=1, mmproj_path=str(mmproj)))
    yield client, folder, mmproj
    client.close()


def reference_reply(model_path: Path, mmproj: Path, tokens: list[int], image: Path) -> str:
    """The same prompt read by llama.cpp's own helper (mtmd_helper_eval_chunk_single, which
    switches attention for non-causal images), then greedy tokens: the reply to expect."""
    model = Model(str(model_path), 0, True, False)
    ctx = Context(model, 1024, 1, 512, 2, 2, True, "f16")
    projector = Projector(str(mmproj), model, n_threads=2, use_gpu=False)
    picture = read_image(image)
    run = projector.image(picture.rgb, picture.width, picture.height, picture.sha256)
    batch = Batch(512)
    try:
        first = next(i for i, t in enumerate(tokens) if t < 0)
        (chunk,) = run.chunks
        for i, token in enumerate(tokens[:first]):
            batch.add(token, i, 0, False)
        assert ctx.decode(batch) == 0
        n_past = ctypes.c_int32(0)
        assert mtmd.mtmd_helper_eval_chunk_single(projector.ptr, ctx.ptr, chunk.ptr, first, 0,
                                                  512, False, ctypes.byref(n_past)) == 0
        pos, rest = n_past.value, tokens[first + chunk.n_tokens:]
        reply = b""
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
        run.close()
        projector.close()
        ctx.close()
        model.close()


def test_a_gemma3_image_reads_between_its_markers_as_llama_cpp_reads_it(
        gemma3: tuple[EngineClient, Path, Path], bundled_model: Path) -> None:
    client, folder, mmproj = gemma3
    red = image_file(folder, "red.png", (255, 0, 0))
    turn = (Message("user", "What is in this picture?", images=(red,)),)
    plain = client.inspect(GenerationRequest(1, (Message("user", turn[0].content),), SHORT))
    seen = client.inspect(GenerationRequest(1, turn, SHORT))
    markers = len(seen.tokens) - len(plain.tokens) - GEMMA3_TOKENS
    assert markers > 0  # <start_of_image> and <end_of_image>, in this model's own tokens
    mark = f"[image 1: {GEMMA3_TOKENS} tokens]"
    assert f"<start_of_image>{mark}<end_of_image>" in seen.prompt
    reply, events = chat(client, turn, 2, "chat:gemma3")
    assert finish_of(events).finish.reason in ("stop", "length")
    assert reply == reference_reply(bundled_model, mmproj, [t.id for t in seen.tokens],
                                    Path(red.path))
