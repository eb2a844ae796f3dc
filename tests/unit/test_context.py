import pickle
from collections.abc import Sequence

import pytest

from inglenook.core.context import ContextOverflow, fit_messages, reply_reserve
from inglenook.core.messages import Message


class WordCounter:
    """Fake tokenizer: one token per word plus 3 per message (like a chat template's markers)."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, messages: Sequence[Message]) -> int:
        self.calls += 1
        return sum(len(m.content.split()) + 3 for m in messages)


def words(n: int) -> str:
    return " ".join(["w"] * n)


def conversation(pairs: int, size: int = 7) -> list[Message]:
    """System, `pairs` user/assistant turns of `size` words each, then a new user question."""
    out = [Message("system", "be nice")]
    for i in range(pairs):
        out.append(Message("user", f"q{i} " + words(size - 1)))
        out.append(Message("assistant", f"a{i} " + words(size - 1)))
    return [*out, Message("user", "latest")]


def test_reply_reserve() -> None:
    assert reply_reserve(8192, -1) == 512
    assert reply_reserve(1024, -1) == 256  # small contexts keep a quarter
    assert reply_reserve(8192, 1000) == 1000
    assert reply_reserve(8192, 6000) == 4096  # never more than half
    assert reply_reserve(8192, 0) == 512


def test_everything_fits_with_one_count() -> None:
    messages = conversation(3)
    counter = WordCounter()
    kept, dropped = fit_messages(messages, counter, n_ctx=1000, reserve=100)
    assert kept == tuple(messages)
    assert dropped == 0
    assert counter.calls == 1


def test_drops_oldest_whole_turns_first() -> None:
    messages = conversation(10)  # system 5 + 20 messages of 10 + latest 4 = 209 tokens
    counter = WordCounter()
    kept, dropped = fit_messages(messages, counter, n_ctx=150, reserve=20)
    assert kept[0] == messages[0]
    assert kept[-1] == messages[-1]
    assert counter(kept) <= 130
    assert dropped % 2 == 0  # whole user+assistant pairs
    assert kept[1].role == "user" and kept[1].content.startswith("q")
    first_kept = int(kept[1].content.split()[0][1:])
    assert kept[1:-1] == tuple(messages[1 + 2 * first_kept:-1])  # the newest turns, contiguous
    # The largest history that fits: one more turn back would not.
    assert counter(messages[:1] + messages[2 * first_kept - 1:]) > 130
    assert dropped == len(messages) - len(kept)


def test_uses_few_counts_on_long_histories() -> None:
    messages = conversation(500)
    counter = WordCounter()
    kept, _ = fit_messages(messages, counter, n_ctx=2000, reserve=500)
    assert counter.calls <= 2 + 10  # all, minimum, then ~log2(500)
    assert counter(kept) <= 1500


def test_keeps_only_system_and_latest_when_nothing_else_fits() -> None:
    messages = conversation(3, size=50)
    kept, dropped = fit_messages(messages, WordCounter(), n_ctx=30, reserve=10)
    assert kept == (messages[0], messages[-1])
    assert dropped == 6


def test_without_system_message() -> None:
    messages = conversation(4)[1:]
    kept, dropped = fit_messages(messages, WordCounter(), n_ctx=30, reserve=0)
    assert kept[-1] == messages[-1]
    assert kept[0].role == "user"
    assert dropped == len(messages) - len(kept)


def test_messages_after_latest_user_are_kept() -> None:
    messages = [*conversation(5), Message("assistant", "partial reply to continue")]
    kept, _ = fit_messages(messages, WordCounter(), n_ctx=40, reserve=0)
    assert kept[-2:] == tuple(messages[-2:])


def test_overflow_message_is_user_facing() -> None:
    messages = [Message("user", words(9117))]  # 9,120 tokens with the 3 per message
    with pytest.raises(ContextOverflow) as info:
        fit_messages(messages, WordCounter(), n_ctx=8192, reserve=512)
    assert str(info.value) == (
        "Your message is 9,120 tokens but the context holds 8,192 (with 512 kept for the reply). "
        "Shorten it or load the model with a longer context."
    )
    restored = pickle.loads(pickle.dumps(info.value))
    assert str(restored) == str(info.value) and restored.tokens == 9120


def test_overflow_counts_the_system_prompt() -> None:
    messages = [Message("system", words(100)), Message("user", "hi")]
    with pytest.raises(ContextOverflow, match="system prompt and message are 107 tokens"):
        fit_messages(messages, WordCounter(), n_ctx=100, reserve=0)


def test_leading_assistant_greeting_is_droppable() -> None:
    messages = [Message("assistant", words(50)), Message("user", "hi")]
    kept, dropped = fit_messages(messages, WordCounter(), n_ctx=20, reserve=0)
    assert kept == (messages[-1],)
    assert dropped == 1
