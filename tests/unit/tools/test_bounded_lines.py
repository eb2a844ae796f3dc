"""A stdio MCP server's stdout read a bounded message at a time (tools/bounded_lines.py)."""

from __future__ import annotations

import json

import anyio
import pytest

from inglenook.tools.bounded_lines import BoundedLines

LIMIT = 1000


class Chunks:
    """A byte stream that hands out `data` `size` bytes at a time."""

    def __init__(self, data: bytes, size: int) -> None:
        self.chunks = [data[i:i + size] for i in range(0, len(data), size)]

    async def receive(self) -> bytes:
        if not self.chunks:
            raise anyio.EndOfStream
        return self.chunks.pop(0)


def read(*messages: object, size: int = 97) -> list[dict]:
    data = b"".join(json.dumps(m).encode() + b"\n" for m in messages)

    async def collect() -> str:
        return "".join([text async for text in BoundedLines(Chunks(data, size), limit=LIMIT)])

    text = anyio.run(collect)
    return [json.loads(line) for line in text.splitlines()]


def answer(text: str, id_: object = 3, first: str = "id") -> dict:
    result = {"content": [{"type": "text", "text": text}], "isError": False}
    return ({"jsonrpc": "2.0", "id": id_, "result": result} if first == "id"
            else {"result": result, "jsonrpc": "2.0", "id": id_})


def test_messages_within_the_bound_pass_unchanged() -> None:
    messages = [answer("short"), {"jsonrpc": "2.0", "method": "notifications/x"}, answer("é" * 50)]
    assert read(*messages) == messages
    assert read(*messages, size=1) == messages


@pytest.mark.parametrize("first", ["id", "result"])  # Python's SDK writes the id first, JS last
def test_a_long_answer_is_cut_and_says_so(first: str) -> None:
    text = 'a "quoted" line \\ with escapes\n' * 200
    (cut,) = read(answer(text, "call-7", first))
    assert cut["id"] == "call-7" and cut["result"]["_meta"] == {"inglenook/cut": True}
    shown = cut["result"]["content"][0]["text"]
    kept, note = shown.rsplit("\n", 1)
    assert text.startswith(kept) and len(kept) > 1000  # the start, up to where it was cut
    assert note.startswith("[… the tool's answer was 0.0 MB, more than 0.001 MB")


def test_a_cut_inside_an_escape_or_a_character_keeps_what_is_whole() -> None:
    # Longer than the head that is kept (256 KB), so the text is cut wherever the head ends.
    for text in ("\\" * 200_001, "\u00e9\U0001f600" * 30_001, "x\u2028\t" * 50_001):
        (cut,) = read(answer(text), size=4093)
        kept = cut["result"]["content"][0]["text"].rsplit("\n[", 1)[0]
        assert 20_000 < len(kept) <= 50_000 and text.startswith(kept)
    (cut,) = read(answer("\\" * 200_001, first="result"), size=4093)
    assert cut["result"]["content"][0]["text"].startswith("\\" * 50_000)


def test_a_long_message_that_answers_nothing_is_dropped() -> None:
    long_log = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"x": "y" * 5000}}
    assert read(answer("before"), long_log, answer("after")) == [answer("before"),
                                                                   answer("after")]
