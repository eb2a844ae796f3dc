"""The JSON objects OpenAI clients expect back, for chat and for plain completions.

Both endpoints produce the same events from the engine; a Format turns them into one endpoint's
objects (`chat.completion` / `chat.completion.chunk`, or `text_completion`).
"""

from __future__ import annotations

import json
import secrets
import time
from typing import Any

from inglenook.core.replies import Stats

FINISH_REASONS = {"stop": "stop", "length": "length"}


def usage(stats: Stats | list[Stats] | None) -> dict[str, Any]:
    """The counts of a reply; of several choices, the prompt once and every choice's tokens."""
    every = [s for s in (stats if isinstance(stats, list) else [stats]) if s is not None]
    prompt = every[0].prompt_tokens if every else 0
    completion = sum(s.generated_tokens for s in every)
    return {"prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": prompt + completion,
            # OpenAI's name for prompt tokens reused from the cache (the KV cache here): only
            # ever the caller's own, see engine/kv_reuse.py.
            "prompt_tokens_details": {"cached_tokens": every[0].cached_tokens if every else 0}}


def sse(data: dict[str, Any] | str) -> bytes:
    """One server-sent event."""
    text = data if isinstance(data, str) else json.dumps(
        data, ensure_ascii=False, separators=(",", ":"))
    return f"data: {text}\n\n".encode("utf-8", errors="replace")


class Format:
    """One reply's objects. `model` is the name /v1/models lists."""

    object_name = ""
    chunk_name = ""
    id_prefix = ""

    def __init__(self, model: str) -> None:
        self.model = model
        self.id = f"{self.id_prefix}-{secrets.token_hex(12)}"
        self.created = int(time.time())

    def _head(self, name: str) -> dict[str, Any]:
        return {"id": self.id, "object": name, "created": self.created, "model": self.model}

    def complete(self, texts: list[str], finishes: list[str],
                 stats: Stats | list[Stats] | None) -> dict[str, Any]:
        """The whole reply: one choice per text."""
        raise NotImplementedError

    def opening(self, index: int = 0) -> dict[str, Any] | None:
        """The first chunk of a choice's stream, before any text (chat: the role)."""
        return None

    def chunk(self, text: str | None, finish: str | None = None,
              index: int = 0) -> dict[str, Any]:
        raise NotImplementedError

    def usage_chunk(self, stats: Stats | list[Stats] | None) -> dict[str, Any]:
        """`stream_options.include_usage`: a last chunk with no choices and the counts."""
        return {**self._head(self.chunk_name), "choices": [], "usage": usage(stats)}


class ChatFormat(Format):
    object_name, chunk_name, id_prefix = "chat.completion", "chat.completion.chunk", "chatcmpl"

    def complete(self, texts: list[str], finishes: list[str],
                 stats: Stats | list[Stats] | None) -> dict[str, Any]:
        return {**self._head(self.object_name), "choices": [{
            "index": i, "message": {"role": "assistant", "content": text},
            "logprobs": None, "finish_reason": finish}
            for i, (text, finish) in enumerate(zip(texts, finishes, strict=True))],
            "usage": usage(stats)}

    def opening(self, index: int = 0) -> dict[str, Any] | None:
        return self._chunk({"role": "assistant", "content": ""}, None, index)

    def chunk(self, text: str | None, finish: str | None = None,
              index: int = 0) -> dict[str, Any]:
        return self._chunk({} if text is None else {"content": text}, finish, index)

    def _chunk(self, delta: dict[str, Any], finish: str | None, index: int) -> dict[str, Any]:
        return {**self._head(self.chunk_name), "choices": [{
            "index": index, "delta": delta, "logprobs": None, "finish_reason": finish}]}


class CompletionFormat(Format):
    object_name, chunk_name, id_prefix = "text_completion", "text_completion", "cmpl"

    def complete(self, texts: list[str], finishes: list[str],
                 stats: Stats | list[Stats] | None) -> dict[str, Any]:
        return {**self._head(self.object_name), "choices": [{
            "index": i, "text": text, "logprobs": None, "finish_reason": finish}
            for i, (text, finish) in enumerate(zip(texts, finishes, strict=True))],
            "usage": usage(stats)}

    def chunk(self, text: str | None, finish: str | None = None,
              index: int = 0) -> dict[str, Any]:
        return {**self._head(self.chunk_name), "choices": [{
            "index": index, "text": text or "", "logprobs": None, "finish_reason": finish}]}


def models_list(names: list[str], created: int) -> dict[str, Any]:
    """The models a request may name: the loaded ones first, then the library's (loaded when
    a request names one)."""
    data = [{"id": name, "object": "model", "created": created, "owned_by": "inglenook"}
            for name in names]
    return {"object": "list", "data": data}
