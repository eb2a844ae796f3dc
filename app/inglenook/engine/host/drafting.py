"""A draft model: a second, small model with the same vocabulary, guessing tokens ahead for the
model (speculative.Proposer). It has one sequence of its own: it guesses for a reply while that
reply is the only one decoding (see batch.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from inglenook.engine.host.llama import DECODE_ABORTED, Batch, Context, Model
from inglenook.engine.kv_states import common_prefix, pack
from inglenook.engine.speculative import MAX_VOCAB_DIFFERENCE, TokenHistory


class DraftModel:
    """Guesses greedily while it is at least `p_min` sure. Its KV cells follow the reply: only
    what it has not seen is evaluated, a stop interrupts a long catch-up."""

    def __init__(self, model: Model, ctx: Context, p_min: float, n_vocab: int,
                 abort_cb: Any) -> None:
        self.model, self.ctx, self.p_min, self.n_vocab = model, ctx, p_min, n_vocab
        self.memory = ctx.sequence(0)
        self._batch = Batch(ctx.n_batch)
        self._abort_cb = abort_cb
        self._last = -1  # batch index of the last token's logits

    def catch_up(self, tokens: Sequence[int], with_last: bool = False) -> bool:
        """Make the cells hold `tokens` but the last (evaluated too, for fresh logits, with
        `with_last`). False when a stop interrupted it."""
        memory = self.memory
        seen = min(common_prefix(memory.tokens(), pack(tokens)), len(tokens) - 1)
        memory.keep(seen)
        end = len(tokens) if with_last else len(tokens) - 1
        # A new prompt can take a while: a stop interrupts it. (Only then: the callback
        # costs every evaluation a little.)
        abortable = end - seen > self.ctx.n_batch
        if abortable:
            self.ctx.set_abort(self._abort_cb)
        try:
            for start in range(seen, end, self.ctx.n_batch):
                if not self._evaluate(tokens[start:min(end, start + self.ctx.n_batch)]):
                    return False
        finally:
            if abortable:
                self.ctx.set_abort(None)
        return True

    def _evaluate(self, tokens: Sequence[int]) -> bool:
        batch, memory = self._batch, self.memory
        batch.clear()
        for i, token in enumerate(tokens):
            batch.add(token, memory.next_pos + i, 0, i == len(tokens) - 1)
        status = self.ctx.decode(batch)
        if status == DECODE_ABORTED:
            memory.keep(memory.n)  # llama.cpp dropped the unfinished batch
            return False
        if status != 0:
            raise RuntimeError(f"the draft model's llama_decode returned {status}")
        memory.appended(tokens)
        self._last = batch.n - 1
        return True

    def propose(self, history: TokenHistory, limit: int) -> list[int]:
        guesses: list[int] = []
        if not self.catch_up(history.tokens, with_last=True):
            return guesses  # stopped: the reply ends before any guess is needed
        while len(guesses) < limit:
            logits = self.ctx.logits(self._last)
            token = int(logits.argmax())
            # p(token) = 1 / sum(exp(logits - max)): the draft's confidence in its guess.
            if token >= self.n_vocab or (self.p_min > 0 and float(
                    np.exp(logits - logits[token]).sum()) * self.p_min > 1.0):
                break
            guesses.append(token)
            if len(guesses) < limit:
                self._evaluate([token])
        return guesses

    def set_threads(self, n_threads: int, n_threads_batch: int) -> None:
        self.ctx.set_threads(n_threads, n_threads_batch)

    def close(self) -> None:
        self._batch.close()
        self.ctx.close()
        self.model.close()


def vocab_mismatch(model: Model, draft: Model) -> str | None:
    """Where two loaded models' vocabularies differ, as llama.cpp's speculative example checks:
    the same kind, BOS and EOS, sizes within MAX_VOCAB_DIFFERENCE, and the same text for every
    token both have past the first five (special tokens some conversions renumber)."""
    if model.vocab_type != draft.vocab_type:
        return "their tokenizers are of different kinds."
    if model.bos != draft.bos or model.eos != draft.eos:
        return "their beginning- or end-of-text tokens differ."
    n_a, n_b = model.n_vocab, draft.n_vocab
    if abs(n_a - n_b) > MAX_VOCAB_DIFFERENCE:
        return f"their vocabularies have {n_a:,} and {n_b:,} tokens."
    for token in range(5, min(n_a, n_b)):
        if model.text(token) != draft.text(token):
            return f"token {token} differs, so they do not share a vocabulary."
    return None
