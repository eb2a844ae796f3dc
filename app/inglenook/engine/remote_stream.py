"""Reading one streamed reply (OpenAI chat-completion chunks over SSE) into protocol events.

Figures are measured here, at the client: time to the first token includes the network, and
tokens per second counts what arrived. Token counts come from the server's `usage` when it sends
one; otherwise each chunk with text counts as a token (llama.cpp-based servers send one token a
chunk; others batch, and then the counts are low).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from inglenook.core.replies import Finish, Stats
from inglenook.engine import protocol as p
from inglenook.engine.remote_api import error_text

# Reasoning that a server sends apart (`reasoning_content`) is put back between think tags,
# the form core/reasoning.py splits out of a reply, so nothing of it is lost.
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
KEPT = " The text received so far is kept."


class ReplyStream:
    """Turns the server-sent events of one reply into Delta events, then Stats and Finish."""

    def __init__(self, request_id: int, host: str, sent_at: float) -> None:
        self.request_id = request_id
        self.host = host
        self.sent_at = sent_at
        self.first_at = 0.0
        self.last_at = 0.0
        self.chunks = 0  # chunks that carried text
        self.finish_reason = ""
        self.done = False  # [DONE] arrived
        self.usage: dict[str, Any] = {}
        self.error = ""
        self.answered = False  # the server accepted the request (HTTP 2xx)
        self._thinking = False

    # -- reading -----------------------------------------------------------------------------
    def read(self, events: Iterable[Any], cancelled: Callable[[], bool]) -> Iterator[p.Delta]:
        """Deltas from `events` (objects with .event and .data) until the reply ends, the
        stream fails (the exception propagates) or `cancelled()` says to stop."""
        self.answered = True
        for sse in events:
            if cancelled():
                return
            data = sse.data.strip()
            if not data:
                continue
            if data == "[DONE]":
                self.done = True
                return
            try:
                chunk = json.loads(data)
            except (ValueError, RecursionError):  # nested past Python's stack
                self.error = f"{self.host} sent something that is not a reply chunk: {data[:80]!r}."
                return
            if sse.event == "error" or (isinstance(chunk, dict) and "error" in chunk):
                message = error_text(chunk) or data[:200]
                self.error = f"{self.host} reported an error during the reply: {message}"
                return
            if isinstance(chunk, dict):
                yield from self._chunk(chunk)

    def _chunk(self, chunk: dict[str, Any]) -> Iterator[p.Delta]:
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]
        choices = chunk.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            return
        choice = choices[0]  # we ask for one reply (n = 1)
        delta = choice.get("delta")
        if not isinstance(delta, dict):
            delta = {}
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        content = delta.get("content")
        text = ""
        if isinstance(reasoning, str) and reasoning:
            text = (THINK_OPEN if not self._thinking else "") + reasoning
            self._thinking = True
        if isinstance(content, str) and content:
            text += self._close_thinking() + content
        if text:
            now = time.monotonic()
            self.first_at = self.first_at or now
            self.last_at = now
            self.chunks += 1
            yield p.Delta(self.request_id, text)
        if isinstance(choice.get("finish_reason"), str):
            self.finish_reason = choice["finish_reason"]

    def _close_thinking(self) -> str:
        if not self._thinking:
            return ""
        self._thinking = False
        return THINK_CLOSE

    # -- the end -----------------------------------------------------------------------------
    def end(self, cancelled: bool, n_ctx: int, seed: int) -> Iterator[Any]:
        """What follows the text: a think block closed, Stats (when the server answered) and
        exactly one Finished."""
        if closing := self._close_thinking():
            yield p.Delta(self.request_id, closing)
        if self.answered:
            yield p.ReplyStats(self.request_id, self.stats(n_ctx, seed))
        yield p.Finished(self.request_id, self.finish(cancelled))

    def finish(self, cancelled: bool) -> Finish:
        kept = KEPT if self.chunks else ""
        if cancelled:
            return Finish("cancelled")
        if self.error:
            return Finish("error", self.error + kept)
        if self.finish_reason == "length":
            return Finish("length")
        if self.finish_reason or self.done:
            return Finish("stop")
        return Finish("error", f"{self.host} closed the connection before the reply ended."
                      + kept)

    def stats(self, n_ctx: int, seed: int) -> Stats:
        prompt = _count(self.usage.get("prompt_tokens"))
        details = self.usage.get("prompt_tokens_details")
        cached = _count(details.get("cached_tokens")) if isinstance(details, dict) else 0
        generated = _count(self.usage.get("completion_tokens")) or self.chunks
        ttft = self.first_at - self.sent_at if self.first_at else 0.0
        decoding = self.last_at - self.first_at
        return Stats(
            prompt_tokens=prompt, cached_tokens=min(cached, prompt), generated_tokens=generated,
            ttft_s=max(ttft, 0.0),
            decode_tok_s=(generated - 1) / decoding if generated > 1 and decoding > 0 else 0.0,
            prompt_tok_s=(prompt - cached) / ttft if prompt > cached and ttft > 0 else 0.0,
            context_used=prompt + generated, n_ctx=n_ctx, seed=seed)


def _count(value: object) -> int:
    return value if type(value) is int and value > 0 else 0
