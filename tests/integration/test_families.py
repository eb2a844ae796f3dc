"""Model families whose KV memory llama.cpp keeps differently, on real files: Gemma 3 270M's
sliding-window cache (a window of 512) keeps only the window (swa_full off), is never cut back
before it, and a state restored continues exactly as the sequence would have."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from inglenook.engine.host.llama import Batch, Context, Model, SeqMemory

N = 1600  # tokens read: past window × slots + a batch (1,024 cells with one slot)


@pytest.fixture(scope="module")
def gemma(gemma_model: Path) -> Iterator[tuple[Context, SeqMemory, list[int]]]:
    model = Model(str(gemma_model), 0, True, False)
    ctx = Context(model, 4096, 1, 512, 2, 2, False, "f16", 4096)
    seq = ctx.sequence(0)
    tokens = model.tokenize(b"The old lighthouse keeper counted ships at dawn. " * 200,
                            special=False)[:N]
    batch = Batch(512)
    for start in range(0, N, 512):
        decode(ctx, seq, batch, tokens[start:start + 512])
    yield ctx, seq, tokens
    batch.close()
    ctx.close()
    model.close()


def decode(ctx: Context, seq: SeqMemory, batch: Batch, tokens: list[int]) -> np.ndarray:
    batch.clear()
    for i, token in enumerate(tokens):
        batch.add(token, seq.next_pos + i, seq.seq, i == len(tokens) - 1)
    assert ctx.decode(batch) == 0
    seq.appended(tokens)
    return ctx.logits(batch.n - 1).copy()


def test_a_sliding_window_cache_is_not_cut_back_before_its_window(
        gemma: tuple[Context, SeqMemory, list[int]]) -> None:
    ctx, seq, _ = gemma
    assert ctx.n_swa == 512 and seq.n == N
    assert not seq.can_keep(100)  # those cells of the window layers were overwritten
    assert not seq.keep(100) and seq.n == N  # refused: nothing was removed
    assert not seq.cut(10, 20)  # no context shift on a window cache
    assert seq.can_keep(N - 8)


def test_a_restored_gemma_state_continues_exactly_as_the_sequence_would_have(
        gemma: tuple[Context, SeqMemory, list[int]]) -> None:
    ctx, seq, tokens = gemma
    held = seq.tokens()
    state = seq.save()
    batch = Batch(8)
    try:
        continued = decode(ctx, seq, batch, tokens[:1])
        assert seq.restore(state, held) and seq.n == N
        restored = decode(ctx, seq, batch, tokens[:1])
    finally:
        batch.close()
    assert np.array_equal(continued, restored)
