"""Tool calls found in scripted model output, for every format, however the text is split into
deltas; and the reply stream that also tells reasoning from the answer."""

from __future__ import annotations

from typing import Any

import pytest

from inglenook.core.reasoning import ReasoningFormat
from inglenook.tools.formats import ToolFormat
from inglenook.tools.parsers import make_parser, parse_tool_calls
from inglenook.tools.parsing import (
    CallMalformed,
    CallParsed,
    CallStarted,
    JsonScanner,
    TextDelta,
)
from inglenook.tools.stream import ReasoningDelta, ReplyStream

SIZES = [1, 2, 3, 7, 10_000]


def simplified(events: list[Any]) -> list[tuple[Any, ...]]:
    """Events as comparable tuples (call ids are random), adjacent text merged."""
    out: list[tuple[Any, ...]] = []
    for event in events:
        if isinstance(event, TextDelta | ReasoningDelta):
            kind = "text" if isinstance(event, TextDelta) else "reasoning"
            if out and out[-1][0] == kind:
                out[-1] = (kind, out[-1][1] + event.text)
            else:
                out.append((kind, event.text))
        elif isinstance(event, CallStarted):
            out.append(("start", event.name))
        elif isinstance(event, CallParsed):
            out.append(("calls", [(c.name, dict(c.arguments)) for c in event.calls], event.raw))
        else:
            assert isinstance(event, CallMalformed)
            out.append(("malformed", event.raw))
    return out


def stream(fmt: ToolFormat, text: str, size: int) -> list[tuple[Any, ...]]:
    parser = make_parser(fmt)
    events = []
    for i in range(0, len(text), size):
        events += parser.feed(text[i:i + size])
    return simplified(events + parser.flush())


ADD = [("add", {"a": 2, "b": 3})]
HERMES_CALL = '<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call>'
LLAMA_CALL = '{"name": "add", "parameters": {"a": 2, "b": 3}}'
MISTRAL_V3 = '[TOOL_CALLS][{"name": "add", "arguments": {"a": 2, "b": 3}, "id": "Ab3dE6gH9"}]'
MISTRAL_V11 = '[TOOL_CALLS]add[ARGS]{"a": 2, "b": 3}'
HARMONY_CALL = ('<|start|>assistant<|channel|>commentary to=functions.add <|constrain|>json'
                '<|message|>{"a": 2, "b": 3}<|call|>')
# The recipient in the role's header, right after the generation prompt's `<|start|>assistant`.
HARMONY_HEADER_FIRST = ' to=functions.add<|channel|>commentary json<|message|>{"a": 2, "b": 3}'

CASES: list[tuple[ToolFormat, str, list[tuple[Any, ...]]]] = [
    ("hermes", "Let me add them.\n" + HERMES_CALL,
     [("text", "Let me add them.\n"), ("start", ""), ("calls", ADD, HERMES_CALL)]),
    ("hermes", "No tools needed: 5.", [("text", "No tools needed: 5.")]),
    ("hermes", HERMES_CALL + "\n" + HERMES_CALL.replace("add", "sub"),
     [("start", ""), ("calls", ADD, HERMES_CALL), ("text", "\n"), ("start", ""),
      ("calls", [("sub", {"a": 2, "b": 3})], HERMES_CALL.replace("add", "sub"))]),
    ("llama", "\n" + LLAMA_CALL, [("start", ""), ("calls", ADD, LLAMA_CALL)]),
    ("llama", "<|python_tag|>" + LLAMA_CALL,
     [("start", ""), ("calls", ADD, "<|python_tag|>" + LLAMA_CALL)]),
    ("llama", LLAMA_CALL + "; " + LLAMA_CALL,
     [("start", ""), ("calls", ADD, LLAMA_CALL), ("start", ""), ("calls", ADD, LLAMA_CALL)]),
    ("llama", 'It is {"name": "add"} in JSON.', [("text", 'It is {"name": "add"} in JSON.')]),
    ("llama", '{"name": "Bob", "age": 3}', [("text", '{"name": "Bob", "age": 3}')]),
    ("mistral", MISTRAL_V3, [("start", ""), ("calls", ADD, MISTRAL_V3)]),
    ("mistral", "Sure. " + MISTRAL_V11 + MISTRAL_V11,
     [("text", "Sure. "), ("start", ""), ("calls", ADD, MISTRAL_V11), ("start", ""),
      ("calls", ADD, MISTRAL_V11)]),
    ("harmony", "<|channel|>analysis<|message|>Need a sum.<|end|>" + HARMONY_CALL,
     [("text", "<|channel|>analysis<|message|>Need a sum.<|end|>"), ("start", "add"),
      ("calls", ADD, HARMONY_CALL)]),
    ("harmony", HARMONY_HEADER_FIRST, [("start", "add"), ("calls", ADD, HARMONY_HEADER_FIRST)]),
    ("harmony", "<|channel|>final<|message|>Hello!",
     [("text", "<|channel|>final<|message|>Hello!")]),
]


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize(("fmt", "text", "expected"), CASES)
def test_calls_are_found_however_the_text_arrives(
        fmt: ToolFormat, text: str, expected: list[tuple[Any, ...]], size: int) -> None:
    assert stream(fmt, text, size) == expected


@pytest.mark.parametrize(("fmt", "text", "shown"), [
    ("hermes", "<tool_call>", ""),
    ("hermes", "Checking <tool_", "Checking "),
    ("mistral", "Sure [TOOL_C", "Sure "),
    ("harmony", "Hi<|chan", "Hi"),
    ("llama", " <|python", ""),
    ("llama", '{"name": "add", "param', ""),
])
def test_the_start_of_a_marker_is_held_back(fmt: ToolFormat, text: str, shown: str) -> None:
    """Nothing of a marker (or of a call that may be one) shows as text while it arrives."""
    parser = make_parser(fmt)
    assert "".join(e.text for e in parser.feed(text) if isinstance(e, TextDelta)) == shown


@pytest.mark.parametrize(("fmt", "text", "error"), [
    ("hermes", '<tool_call>{"name": "add", "arguments": {"a": </tool_call>', "could not be read"),
    ("hermes", '<tool_call>{"arguments": {}}</tool_call>', "does not name a tool"),
    ("hermes", '<tool_call>{"name": "add", "arguments": [1]}</tool_call>', "not a JSON object"),
    ("llama", '{"name": "add", "parameters": {"a": 2', "not complete"),
    ("llama", "<|python_tag|>brave_search.call(query='x')", "not complete"),
    ("mistral", '[TOOL_CALLS][{"name": "add", "arguments": {"a"', "not complete"),
    ("harmony", "<|channel|>commentary to=functions.add <|message|>{oops}<|call|>",
     "could not be read"),
])
def test_a_call_that_cannot_be_read_ends_its_card_with_the_reason(
        fmt: ToolFormat, text: str, error: str) -> None:
    parser = make_parser(fmt)
    events = parser.feed(text) + parser.flush()
    assert sum(isinstance(e, CallStarted) for e in events) == 1
    (bad,) = [e for e in events if isinstance(e, CallMalformed)]
    assert error in bad.error and bad.raw.strip()
    assert not any(isinstance(e, CallParsed) for e in events)


def test_a_hermes_call_left_open_ends_at_the_next_or_at_the_end() -> None:
    reply = parse_tool_calls("hermes", '<tool_call>{"name": "a", "arguments": {}}\n'
                                       '<tool_call>{"name": "b", "arguments": "{\\"x\\": 1}"}')
    assert [(c.name, dict(c.arguments)) for c in reply.calls] == [("a", {}), ("b", {"x": 1})]
    assert reply.errors == ()


def test_the_engine_swallowing_the_stop_marker_still_gives_the_call() -> None:
    """gpt-oss stops on <|call|> and Mistral on its EOS: the text ends with the arguments."""
    harmony = parse_tool_calls("harmony", '<|channel|>commentary to=functions.add <|constrain|>'
                                          'json<|message|>{"a": 2, "b": 3}')
    assert [(c.name, dict(c.arguments)) for c in harmony.calls] == ADD


def test_call_ids_are_the_models_own_or_nine_letters_and_digits() -> None:
    given = parse_tool_calls("mistral", MISTRAL_V3).calls[0].id
    assert given == "Ab3dE6gH9"
    made = parse_tool_calls("mistral", '[TOOL_CALLS]add[CALL_ID]short[ARGS]{}').calls[0].id
    assert len(made) == 9 and made.isalnum() and made != "short"


def test_a_whole_reply_without_its_calls() -> None:
    reply = parse_tool_calls("hermes", "Adding.\n" + HERMES_CALL + "\nDone?")
    assert reply.text == "Adding.\n\nDone?" and len(reply.calls) == 1


def test_the_json_scanner_ignores_brackets_in_strings_and_resumes() -> None:
    text = '{"a": "}]{\\"", "b": [1, {"c": 2}]} tail'
    scanner = JsonScanner()
    assert scanner.end(text[:10]) is None
    assert scanner.end(text[:20]) is None
    assert scanner.end(text) == text.index(" tail")


def stream_reply(reasoning: ReasoningFormat | None, tools: ToolFormat | None, text: str,
                 size: int) -> list[tuple[Any, ...]]:
    reply = ReplyStream(reasoning, tools)
    events: list[Any] = []
    for i in range(0, len(text), size):
        events += reply.feed(text[i:i + size])
    return simplified(events + reply.flush())


@pytest.mark.parametrize("size", SIZES)
def test_a_tool_call_mentioned_while_thinking_is_not_a_call(size: int) -> None:
    text = ("<think>Maybe a <tool_call> would help.</think>\n\nLet me add.\n" + HERMES_CALL)
    assert stream_reply(ReasoningFormat("think"), "hermes", text, size) == [
        ("reasoning", "Maybe a <tool_call> would help."), ("text", "Let me add.\n"),
        ("start", ""), ("calls", ADD, HERMES_CALL)]


@pytest.mark.parametrize("size", SIZES)
def test_gpt_oss_reasoning_answer_and_call_come_apart(size: int) -> None:
    text = ("<|channel|>analysis<|message|>User wants a sum.<|end|>" + HARMONY_CALL)
    assert stream_reply(ReasoningFormat("channels"), "harmony", text, size) == [
        ("reasoning", "User wants a sum."), ("start", "add"), ("calls", ADD, HARMONY_CALL)]
    final = ("<|channel|>analysis<|message|>Done.<|end|>"
             "<|start|>assistant<|channel|>final<|message|>5")
    assert stream_reply(ReasoningFormat("channels"), "harmony", final, size) == [
        ("reasoning", "Done."), ("text", "5")]


def test_a_reply_stream_without_tools_or_reasoning_is_text() -> None:
    assert stream_reply(None, None, "<tool_call>plain", 3) == [("text", "<tool_call>plain")]
    assert stream_reply(None, "mistral", MISTRAL_V3, 3)[0] == ("start", "")
