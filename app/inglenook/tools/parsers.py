"""The tool-call parser of each format (see formats.py for what each looks like)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from inglenook.tools.formats import ToolCall, ToolFormat
from inglenook.tools.parsing import (
    CallMalformed,
    CallParsed,
    JsonScanner,
    Malformed,
    TextDelta,
    ToolCallParser,
    arguments_of,
    call_of,
    calls_of,
    load_value,
    partial_marker,
)

MAX_HEADER = 512  # a gpt-oss message header is a few words; longer is not a header


class HermesParser(ToolCallParser):
    """`<tool_call>{json}</tool_call>`, anywhere in the reply, any number of times. A model
    that forgets the closing tag ends the call at the next opening one, or at the end."""

    OPEN, CLOSE = "<tool_call>", "</tool_call>"

    def __init__(self) -> None:
        super().__init__()
        self._scan = 0  # where the search for the end of the call goes on

    def _step(self) -> bool:
        if not self._open:
            at = self._buf.find(self.OPEN)
            if at < 0:
                keep = partial_marker(self._buf, (self.OPEN,))
                self._text(self._buf[:len(self._buf) - keep])
                self._buf = self._buf[len(self._buf) - keep:]
                return False
            self._text(self._buf[:at])
            self._buf, self._scan = self._buf[at + len(self.OPEN):], 0
            self._start()
            return True
        close = self._buf.find(self.CLOSE, self._scan)
        reopen = self._buf.find(self.OPEN, self._scan)
        if close < 0 and reopen < 0:
            self._scan = max(0, len(self._buf) - len(self.CLOSE) + 1)
            return False
        closed = close >= 0 and (reopen < 0 or close < reopen)
        at = close if closed else reopen
        body = self._buf[:at]
        self._buf = self._buf[at + len(self.CLOSE):] if closed else self._buf[at:]
        self._end(lambda: calls_of(body), self.OPEN + body + (self.CLOSE if closed else ""))
        return True

    def _finish(self) -> None:
        if self._open:
            body = self._buf
            self._end(lambda: calls_of(body), self.OPEN + body)
        else:
            self._text(self._buf)


class LlamaParser(ToolCallParser):
    """A reply that is a JSON call (`{"name": …, "parameters": …}`), maybe after
    `<|python_tag|>`, maybe several separated by `;`. A card opens as soon as the text starts
    the way a call does; a reply that turns out to be other JSON is text."""

    TAG = "<|python_tag|>"
    _CALL_START = re.compile(
        r'\{\s*"name"\s*:\s*"(?:[^"\\]|\\.)*"\s*,\s*"(?:parameters|arguments)"\s*:')

    def __init__(self) -> None:
        super().__init__()
        self._mode = "start"  # start: a call may come | call: in one | text: no more calls
        self._after_call = False
        self._tagged = False
        self._scanner = JsonScanner()

    def _step(self) -> bool:
        if self._mode == "text":
            self._text(self._buf)
            self._buf = ""
            return False
        if self._mode == "start":
            return self._decide()
        return self._in_call()

    def _decide(self) -> bool:
        rest = self._buf.lstrip(" \t\r\n;" if self._after_call else " \t\r\n")
        if not rest or (self.TAG.startswith(rest) and not self._after_call):
            return False
        if rest.startswith(self.TAG) and not self._after_call:
            self._buf, self._tagged = rest[len(self.TAG):], True
            self._start()
        elif rest.startswith("{"):
            self._buf, self._tagged = rest, False
        else:
            self._mode = "text"
            return True
        self._mode, self._scanner = "call", JsonScanner()
        return True

    def _in_call(self) -> bool:
        if self._scanner.pos == 0:
            self._buf = self._buf.lstrip()
            if not self._buf:
                return False
            if not self._buf.startswith("{"):  # python_tag with code: a built-in tool
                return False  # held to the end, then reported
        if not self._open and self._CALL_START.match(self._buf):
            self._start()
        end = self._scanner.end(self._buf)
        if end is None:
            return False
        raw, self._buf = self._buf[:end], self._buf[end:]
        try:
            calls = calls_of(raw, need_arguments=True)
        except Malformed as exc:
            if self._open:
                self._end_malformed(self._raw(raw), str(exc))
                self._mode, self._after_call = "start", True
            else:  # JSON that is not a call: the reply is text
                self._text(raw)
                self._mode = "text"
            return True
        if not self._open:
            self._start()
        self._events.append(CallParsed(calls, self._raw(raw)))
        self._open = False
        self._mode, self._after_call = "start", True
        return True

    def _raw(self, text: str) -> str:
        return self.TAG + text if self._tagged else text

    def _finish(self) -> None:
        if self._mode == "call" and self._open:
            self._end_malformed(self._raw(self._buf), "the call is not complete JSON")
        elif not (self._mode == "start" and self._after_call and not self._buf.strip()):
            self._text(self._buf)


class MistralParser(ToolCallParser):
    """`[TOOL_CALLS]` then a JSON list of calls (v3), or `name[ARGS]{…}` with an optional
    `[CALL_ID]id` before `[ARGS]` (v11+, one call per marker)."""

    MARK = "[TOOL_CALLS]"
    _NAMED = re.compile(r"([A-Za-z0-9_.\-]+)(?:\[CALL_ID\]([A-Za-z0-9]+))?\[ARGS\]")

    def __init__(self) -> None:
        super().__init__()
        self._raw = ""
        self._named: tuple[str, str] | None = None  # (name, id) of a v11 call
        self._scanner: JsonScanner | None = None

    def _step(self) -> bool:
        if not self._open:
            at = self._buf.find(self.MARK)
            if at < 0:
                keep = partial_marker(self._buf, (self.MARK,))
                self._text(self._buf[:len(self._buf) - keep])
                self._buf = self._buf[len(self._buf) - keep:]
                return False
            self._text(self._buf[:at])
            self._buf, self._raw, self._scanner = self._buf[at + len(self.MARK):], self.MARK, None
            self._start()
            return True
        if self._scanner is None:
            return self._head()
        if self._scanner.pos == 0:
            self._buf = self._buf.lstrip()
            if not self._buf:
                return False
        end = self._scanner.end(self._buf)
        if end is None:
            return False
        body, self._buf = self._buf[:end], self._buf[end:]
        self._end(lambda: self._calls(body), self._raw + body)
        return True

    def _head(self) -> bool:
        """What follows the marker: a list, or a name and [ARGS]; held until it is clear."""
        rest = self._buf.lstrip()
        if rest.startswith("["):
            self._named = None
        else:
            match = self._NAMED.match(rest)
            if match is None:
                return False
            self._named = (match.group(1), match.group(2) or "")
            self._raw += self._buf[:len(self._buf) - len(rest) + match.end()]
            rest = rest[match.end():]
        self._buf, self._scanner = rest, JsonScanner()
        return bool(rest)

    def _calls(self, body: str) -> tuple[ToolCall, ...]:
        if self._named is None:
            return calls_of(body)
        name, call_id = self._named
        return (call_of({"name": name, "arguments": load_value(body), "id": call_id}),)

    def _finish(self) -> None:
        if self._open:
            self._end_malformed(self._raw + self._buf, "the call is not complete")
        else:
            self._text(self._buf)


class HarmonyParser(ToolCallParser):
    """gpt-oss: a message whose header names a recipient (`to=functions.NAME`) is a call, its
    body the arguments up to `<|call|>`. Every other header goes out as text, unchanged, for
    the reasoning splitter (core/reasoning.py), which reads the channels."""

    STARTS = ("<|start|>", "<|channel|>")
    MESSAGE = "<|message|>"
    ENDS = ("<|call|>", "<|end|>", "<|return|>")
    _RECIPIENT = re.compile(r"\bto=(?:functions\.)?([^\s<]+)")

    def __init__(self) -> None:
        super().__init__()
        self._mode = "text"  # text | header | call
        self._first = True  # the reply's start: the header may begin with ` to=` itself
        self._head = ""
        self._name = ""
        self._scan = 0

    def _step(self) -> bool:
        if self._mode == "header":
            return self._header()
        if self._mode == "call":
            return self._body()
        if self._first:
            rest = self._buf.lstrip()
            if "to=".startswith(rest):
                return False
            self._first = False
            if rest.startswith("to="):
                self._mode = "header"
                return True
        starts = [at for at in (self._buf.find(m) for m in self.STARTS) if at >= 0]
        if not starts:
            keep = partial_marker(self._buf, self.STARTS)
            self._text(self._buf[:len(self._buf) - keep])
            self._buf = self._buf[len(self._buf) - keep:]
            return False
        self._text(self._buf[:min(starts)])
        self._buf, self._mode = self._buf[min(starts):], "header"
        return True

    def _header(self) -> bool:
        at = self._buf.find(self.MESSAGE)
        if at < 0:
            if len(self._buf) > MAX_HEADER:  # not a header after all
                self._text(self._buf)
                self._buf, self._mode = "", "text"
            return False
        end = at + len(self.MESSAGE)
        head, self._buf = self._buf[:end], self._buf[end:]
        recipient = self._RECIPIENT.search(head)
        if recipient is None or recipient.group(1) == "assistant":
            self._text(head)
            self._mode = "text"
            return True
        self._head, self._name, self._scan, self._mode = head, recipient.group(1), 0, "call"
        self._start(self._name)
        return True

    def _body(self) -> bool:
        ends = [(at, m) for m in self.ENDS if (at := self._buf.find(m, self._scan)) >= 0]
        if not ends:
            self._scan = max(0, len(self._buf) - max(map(len, self.ENDS)) + 1)
            return False
        at, marker = min(ends)
        body, self._buf = self._buf[:at], self._buf[at + len(marker):]
        self._end(lambda: self._call(body), self._head + body + marker)
        self._mode = "text"
        return True

    def _call(self, body: str) -> tuple[ToolCall, ...]:
        return (ToolCall(self._name, arguments_of(load_value(body) if body.strip() else {})),)

    def _finish(self) -> None:
        if self._mode == "call":  # the engine stops on <|call|> without writing it
            body = self._buf
            self._end(lambda: self._call(body), self._head + body)
        else:
            self._text(self._buf)


PARSERS: dict[ToolFormat, Callable[[], ToolCallParser]] = {
    "hermes": HermesParser, "llama": LlamaParser, "mistral": MistralParser,
    "harmony": HarmonyParser,
}


def make_parser(fmt: ToolFormat) -> ToolCallParser:
    return PARSERS[fmt]()


@dataclass(frozen=True)
class ParsedReply:
    text: str  # the reply without its calls
    calls: tuple[ToolCall, ...]
    errors: tuple[str, ...]


def parse_tool_calls(fmt: ToolFormat, text: str) -> ParsedReply:
    """A whole reply at once (a stored or imported one)."""
    parser = make_parser(fmt)
    events = parser.feed(text) + parser.flush()
    return ParsedReply("".join(e.text for e in events if isinstance(e, TextDelta)),
                       tuple(c for e in events if isinstance(e, CallParsed) for c in e.calls),
                       tuple(e.error for e in events if isinstance(e, CallMalformed)))
