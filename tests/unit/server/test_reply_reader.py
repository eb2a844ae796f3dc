"""A reply's choice read apart as it streams, with the window's parsers."""

from __future__ import annotations

from dataclasses import replace

from inglenook.core.load import ModelInfo
from inglenook.core.reasoning import ReasoningFormat, TemplateTraits
from inglenook.server.reply_reader import ChoiceReader
from inglenook.tools.parsing import TextDelta

INFO = ModelInfo("m.gguf", "m", "qwen3", 1, 4096, 4096, 1, 0, False, False, "f16", "gguf",
                 traits=TemplateTraits(ReasoningFormat("think")), tool_format="hermes")
CALL = '<tool_call>\n{"name": "f", "arguments": {"x": %d}}\n</tool_call>'


def read(reader: ChoiceReader, text: str, step: int = 3) -> None:
    for i in range(0, len(text), step):  # markers split over deltas
        reader.feed(text[i:i + step])
    reader.flush()


def test_reasoning_text_and_calls_are_told_apart() -> None:
    reader = ChoiceReader(INFO, tools_offered=True)
    read(reader, "<think>\nhmm\n</think>\n\nSure. " + CALL % 1 + CALL % 2)
    c = reader.choice
    assert c.reasoning.strip() == "hmm" and c.text.strip() == "Sure."
    assert [dict(call.arguments) for call in c.calls] == [{"x": 1}, {"x": 2}]


def test_only_the_first_call_without_parallel_calls() -> None:
    reader = ChoiceReader(INFO, tools_offered=True, parallel=False)
    read(reader, CALL % 1 + CALL % 2)
    assert [dict(call.arguments) for call in reader.choice.calls] == [{"x": 1}]


def test_no_tools_offered_or_no_format_reads_calls_as_text() -> None:
    for reader in (ChoiceReader(INFO, tools_offered=False),
                   ChoiceReader(replace(INFO, tool_format=""), tools_offered=True)):
        read(reader, CALL % 1)
        assert not reader.choice.calls and "<tool_call>" in reader.choice.text


def test_an_unreadable_call_comes_back_as_the_text_the_model_wrote() -> None:
    reader = ChoiceReader(INFO, tools_offered=True)
    events = reader.feed("<tool_call>\n{not json}\n</tool_call>") + reader.flush()
    assert not reader.choice.calls and "{not json}" in reader.choice.text
    assert any(isinstance(e, TextDelta) and "{not json}" in e.text for e in events)


def test_raw_completions_keep_the_thinking_markup() -> None:
    reader = ChoiceReader(INFO, tools_offered=False, split=False)
    read(reader, "<think>a</think>b")
    assert reader.choice.text == "<think>a</think>b" and not reader.choice.reasoning
