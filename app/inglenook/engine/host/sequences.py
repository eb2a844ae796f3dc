"""One reply being written: its prompt and how much of it the KV cells hold, its sampler chain
and stop strings, text not sent yet, speculation, and its figures. The batch loop (batch.py)
decodes it with the others; everything here belongs to this reply alone."""

from __future__ import annotations

import enum
import time
from collections.abc import Callable
from typing import Any

from inglenook.core.context import Fit
from inglenook.core.messages import GenerationRequest
from inglenook.core.reasoning import ReasoningCount
from inglenook.core.replies import Finish, FinishReason, Stats, TokenLogprob, TokenOdds
from inglenook.core.streaming import StopMatcher, Utf8Stream
from inglenook.engine import protocol as p
from inglenook.engine.host.llama import Sampler, SeqMemory
from inglenook.engine.host.tokenizing import Tokenizer
from inglenook.engine.host.vision import ImageSpan
from inglenook.engine.kv_reuse import Reuse
from inglenook.engine.speculative import Guesser, Tally, TokenHistory

# Deltas are coalesced so the window's process wakes ~60 times a second, not once per token:
# on a 2-core machine every wake-up competes with llama.cpp's threads.
DELTA_BATCH_S = 0.030


class Phase(enum.Enum):
    """Where a reply is (llama-server's slot_state): reading its prompt into the KV cells,
    writing (a chosen token waits in `pending` to be decoded), or done (`reason` says why)."""

    READING = "reading"
    WRITING = "writing"
    DONE = "done"


class Sequence:
    """`memory` is the sequence's KV slot, already holding `reuse.cached` prompt tokens.
    `keep_at`: a long system prompt's length, whose state is kept as the prompt passes it."""

    def __init__(self, request: GenerationRequest, tokens: list[int], fit: Fit,
                 received: float, slot: int, memory: SeqMemory, reuse: Reuse, keep_at: int,
                 sampler: Sampler, seed: int, tokenizer: Tokenizer, is_eog: Callable[[int], bool],
                 n_ctx: int, guesser: Guesser | None = None) -> None:
        self.request, self.rid = request, request.request_id
        self.prompt, self.fit = tokens, fit
        self.slot, self.memory, self.reuse, self.keep_at = slot, memory, reuse, keep_at
        self.read = reuse.cached  # prompt tokens in the KV cells
        self.sampler, self.seed = sampler, seed
        self.tokenizer, self.is_eog, self.n_ctx = tokenizer, is_eog, n_ctx
        self.guesser = guesser
        self.images: tuple[ImageSpan, ...] = ()  # where the prompt's images are (vision.py)
        # Where a state is kept as the prompt passes it (SlotStates.keep_checkpoint; 0: none):
        # before its last token, so that the next turn and a regenerated reply both extend it.
        self.checkpoint_at = 0
        self.tally = guesser.tally if guesser is not None else Tally()
        self.history = TokenHistory(tokens) if guesser is not None else None
        self.phase = Phase.READING
        self.pending: int | None = None  # the last token chosen, decoded in the next step
        self.generated = 0
        self.reason: FinishReason | None = None  # set when the reply ends
        self.message = ""
        self.cancelled = False
        # A chat reply also ends where its template's turn does; a plain completion (raw) only
        # at the model's end-of-generation tokens and the stop strings asked for.
        chat = request.raw is None
        self._end_tokens = tokenizer.end_tokens if chat else frozenset()
        self._utf8 = Utf8Stream()
        self._stops = StopMatcher(request.sampling.stop + (tokenizer.end_texts if chat else ()))
        self._stopped_by_string = False
        self._text: list[str] = []
        self._logprobs: list[TokenLogprob] = []  # of the tokens whose text is not sent yet
        self._sent_at = 0.0
        self.received = received
        self.started = time.perf_counter()  # admitted: reading the prompt from here
        self.prefilled = self.first_at = 0.0
        self.thought = ReasoningCount(None)  # set by the host from the model's traits

    @property
    def reading(self) -> bool:
        return self.phase is Phase.READING

    @property
    def image_now(self) -> ImageSpan | None:
        """The image whose positions the prompt reads next, if it is one."""
        if self.reading:
            for span in self.images:
                if span.start <= self.read < span.start + span.n:
                    return span
        return None

    def plain_end(self, end: int) -> int:
        """`end`, or sooner: where the next image starts (its positions are a step apart)."""
        for span in self.images:
            if self.read < span.start < end:
                return span.start
        return end

    @property
    def reading_stopped(self) -> bool:
        return self.read < len(self.prompt)

    @property
    def unread(self) -> int:
        return len(self.prompt) - self.read

    def room(self, most: int) -> int:
        """Guesses that could still be used: within max_tokens, the context, `most`."""
        max_tokens = self.request.sampling.max_tokens
        left = max_tokens - self.generated - 1 if max_tokens > 0 else most
        return min(left, most, self.n_ctx - 2 - self.memory.n)

    def take(self, token: int, now: float) -> bool:
        """A token the model chose. False when the reply ends here: then the token is not
        decoded, and the KV cells hold the prompt and the tokens before it."""
        if not self.first_at:
            self.first_at = now
        odds = self.sampler.odds.pop(0) if self.sampler.odds else None
        if self.is_eog(token) or token in self._end_tokens:
            return self._end("stop")
        self.generated += 1
        if odds is not None:
            self._logprobs.append(TokenLogprob(
                self._odds(token, odds[0]), tuple(self._odds(t, lp) for t, lp in odds[1])))
        piece = self.tokenizer.piece(token)
        self.thought.feed(piece.decode("utf-8", errors="replace"))
        text, stopped = self._stops.feed(self._utf8.feed(piece))
        if text:
            self._text.append(text)
        if stopped:
            self._stopped_by_string = True
            return self._end("stop")
        if self.cancelled:
            return self._end("cancelled")
        max_tokens = self.request.sampling.max_tokens
        if self.generated == max_tokens or len(self.prompt) + self.generated >= self.n_ctx:
            return self._end("length")
        self.pending, self.phase = token, Phase.WRITING
        return True

    def _odds(self, token: int, logprob: float) -> TokenOdds:
        piece = self.tokenizer.piece(token)
        return TokenOdds(piece.decode("utf-8", errors="replace"), logprob, tuple(piece))

    def _end(self, reason: FinishReason) -> bool:
        self.reason, self.pending, self.phase = reason, None, Phase.DONE
        return False

    def fail(self, reason: FinishReason, message: str = "") -> None:
        self.reason, self.message, self.pending = reason, message, None
        self.phase = Phase.DONE

    def flush(self, send: Callable[[Any], None], now: float) -> None:
        """Send the text written since the last delta, at most every DELTA_BATCH_S."""
        if self._text and now - self._sent_at >= DELTA_BATCH_S:
            self._send_logprobs(send)
            send(p.Delta(self.rid, "".join(self._text)))
            self._text.clear()
            self._sent_at = now

    def _send_logprobs(self, send: Callable[[Any], None]) -> None:
        if self._logprobs:
            send(p.Logprobs(self.rid, tuple(self._logprobs)))
            self._logprobs.clear()

    def finish(self, send: Callable[[Any], None]) -> None:
        """The last text, the figures and the Finished event."""
        if not self._stopped_by_string:  # bytes of an unfinished character, held-back text
            text, _ = self._stops.feed(self._utf8.flush())
            self._text.append(text + self._stops.flush())
        self._send_logprobs(send)
        if "".join(self._text):
            send(p.Delta(self.rid, "".join(self._text)))
        self._text.clear()
        self.sampler.close()
        reason = self.reason or "error"
        # A reply stopped while its prompt was read, or failed, has no figures to give.
        if reason != "error" and not (reason == "cancelled" and self.reading_stopped):
            send(p.ReplyStats(self.rid, self.stats()))
        send(p.Finished(self.rid, Finish(reason, self.message, stop=self._stops.matched)))

    def stats(self) -> Stats:
        done = time.perf_counter()
        first, reuse, n_gen = self.first_at, self.reuse, self.generated
        new_prompt = len(self.prompt) - reuse.cached
        prefilled = self.prefilled or done
        return Stats(
            prompt_tokens=len(self.prompt), cached_tokens=reuse.cached, generated_tokens=n_gen,
            ttft_s=(first or done) - self.received,
            decode_tok_s=(n_gen - 1) / (done - first) if n_gen > 1 and done > first else 0.0,
            prompt_tok_s=new_prompt / (prefilled - self.started)
            if prefilled > self.started else 0.0,
            context_used=self.memory.n, n_ctx=self.n_ctx, dropped_messages=self.fit.dropped,
            seed=self.seed, dropped_start=self.fit.dropped_start, cache_source=reuse.source,
            state_restore_s=reuse.restore_s, shifted_tokens=reuse.shifted,
            drafted_tokens=self.tally.drafted, accepted_tokens=self.tally.accepted,
            grammar_full_masks=self.sampler.full_masks, reasoning_tokens=self.thought.count)
