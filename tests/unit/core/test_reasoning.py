"""Telling reasoning from the answer, for every marker style real templates use, whatever the
split of the streamed text."""

from __future__ import annotations

import pytest

from inglenook.core.reasoning import (
    ReasoningFormat,
    ReasoningSplitter,
    split_reasoning,
    traits_of,
)

THINK = ReasoningFormat("think")
OPENED = ReasoningFormat("think", starts_open=True)
BRACKET = ReasoningFormat("bracket")
CHANNELS = ReasoningFormat("channels")


def stream(fmt: ReasoningFormat, text: str, size: int) -> tuple[str, str]:
    """Feed `text` in pieces of `size` characters; the whole (reasoning, answer)."""
    splitter = ReasoningSplitter(fmt)
    reasoning, answer = "", ""
    for i in range(0, len(text), size):
        r, a = splitter.feed(text[i:i + size])
        reasoning, answer = reasoning + r, answer + a
    r, a = splitter.flush()
    return reasoning + r, answer + a


CASES = [
    (THINK, "<think>\nLet me add 2 and 2.\n</think>\n\nIt is 4.", "\nLet me add 2 and 2.\n",
     "It is 4."),
    (OPENED, "The user wants a sum.\n</think>\n\n4.", "The user wants a sum.\n", "4."),
    (BRACKET, "[THINK]Short thought.[/THINK]Answer here.", "Short thought.", "Answer here."),
    (CHANNELS, "<|channel|>analysis<|message|>Need to greet.<|end|><|start|>assistant"
               "<|channel|>final<|message|>Hello!<|return|>", "Need to greet.", "Hello!"),
    (THINK, "No reasoning at all, just <think> mentioned.", "",
     "No reasoning at all, just <think> mentioned."),
    (THINK, "  \n<think>a</think>b", "a", "b"),
]


@pytest.mark.parametrize("size", [1, 2, 3, 7, 1000])
@pytest.mark.parametrize(("fmt", "text", "reasoning", "answer"), CASES)
def test_reasoning_and_answer_are_split_however_the_text_arrives(
        fmt: ReasoningFormat, text: str, reasoning: str, answer: str, size: int) -> None:
    assert stream(fmt, text, size) == (reasoning, answer)


def test_a_reply_still_thinking_when_it_ends_keeps_its_reasoning() -> None:
    assert stream(THINK, "<think>I was cut off mid-", 4) == ("I was cut off mid-", "")


def test_stored_messages_that_open_with_a_think_block_are_split() -> None:
    assert split_reasoning("<think>Hmm.</think>\nThe answer.") == ("Hmm.", "The answer.")
    assert split_reasoning("Plain answer.") == ("", "Plain answer.")
    assert split_reasoning("<think>never closed") == ("", "<think>never closed")


QWEN3 = ("{%- if enable_thinking is defined and enable_thinking is false %}"
         "{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}"
         "{%- if message.reasoning_content %}<think>{{ message.reasoning_content }}</think>"
         "{%- endif %}")


def test_traits_come_from_the_template_not_the_name() -> None:
    qwen = traits_of(QWEN3, "<|im_start|>assistant\n")
    assert qwen.reasoning == THINK and qwen.thinking_switch and qwen.reads_reasoning
    r1 = traits_of("{{ '<think>\\n' }}{{ '</think>' }}", "<｜Assistant｜><think>\n")
    assert r1.reasoning == OPENED
    assert traits_of("[THINK] [/THINK]").reasoning == BRACKET
    oss = traits_of("<|channel|>analysis {{ reasoning_effort }}")
    assert oss.reasoning == CHANNELS and oss.effort
    assert traits_of("{{ messages }}").reasoning is None


def test_reasoning_count_counts_the_leading_block_token_by_token() -> None:
    from inglenook.core.reasoning import ReasoningCount, ReasoningFormat

    think = ReasoningFormat("think")
    count = ReasoningCount(think)
    for piece in ["<", "think", ">", "Hmm", ", yes", "</", "think>", "\n\nYes", "."]:
        count.feed(piece)
    assert count.count == 7
    opened = ReasoningCount(ReasoningFormat("think", starts_open=True))
    for piece in ["a", "b", "</think>", "answer"]:
        opened.feed(piece)
    assert opened.count == 3
    switched_off = ReasoningCount(ReasoningFormat("think", starts_open=True), thinking=False)
    none = ReasoningCount(think)
    for piece in ["Hello", " <think>", "x"]:
        switched_off.feed(piece)
        none.feed(piece)
    assert switched_off.count == none.count == ReasoningCount(None).count == 0
