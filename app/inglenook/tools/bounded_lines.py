"""The stdout of a stdio MCP server read one bounded message at a time.

A tool can answer with a whole file or web page, and the SDK reads a server's stdout by joining
every chunk onto the line so far (`buffer + chunk`): a 50 MB answer took 44-65 s of copying,
often past the call's timeout, all of it on the tool manager's thread, before the result was cut
to what the model gets (results.MAX_RESULT_CHARS) and pydantic parsed all of it first.

`BoundedLines` stands in for the text stream the SDK's stdio reader wraps the server's stdout in
(`install()`): it hands the reader whole lines only, so the reader's buffer never grows, and a
line longer than MAX_MESSAGE_BYTES is never kept: its first HEAD_BYTES and last TAIL_BYTES are,
and the rest is skipped as it arrives. An answer cut that way reaches the session as a result
of the call it answers (its id, read from the start or the end of the line), holding the start
of its first text and a note that says how large the answer was, so the model and the card know
it was cut (see was_cut). A cut line that answers no call (no id found) is dropped; the call it
may have answered then times out as usual.
"""

from __future__ import annotations

import json
import re
from typing import Any

MAX_MESSAGE_BYTES = 8_000_000  # a tools/list of hundreds of tools is well under a megabyte
HEAD_BYTES = 256 * 1024  # of a cut line: where its id and the start of its text are
TAIL_BYTES = 4096  # and where some servers put the id (JSON.stringify of {result, id})
KEPT_CHARS = 50_000  # of a cut answer's text: within what the model is given (60,000)

CUT_MARK = "inglenook/cut"  # in the _meta of an answer that stands in for a cut one
_ID = re.compile(rb'"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.){0,200}")')
_TEXT = re.compile(rb'"text"\s*:\s*"')
_END_ESCAPE = re.compile(r"(\\+)(u[0-9a-fA-F]{0,3})?$")


class BoundedLines:
    """An async iterator of text made of whole lines, over a byte stream (anyio's
    TextReceiveStream, with a bound on a line)."""

    def __init__(self, transport_stream: Any, encoding: str = "utf-8", errors: str = "strict",
                 *, limit: int = MAX_MESSAGE_BYTES) -> None:
        self._stream = transport_stream
        self._encoding, self._errors = encoding, errors
        self._limit = limit
        self._line = bytearray()
        self._cut: _CutLine | None = None  # the line being skipped, when it outgrew the limit

    def __aiter__(self) -> BoundedLines:
        return self

    async def __anext__(self) -> str:
        import anyio

        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def receive(self) -> str:
        while True:
            text = self._take(await self._stream.receive())
            if text:
                return text

    async def aclose(self) -> None:
        await self._stream.aclose()

    def _take(self, chunk: bytes) -> str:
        """The lines `chunk` completes, each with its newline."""
        done: list[str] = []
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            piece = chunk[start:] if end < 0 else chunk[start:end]
            if self._cut is not None:
                self._cut.add(piece)
            elif len(self._line) + len(piece) > self._limit:
                self._cut = _CutLine(bytes(self._line) + piece, self._limit)
                self._line.clear()
            else:
                self._line += piece
            if end < 0:
                break
            line = self._end_line()
            if line is not None:
                done.append(line + "\n")
            start = end + 1
        return "".join(done)

    def _end_line(self) -> str | None:
        if self._cut is not None:
            cut, self._cut = self._cut, None
            return cut.message()
        line = self._line.decode(self._encoding, self._errors)
        self._line.clear()
        return line


class _CutLine:
    def __init__(self, start: bytes, limit: int) -> None:
        self.limit = limit
        self.head = start[:HEAD_BYTES]
        self.tail = start[-TAIL_BYTES:]
        self.size = len(start)

    def add(self, piece: bytes) -> None:
        self.size += len(piece)
        if len(self.head) < HEAD_BYTES:
            self.head += piece[:HEAD_BYTES - len(self.head)]
        self.tail = (self.tail + piece[-TAIL_BYTES:])[-TAIL_BYTES:]

    def message(self) -> str | None:
        """A JSON-RPC answer standing in for the cut one, or None when it answers nothing."""
        result_at, error_at = self.head.find(b'"result"'), self.head.find(b'"error"')
        if result_at < 0 and error_at < 0:
            return None  # a request or a notification: nothing waits for it
        found = self._id(min(at for at in (result_at, error_at) if at >= 0))
        if found is None:
            return None
        note = (f"[… the tool's answer was {self.size / 1e6:.1f} MB, more than "
                f"{self.limit / 1e6:g} MB: the rest was not read]")
        if result_at < 0 or 0 <= error_at < result_at:
            answer: dict[str, Any] = {"error": {"code": -32603, "message": note}}
        else:
            text = self._text(result_at)
            # Marked an error so that the SDK does not check it against the tool's output
            # schema (its structured content was not read either); was_cut() tells it apart.
            answer = {"result": {"content": [{"type": "text",
                                              "text": f"{text}\n{note}" if text else note}],
                                 "isError": True, "_meta": {CUT_MARK: True}}}
        return json.dumps({"jsonrpc": "2.0", "id": found, **answer})

    def _id(self, body_at: int) -> int | str | None:
        """The message's own id: before its result or error in the head, or else the last in
        the tail (after it)."""
        match = _ID.search(self.head, 0, body_at)
        if match is None:
            match = next(reversed(list(_ID.finditer(self.tail))), None)
        if match is None:
            return None
        try:
            value = json.loads(match[1])
        except ValueError:
            return None
        return value if isinstance(value, (int, str)) and not isinstance(value, bool) else None

    def _text(self, after: int) -> str:
        """The start of the result's first text block, as far as the head holds it."""
        found = _TEXT.search(self.head, after)
        if found is None:
            return ""
        rest = self.head[found.end():].decode("utf-8", "ignore")  # a cut character: dropped
        try:
            text = json.decoder.scanstring(rest, 0)[0]  # type: ignore[attr-defined]
        except ValueError:  # it runs on past the head: end it where the head does
            try:
                text = json.loads('"' + _whole_escapes(rest) + '"')
            except ValueError:
                return ""
        text = str(text)[:KEPT_CHARS]
        return text[:-1] if text and "\ud800" <= text[-1] <= "\udbff" else text


def _whole_escapes(text: str) -> str:
    """`text` without an escape sequence cut short at its end (a lone backslash, `\\u12`)."""
    match = _END_ESCAPE.search(text)
    if match is None or len(match[1]) % 2 == 0:
        return text  # none, or escaped backslashes followed by plain text
    return text[:match.start(1) + len(match[1]) - 1]


def was_cut(result: Any) -> bool:
    """Whether a CallToolResult is one that stands in for an answer cut here."""
    return bool((getattr(result, "meta", None) or {}).get(CUT_MARK))


def install() -> None:
    """Make the SDK's stdio reader read through BoundedLines (see the module docstring). The
    reader looks the name up when a server starts, so this holds for every server after it;
    tests/integration/test_mcp_manager.py fails if an SDK release reads another way."""
    import mcp.client.stdio as sdk_stdio

    vars(sdk_stdio)["TextReceiveStream"] = BoundedLines
