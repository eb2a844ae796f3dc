"""The JSON objects OpenAI clients expect back, for chat and for plain completions.

Every dialect's endpoints produce the same events from the engine, read apart by a
ChoiceReader (reasoning, text, tool calls); a Format turns them into one endpoint's objects
(here `chat.completion` / `chat.completion.chunk`, or `text_completion`; anthropic.py has
Anthropic's). A Format is one reply's: it may keep what it has sent so far.
"""

from __future__ import annotations

import json
import secrets
import time
from typing import Any

from starlette.responses import JSONResponse

from inglenook.core.replies import Stats, TokenLogprob, TokenOdds
from inglenook.server.errors import ApiError
from inglenook.server.reply_reader import Choice, ReaderEvent
from inglenook.tools.formats import ToolCall
from inglenook.tools.parsing import CallParsed, TextDelta
from inglenook.tools.stream import ReasoningDelta

FINISH_REASONS = {"stop": "stop", "length": "length"}


def usage(stats: Stats | list[Stats] | None) -> dict[str, Any]:
    """The counts of a reply; of several choices, the prompt once and every choice's tokens."""
    every = [s for s in (stats if isinstance(stats, list) else [stats]) if s is not None]
    prompt = every[0].prompt_tokens if every else 0
    completion = sum(s.generated_tokens for s in every)
    return {"prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "completion_tokens_details": {
                "reasoning_tokens": sum(s.reasoning_tokens for s in every)},
            # OpenAI's name for prompt tokens reused from the cache (the KV cache here): only
            # ever the caller's own, see engine/kv_reuse.py.
            "prompt_tokens_details": {"cached_tokens": every[0].cached_tokens if every else 0}}


def odds_json(odds: TokenOdds) -> dict[str, Any]:
    return {"token": odds.text, "logprob": odds.logprob, "bytes": list(odds.utf8)}


def logprobs_json(tokens: list[TokenLogprob] | None) -> dict[str, Any] | None:
    """Chat's `logprobs` object: each chosen token with its `top_logprobs`."""
    if tokens is None:
        return None
    return {"content": [{**odds_json(t.chosen), "top_logprobs": [odds_json(o) for o in t.top]}
                        for t in tokens], "refusal": None}


def compact(data: dict[str, Any]) -> str:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def sse(data: dict[str, Any] | str, event: str = "") -> bytes:
    """One server-sent event (named, for Anthropic's)."""
    text = data if isinstance(data, str) else compact(data)
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {text}\n\n".encode("utf-8", errors="replace")


def arguments_text(call: ToolCall) -> str:
    return json.dumps(dict(call.arguments), ensure_ascii=False)


class Format:
    """One reply's objects. `model` is the name /v1/models lists. `split`: reasoning told
    apart from the answer; `tools`: the request offered tools (calls are parsed)."""

    object_name = ""
    chunk_name = ""
    id_prefix = ""
    media_type = "text/event-stream; charset=utf-8"
    split = True
    echo = ""  # a completion's prompt, sent back before its text (`echo`)

    def __init__(self, model: str) -> None:
        self.model = model
        self.id = f"{self.id_prefix}-{secrets.token_hex(12)}"
        self.created = int(time.time())

    def _head(self, name: str) -> dict[str, Any]:
        return {"id": self.id, "object": name, "created": self.created, "model": self.model}

    def complete(self, choices: list[Choice], stats: list[Stats]) -> dict[str, Any]:
        """The whole reply: one object for every choice."""
        raise NotImplementedError

    def logprobs(self, index: int, tokens: tuple[TokenLogprob, ...]) -> None:
        """Log-probabilities of tokens whose text comes next (a dialect that sends them
        keeps them for the choice's next chunk)."""

    def begin(self) -> list[bytes]:
        """What a stream opens with, sent with its first event."""
        return []

    def event(self, index: int, event: ReaderEvent) -> list[bytes]:
        raise NotImplementedError

    def end(self, index: int, choice: Choice) -> list[bytes]:
        """A choice ended well (its finish is set)."""
        raise NotImplementedError

    def close(self, stats: list[Stats], include_usage: bool) -> list[bytes]:
        """Every choice ended well."""
        return [sse("[DONE]")]

    def error_event(self, error: ApiError) -> bytes:
        """An error after the status was sent: an event OpenAI's clients raise."""
        return sse(error.body())

    def error_response(self, error: ApiError) -> JSONResponse:
        """An error before anything was sent, with its status."""
        return error.response()


class ChatFormat(Format):
    object_name, chunk_name, id_prefix = "chat.completion", "chat.completion.chunk", "chatcmpl"

    def __init__(self, model: str) -> None:
        super().__init__(model)
        self._opened: set[int] = set()
        self._calls: dict[int, int] = {}  # calls streamed so far, per choice
        self._logprobs: dict[int, list[TokenLogprob]] = {}  # not sent yet, per choice

    def complete(self, choices: list[Choice], stats: list[Stats]) -> dict[str, Any]:
        return {**self._head(self.object_name), "choices": [{
            "index": i, "message": self._message(c), "logprobs": logprobs_json(c.logprobs),
            "finish_reason": self._finish(c)} for i, c in enumerate(choices)],
            "usage": usage(stats)}

    @staticmethod
    def _message(c: Choice) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant",
                                   "content": c.text.strip() or None if c.calls else c.text}
        if c.reasoning:
            message["reasoning_content"] = c.reasoning.strip()
        if c.calls:
            message["tool_calls"] = [{"id": call.id, "type": "function", "function": {
                "name": call.name, "arguments": arguments_text(call)}} for call in c.calls]
        return message

    @staticmethod
    def _finish(c: Choice) -> str:
        """The limit said before the calls: a call may have been cut after them."""
        return "tool_calls" if c.calls and c.finish != "length" else FINISH_REASONS[c.finish]

    def event(self, index: int, event: ReaderEvent) -> list[bytes]:
        if isinstance(event, TextDelta):
            deltas = [{"content": event.text}] if event.text else []
        elif isinstance(event, ReasoningDelta):
            deltas = [{"reasoning_content": event.text}]
        else:
            deltas = [self._call_delta(index, call) for call in event.calls]
        return [*self._open(index, bool(deltas)), *(sse(self._chunk(d, None, index))
                                                    for d in deltas)]

    def logprobs(self, index: int, tokens: tuple[TokenLogprob, ...]) -> None:
        self._logprobs.setdefault(index, []).extend(tokens)

    def _call_delta(self, index: int, call: ToolCall) -> dict[str, Any]:
        k = self._calls.get(index, 0)
        self._calls[index] = k + 1
        return {"tool_calls": [{"index": k, "id": call.id, "type": "function", "function": {
            "name": call.name, "arguments": arguments_text(call)}}]}

    def _open(self, index: int, now: bool = True) -> list[bytes]:
        if not now or index in self._opened:
            return []
        self._opened.add(index)
        return [sse(self._chunk({"role": "assistant", "content": ""}, None, index,
                                logprobs=False))]

    def end(self, index: int, choice: Choice) -> list[bytes]:
        return [*self._open(index), sse(self._chunk({}, self._finish(choice), index))]

    def close(self, stats: list[Stats], include_usage: bool) -> list[bytes]:
        last = ([sse({**self._head(self.chunk_name), "choices": [], "usage": usage(stats)})]
                if include_usage else [])
        return [*last, sse("[DONE]")]

    def _chunk(self, delta: dict[str, Any], finish: str | None, index: int,
               logprobs: bool = True) -> dict[str, Any]:
        """`logprobs`: the choice's held log-probabilities go with this chunk (its text)."""
        held = self._logprobs.pop(index, None) if logprobs else None
        return {**self._head(self.chunk_name), "choices": [{
            "index": index, "delta": delta, "logprobs": logprobs_json(held),
            "finish_reason": finish}]}


class CompletionFormat(Format):
    """Legacy completions: `logprobs` as tokens, token_logprobs, top_logprobs (token →
    logprob) and text_offset (where each token starts in the text sent back)."""

    object_name, chunk_name, id_prefix = "text_completion", "text_completion", "cmpl"
    split = False  # the model's text as it wrote it

    def __init__(self, model: str) -> None:
        super().__init__(model)
        self._logprobs: dict[int, list[TokenLogprob]] = {}  # not sent yet, per choice
        self._offsets: dict[int, int] = {}  # text sent so far, per choice (echo included)

    def complete(self, choices: list[Choice], stats: list[Stats]) -> dict[str, Any]:
        return {**self._head(self.object_name), "choices": [{
            "index": i, "text": self.echo + c.text,
            "logprobs": self._legacy(i, c.logprobs),
            "finish_reason": FINISH_REASONS[c.finish]} for i, c in enumerate(choices)],
            "usage": usage(stats)}

    def logprobs(self, index: int, tokens: tuple[TokenLogprob, ...]) -> None:
        self._logprobs.setdefault(index, []).extend(tokens)

    def _legacy(self, index: int, tokens: list[TokenLogprob] | None) -> dict[str, Any] | None:
        if tokens is None:
            return None
        at = self._offsets.setdefault(index, len(self.echo))
        offsets = []
        for t in tokens:
            offsets.append(at)
            at += len(t.chosen.text)
        self._offsets[index] = at
        return {"tokens": [t.chosen.text for t in tokens],
                "token_logprobs": [t.chosen.logprob for t in tokens],
                "top_logprobs": [{o.text: o.logprob for o in t.top} for t in tokens],
                "text_offset": offsets}

    def event(self, index: int, event: ReaderEvent) -> list[bytes]:
        if isinstance(event, CallParsed) or not event.text:
            return []
        return [*self._echo(index), sse(self._chunk(event.text, None, index))]

    def end(self, index: int, choice: Choice) -> list[bytes]:
        return [*self._echo(index), sse(self._chunk("", FINISH_REASONS[choice.finish], index))]

    def _echo(self, index: int) -> list[bytes]:
        """The prompt, once per choice, before its first text."""
        if not self.echo or index in self._offsets:
            return []
        self._offsets[index] = len(self.echo)
        return [sse(self._chunk(self.echo, None, index, logprobs=False))]

    def close(self, stats: list[Stats], include_usage: bool) -> list[bytes]:
        last = ([sse({**self._head(self.chunk_name), "choices": [], "usage": usage(stats)})]
                if include_usage else [])
        return [*last, sse("[DONE]")]

    def _chunk(self, text: str, finish: str | None, index: int,
               logprobs: bool = True) -> dict[str, Any]:
        held = self._logprobs.pop(index, None) if logprobs else None
        return {**self._head(self.chunk_name), "choices": [{
            "index": index, "text": text, "logprobs": self._legacy(index, held),
            "finish_reason": finish}]}


def models_list(names: list[str], created: int) -> dict[str, Any]:
    """The models a request may name: the loaded ones first, then the library's (loaded when
    a request names one)."""
    data = [{"id": name, "object": "model", "created": created, "owned_by": "inglenook"}
            for name in names]
    return {"object": "list", "data": data}
