"""The decode loop: every step is one llama_decode of a batch holding the next token of every
sequence that is writing its reply, plus a chunk of any prompt being read, as llama-server mixes
the two. Sequences join and leave between steps.

A prompt read while other replies stream is read PROMPT_CHUNK_BUSY tokens a step, so theirs keep
coming; read alone it goes in batches of n_batch, as llama.cpp would read it. Only then does the
batch carry llama.cpp's abort callback (ggml calls it for every graph node, which costs decoding
~6%): a stop ends a long prompt mid-batch, and ends a reply within one step.

An image's positions are read as embeddings (engine/host/vision.py), a step of their own: a
llama.cpp batch holds tokens or embeddings, not both. Its encoding (libmtmd) and its decode
stop on a stop, as a long prompt does.

A seeded reply reads its prompt's last token in a step of its own: the logits its first token
is drawn from are then the same whether the prompt was read now or found in the KV cache (which
leaves that one token to read), so the same seed gives the same reply, and `n` seeded choices
the same choices, on every repeat.

With a shared KV pool, when a step finds it full (llama_decode's status 1, before
anything is computed), the cells of the slot idle longest are saved to the state cache and
freed, and the step is tried again; when only replies in progress hold the pool, the one that
started last ends with a message saying so (a new reply waits for room before it starts:
process.py).

Speculation (a draft model, or prompt lookup) guesses for a reply only while it decodes alone:
with others in the batch, llama.cpp already computes several tokens per pass, and a guessed
row costs a share of a pass that only one reply can win.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from inglenook.engine import protocol as p
from inglenook.engine.host.drafting import DraftModel
from inglenook.engine.host.llama import DECODE_ABORTED, Batch, Context
from inglenook.engine.host.mtmd import EmbeddingBatch
from inglenook.engine.host.sequences import Phase, Sequence
from inglenook.engine.host.vision import ImageError, ImageSpan, Vision
from inglenook.engine.kv_reuse import SlotStates

PROMPT_CHUNK_BUSY = 64  # prompt tokens a step reads while other replies decode
POOL_FULL = 1  # llama_decode: no room in the KV cells for the batch


class BatchLoop:
    """`abort_cb` is installed while a prompt is read alone; `abortable` is then the sequence
    it reads (the host's callback checks whether that one was cancelled)."""

    def __init__(self, ctx: Context, slots: SlotStates, send: Callable[[Any], None],
                 abort_cb: Any, most: int = 0, draft: DraftModel | None = None,
                 vision: Vision | None = None) -> None:
        self.ctx, self.slots, self.send = ctx, slots, send
        self.abort_cb, self.most, self.draft = abort_cb, most, draft
        self.batch = Batch(ctx.n_batch)
        self.vision = vision
        self.embd_batch = EmbeddingBatch(ctx.n_batch, vision.n_embd) if vision else None
        self.active: list[Sequence] = []  # by slot
        self.abortable: Sequence | None = None

    @property
    def busy(self) -> set[int]:
        return {s.slot for s in self.active}

    def add(self, seq: Sequence) -> None:
        self.active.append(seq)
        self.active.sort(key=lambda s: s.slot)

    def close(self) -> None:
        for seq in self.active:
            seq.fail("cancelled")
        self._end_finished()
        self.batch.close()
        if self.embd_batch is not None:
            self.embd_batch.close()

    # ---- one step -----------------------------------------------------------------------------
    def step(self) -> None:
        for seq in self.active:
            if seq.cancelled and seq.phase is not Phase.DONE:
                seq.fail("cancelled")
        self._end_finished()
        if not self.active:
            return
        for seq in self.active:
            span = seq.image_now
            if span is not None:
                self._read_image(seq, span)
                now = time.perf_counter()
                for other in self.active:
                    other.flush(self.send, now)
                self._end_finished()
                return
        plan = self._plan()
        alone_reading = len(self.active) == 1 and self.active[0].reading
        if alone_reading:
            self.abortable = self.active[0]
            self.ctx.set_abort(self.abort_cb)
        try:
            status = self.ctx.decode(self.batch)
            pool_full = status == POOL_FULL and self.ctx.pooled
            while pool_full and self.slots.free_idle(self.busy):
                status = self.ctx.decode(self.batch)
                pool_full = status == POOL_FULL
        finally:
            if alone_reading:
                self.ctx.set_abort(None)
                self.abortable = None
        now = time.perf_counter()
        if status != 0:
            for seq, _tokens, _at, _draft in plan:
                seq.memory.keep(seq.memory.n)  # cells of an unfinished batch are dropped
                if status == DECODE_ABORTED:
                    seq.fail("cancelled")
                elif not pool_full:
                    seq.fail("error", f"The engine failed: llama_decode returned {status}.")
            if pool_full:
                self._pool_full()
        else:
            for seq, tokens, at, draft in plan:
                base = seq.memory.n
                seq.memory.appended(tokens)
                if seq.phase is not Phase.WRITING:  # read its prompt (or ended)
                    self._read(seq, len(tokens), at + len(tokens) - 1, now)
                else:
                    self._decoded(seq, base, at, draft, now)
        for seq in self.active:
            seq.flush(self.send, now)
        self._end_finished()

    def _pool_full(self) -> None:
        """Every cell of the pool is held by replies in progress: the one that started last
        ends (the others go on next step with its cells freed)."""
        last = max(self.active, key=lambda s: s.started)
        last.fail("length", f"The KV pool ({self.ctx.n_pool:,} tokens, shared by "
                  f"{len(self.active)} replies at once) is full: this reply stopped here. Give "
                  "the pool more tokens in the model's load settings, or run fewer at once.")
        last.memory.clear()

    def _plan(self) -> list[tuple[Sequence, list[int], int, list[int] | None]]:
        """Fill the batch: (sequence, its tokens, index of the first in the batch, its guesses
        or None when it does not guess this step)."""
        batch = self.batch
        batch.clear()
        decoding = sum(1 for s in self.active if s.phase is Phase.WRITING)
        reading = len(self.active) - decoding
        alone = len(self.active) == 1
        room = batch.capacity - decoding * (1 + (self.most if alone else 0))
        share = max(1, room // reading) if reading else 0
        if decoding:
            share = min(share, PROMPT_CHUNK_BUSY)
        plan = []
        for seq in self.active:  # by slot: llama.cpp batches consecutive sequence ids
            draft: list[int] | None = None
            if seq.pending is not None:  # writing: the token chosen last, and guesses
                if alone and seq.guesser is not None and seq.history is not None:
                    draft = seq.guesser.propose(seq.history, seq.room(self.most))
                tokens = [seq.pending, *(draft or ())]
                outputs = [True] * len(tokens)
            else:
                end = seq.plain_end(min(len(seq.prompt), seq.read + share))
                if seq.request.sampling.seed >= 0 and end == len(seq.prompt) > seq.read + 1:
                    end -= 1  # seeded: the last token read alone, as a cached prompt reads it
                if seq.read < seq.keep_at < end:
                    end = seq.keep_at  # a long system prompt's state is kept on the way
                if seq.read < seq.checkpoint_at < end:
                    end = seq.checkpoint_at  # and the prompt's, before its last token
                tokens = seq.prompt[seq.read:end]
                outputs = [False] * len(tokens)
                outputs[-1] = end == len(seq.prompt)
            at = batch.n
            pos = seq.memory.next_pos
            for i, token in enumerate(tokens):
                batch.add(token, pos + i, seq.slot, outputs[i])
            plan.append((seq, tokens, at, draft))
        return plan

    def _read_image(self, seq: Sequence, span: ImageSpan) -> None:
        """Encode the image (unless it is at hand) and read up to n_batch of its positions."""
        assert self.vision is not None and self.embd_batch is not None
        offset = seq.read - span.start
        start = seq.memory.position(span.start)  # a piece after the first: held already
        self.abortable = seq  # the host's callback asks whether this one was stopped
        try:
            rows = self.vision.embeddings(
                span.key, lambda: seq.cancelled or bool(self.abort_cb(None)))
            # M-RoPE: 4 sections a row, and the text after goes on n_pos from the start.
            sections = self.vision.positions_at(span.key, start) if span.n_pos else None
        except (ImageError, ValueError) as exc:
            seq.fail("error", str(exc))
            return
        finally:
            self.abortable = None
        if rows is None:
            seq.fail("cancelled")
            return
        piece = rows[offset:offset + self.ctx.n_batch]
        done = seq.read + len(piece) == len(seq.prompt)
        at: int | np.ndarray = (seq.memory.next_pos if sections is None
                                else sections[:, offset:offset + len(piece)])
        self.abortable = seq
        self.ctx.set_abort(self.abort_cb)
        # Non-causal chunks (Gemma 3) see each other both ways: a step of their own, as
        # llama.cpp's mtmd helper reads them (a chunk longer than n_batch is read in pieces).
        self.ctx.set_causal(not span.non_causal)
        try:
            status = self.embd_batch.decode(self.ctx, piece, at, seq.slot, done)
        finally:
            self.ctx.set_causal(True)
            self.ctx.set_abort(None)
            self.abortable = None
        if status != 0:
            seq.memory.keep(seq.memory.n)
            if status == DECODE_ABORTED:
                seq.fail("cancelled")
            else:
                seq.fail("error", f"The engine failed: llama_decode returned {status}.")
            return
        tokens = seq.prompt[seq.read:seq.read + len(piece)]
        if isinstance(at, np.ndarray):
            seq.memory.appended(tokens, at[0].tolist(), start + span.n_pos)
        else:
            seq.memory.appended(tokens)
        self._read(seq, len(piece), len(piece) - 1, time.perf_counter())

    def _read(self, seq: Sequence, n: int, last: int, now: float) -> None:
        seq.read += n
        total = len(seq.prompt) - seq.reuse.cached
        if total > self.ctx.n_batch:
            self.send(p.PromptProgress(seq.rid, seq.read - seq.reuse.cached, total))
        if seq.read == seq.keep_at:
            self.slots.keep_prefix(seq.slot)
        if seq.read == seq.checkpoint_at:
            self.slots.keep_checkpoint(seq.slot)
        if seq.read < len(seq.prompt):
            return
        seq.prefilled = now
        if seq.cancelled:
            seq.fail("cancelled")
            return
        # The draft model reads the prompt too, before the first token rather than inside
        # the first guess (only a reply decoding alone guesses).
        if (self.draft is not None and len(self.active) == 1 and not seq.images
                and not self._draft_catch_up(seq)):
            seq.fail("cancelled")
            return
        token = seq.sampler.sample(self.ctx, last)
        if seq.history is not None:
            seq.history.extend([token])
        seq.take(token, now)

    def _draft_catch_up(self, seq: Sequence) -> bool:
        assert self.draft is not None
        self.abortable = seq
        try:
            return self.draft.catch_up(seq.prompt)
        finally:
            self.abortable = None

    def _decoded(self, seq: Sequence, base: int, at: int, draft: list[int] | None,
                 now: float) -> None:
        ctx, sampler = self.ctx, seq.sampler
        if draft is not None and seq.guesser is not None:
            out = seq.guesser.verify(draft, lambda i: sampler.sample(ctx, at + i))
        else:
            out, draft = [sampler.sample(ctx, at)], []
        if len(out) - 1 < len(draft):
            seq.memory.keep(base + len(out))  # rejected guesses leave the cells
        for j, token in enumerate(out):
            if not seq.take(token, now):
                seq.memory.keep(base + 1 + j)
                return
        if seq.history is not None:
            seq.history.extend(out)

    def _end_finished(self) -> None:
        ended = [s for s in self.active if s.phase is Phase.DONE]
        if not ended:
            return
        self.active = [s for s in self.active if s.phase is not Phase.DONE]
        for seq in ended:
            seq.finish(self.send)
            self.slots.release(seq.slot)
