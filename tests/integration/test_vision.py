"""libmtmd through the adapter (engine/host/mtmd.py) with the bundled model and the tiny
projector of tests/mmproj_tools.py: loaded, an image turned into embeddings of the model's
size, those decoded into a sequence, and a stop during encoding."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from inglenook.engine.host.llama import Batch, Context, Model
from inglenook.engine.host.mtmd import EmbeddingBatch, Projector, ProjectorError
from tests.mmproj_tools import IMAGE_TOKENS, model_n_embd, write_mmproj


def rgb(width: int, height: int, seed: int) -> bytes:
    return np.random.default_rng(seed).integers(0, 256, (height, width, 3), np.uint8).tobytes()


@pytest.fixture(scope="module")
def loaded(bundled_model: Path, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[tuple[Model, Context, Projector]]:
    mmproj = write_mmproj(tmp_path_factory.mktemp("vision") / "mmproj-tiny.gguf",
                          model_n_embd(bundled_model))
    model = Model(str(bundled_model), 0, True, False)
    ctx = Context(model, 256, 1, 64, 2, 2, True, "f16")
    projector = Projector(str(mmproj), model, n_threads=2, use_gpu=False)
    yield model, ctx, projector
    projector.close()
    ctx.close()
    model.close()


def test_an_image_becomes_embeddings_of_the_models_size(
        loaded: tuple[Model, Context, Projector], bundled_model: Path) -> None:
    _model, _ctx, projector = loaded
    first_run = projector.image(rgb(100, 80, 1), 100, 80, "a" * 64)
    other_run = projector.image(rgb(100, 80, 2), 100, 80, "b" * 64)
    assert first_run.parts == first_run.chunks  # LLaVA's projector puts no text around it
    (first,), (other,) = first_run.chunks, other_run.chunks
    try:
        assert first.n_tokens == first.n_pos == IMAGE_TOKENS
        a, b = first.encode(lambda: False), other.encode(lambda: False)
        assert a is not None and b is not None
        assert a.shape == (IMAGE_TOKENS, model_n_embd(bundled_model)) == (16, 576)
        assert np.isfinite(a).all() and np.abs(a).sum() > 0
        assert not np.allclose(a, b)  # the embeddings come from the pixels
    finally:
        first.close()
        other.close()


def test_embeddings_are_read_into_a_sequence_between_text(
        loaded: tuple[Model, Context, Projector]) -> None:
    model, ctx, projector = loaded
    memory = ctx.sequence(0)
    memory.clear()
    (chunk,) = projector.image(rgb(64, 64, 3), 64, 64, "c" * 64).chunks
    rows = chunk.encode(lambda: False)
    chunk.close()
    assert rows is not None
    text = model.tokenize(b"Look at this:", special=False)
    batch, embd = Batch(64), EmbeddingBatch(64, projector.n_embd)
    try:
        for i, token in enumerate(text):
            batch.add(token, i, 0, False)
        assert ctx.decode(batch) == 0
        assert embd.decode(ctx, rows, len(text), 0, logits_last=False) == 0
        batch.clear()
        batch.add(model.tokenize(b" It", special=False)[0], len(text) + len(rows), 0, True)
        assert ctx.decode(batch) == 0
        assert np.isfinite(ctx.logits(0)).all()
    finally:
        batch.close()
        embd.close()
        memory.clear()


def test_a_stop_during_encoding_gives_no_embeddings(
        loaded: tuple[Model, Context, Projector]) -> None:
    _model, _ctx, projector = loaded
    (chunk,) = projector.image(rgb(64, 64, 4), 64, 64, "d" * 64).chunks
    asked: list[bool] = []

    def stop() -> bool:
        asked.append(True)
        return True

    try:
        assert chunk.encode(stop) is None
        assert len(asked) >= 2  # asked inside the compute (ggml's callback), then after it
        assert chunk.encode(lambda: False) is not None  # and the next encode works
    finally:
        chunk.close()


def test_a_projector_for_another_embedding_size_is_refused(
        loaded: tuple[Model, Context, Projector], tmp_path: Path) -> None:
    model, _ctx, _projector = loaded
    wrong = write_mmproj(tmp_path / "mmproj-wrong.gguf", 64)
    with pytest.raises(ProjectorError, match="could not load"):
        Projector(str(wrong), model, n_threads=2, use_gpu=False)
