"""Finding tool calls in a model's reply as it streams.

A parser turns deltas of reply text into events: text to show, the start of a call (show a
card, not the markup), and its end: the parsed calls, or the raw text and why it could not be
read. Every `CallStarted` is followed by exactly one `CallParsed` or `CallMalformed`, at the
latest from `flush()`. Text that may be the beginning of a marker is held back until the next
delta says, so a marker split over deltas never shows. Qt-free; one parser per reply.
The formats are in parsers.py.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from inglenook.core.jsonload import JsonLoadError, loads
from inglenook.tools.formats import ToolCall, new_call_id


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class CallStarted:
    name: str = ""  # known this early only where the header names it (gpt-oss)


@dataclass(frozen=True)
class CallParsed:
    calls: tuple[ToolCall, ...]
    raw: str  # the markup as the model wrote it


@dataclass(frozen=True)
class CallMalformed:
    raw: str
    error: str  # for the card and, as the tool result, for the model


ParseEvent = TextDelta | CallStarted | CallParsed | CallMalformed


class Malformed(ValueError):
    """A call whose text cannot be read; the message says why."""


class JsonScanner:
    """Finds where a JSON object or array that opens at position 0 closes, incrementally: each
    call scans only what was appended since (arguments can be long, deltas are tokens)."""

    def __init__(self) -> None:
        self.pos = 0
        self._depth = 0
        self._in_string = False
        self._escaped = False

    def end(self, text: str) -> int | None:
        """The index just past the closing bracket, or None while it has not come."""
        for i in range(self.pos, len(text)):
            c = text[i]
            if self._in_string:
                if self._escaped:
                    self._escaped = False
                elif c == "\\":
                    self._escaped = True
                elif c == '"':
                    self._in_string = False
            elif c == '"':
                self._in_string = True
            elif c in "{[":
                self._depth += 1
            elif c in "}]":
                self._depth -= 1
                if self._depth <= 0:
                    self.pos = i + 1
                    return i + 1
        self.pos = len(text)
        return None


def partial_marker(text: str, markers: tuple[str, ...]) -> int:
    """How many characters at the end of `text` could be the start of one of `markers`."""
    return max((n for m in markers for n in range(min(len(m) - 1, len(text)), 0, -1)
                if text.endswith(m[:n])), default=0)


_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$")
_ID = re.compile(r"^[A-Za-z0-9]{9}$")


def load_value(text: str) -> Any:
    """JSON a model wrote (bounded depth; code fences around it tolerated)."""
    try:
        return loads(_FENCE.sub("", text.strip()))
    except JsonLoadError as exc:
        raise Malformed(f"the call could not be read: {exc}") from None


def arguments_of(value: object) -> Mapping[str, Any]:
    """A call's arguments: an object, or an object encoded as a JSON string (some models)."""
    if value is None:
        return {}
    if isinstance(value, str):
        value = load_value(value) if value.strip() else {}
    if not isinstance(value, dict):
        raise Malformed("the arguments are not a JSON object")
    return value


def call_of(item: object, need_arguments: bool = False) -> ToolCall:
    """{"name": …, "arguments"|"parameters": {…}, "id"?: …}, or OpenAI's {"function": {…}}.
    `need_arguments`: where any JSON object could be a call (Llama), one without arguments
    is not taken for one."""
    if isinstance(item, dict) and isinstance(item.get("function"), dict):
        item = {**item["function"], "id": item.get("id")}
    if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"]:
        raise Malformed("the call does not name a tool")
    if need_arguments and "arguments" not in item and "parameters" not in item:
        raise Malformed("the call has no arguments")
    args = item["arguments"] if "arguments" in item else item.get("parameters")
    given = item.get("id")
    call_id = given if isinstance(given, str) and _ID.match(given) else new_call_id()
    return ToolCall(item["name"], arguments_of(args), call_id)


def calls_of(text: str, need_arguments: bool = False) -> tuple[ToolCall, ...]:
    """One call object or a list of them."""
    value = load_value(text)
    items = value if isinstance(value, list) else [value]
    if not items:
        raise Malformed("the list of calls is empty")
    return tuple(call_of(item, need_arguments) for item in items)


class ToolCallParser:
    """Base of the per-format parsers: `feed` runs `_step` until it makes no progress."""

    def __init__(self) -> None:
        self._buf = ""
        self._events: list[ParseEvent] = []
        self._open = False  # a CallStarted awaits its end

    def feed(self, text: str) -> list[ParseEvent]:
        self._buf += text
        while self._buf and self._step():
            pass
        return self._take()

    def flush(self) -> list[ParseEvent]:
        """The end of the reply: what was held back, and the end of an unfinished call."""
        self._finish()
        self._buf = ""
        if self._open:  # a subclass left a call open: never leave a card hanging
            self._end_malformed("", "the reply ended in the middle of the call")
        return self._take()

    def _step(self) -> bool:
        """Consume what can be decided from the start of the buffer; False: wait for more."""
        raise NotImplementedError

    def _finish(self) -> None:
        raise NotImplementedError

    def _take(self) -> list[ParseEvent]:
        events, self._events = self._events, []
        return events

    def _text(self, text: str) -> None:
        if text:
            self._events.append(TextDelta(text))

    def _start(self, name: str = "") -> None:
        self._events.append(CallStarted(name))
        self._open = True

    def _end(self, parse: Any, raw: str) -> None:
        """End the open call with the result of `parse()` (a tuple of calls)."""
        try:
            calls = parse()
        except Malformed as exc:
            self._end_malformed(raw, str(exc))
            return
        self._events.append(CallParsed(calls, raw))
        self._open = False

    def _end_malformed(self, raw: str, error: str) -> None:
        self._events.append(CallMalformed(raw, error))
        self._open = False
