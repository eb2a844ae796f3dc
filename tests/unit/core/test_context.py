import itertools
import pickle
from collections.abc import Sequence

import pytest

from inglenook.core.context import (
    CHUNKS_PER_BUDGET,
    ContextFull,
    ContextOverflow,
    Fit,
    fit_messages,
    policy_of,
    reply_reserve,
)
from inglenook.core.messages import Message


class WordCounter:
    """Fake tokenizer: one token per word plus 3 per message (like a chat template's markers)."""

    def __init__(self) -> None:
        self.calls = 0
        self.largest = 0  # the most tokens of any prompt it was asked to count

    def __call__(self, messages: Sequence[Message]) -> int:
        self.calls += 1
        tokens = sum(len(m.content.split()) + 3 for m in messages)
        self.largest = max(self.largest, tokens)
        return tokens


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
    fit = fit_messages(messages, counter, n_ctx=1000, reserve=100)
    assert fit == Fit(tuple(messages))
    assert counter.calls == 1


def left_out(messages: Sequence[Message], fit: Fit) -> list[Message]:
    return list(messages[fit.dropped_start: fit.dropped_start + fit.dropped])


def check_one_run_left_out(messages: Sequence[Message], fit: Fit) -> None:
    """What is kept is the conversation without one run of messages, as Fit says."""
    assert fit.dropped == len(messages) - len(fit.messages) > 0
    run = slice(fit.dropped_start, fit.dropped_start + fit.dropped)
    assert fit.messages == tuple(messages[:run.start]) + tuple(messages[run.stop:])
    assert fit.messages[-1] == messages[-1]
    if messages[0].role == "system":  # never left out
        assert fit.messages[0] == messages[0] and fit.dropped_start >= 1


def test_middle_keeps_the_system_prompt_and_first_exchange() -> None:
    messages = conversation(10)  # system 5 + 20 messages of 10 + latest 4 = 209 tokens
    counter = WordCounter()
    fit = fit_messages(messages, counter, n_ctx=150, reserve=20)
    check_one_run_left_out(messages, fit)
    assert fit.messages[:3] == tuple(messages[:3])  # system, q0, a0
    assert fit.dropped_start == 3 and fit.dropped % 2 == 0  # whole user+assistant pairs
    assert counter(fit.messages) <= 130
    # Left out in chunks of about an eighth of the budget: never more than a chunk (and the
    # turn that crosses it) beyond the fewest turns that would do.
    fewest = next(n for n in range(0, 20, 2)
                  if counter(messages[:3] + messages[3 + n:]) <= 130)
    extra_tokens = counter(messages[3:3 + fit.dropped]) - counter(messages[3:3 + fewest])
    assert 0 <= extra_tokens <= 130 // CHUNKS_PER_BUDGET + 20


def test_rolling_keeps_the_system_prompt_and_leaves_out_the_oldest() -> None:
    messages = conversation(10)
    fit = fit_messages(messages, WordCounter(), n_ctx=150, reserve=20, policy="rolling")
    check_one_run_left_out(messages, fit)
    assert fit.dropped_start == 1 and fit.messages[1].content.startswith("q")
    assert WordCounter()(fit.messages) <= 130


def test_stop_leaves_nothing_out_and_says_so() -> None:
    messages = conversation(10)
    assert fit_messages(messages[:5], WordCounter(), n_ctx=150, reserve=20,
                        policy="stop") == Fit(tuple(messages[:5]))
    with pytest.raises(ContextFull) as info:
        fit_messages(messages, WordCounter(), n_ctx=150, reserve=20, policy="stop")
    assert str(info.value) == (
        "This conversation is 209 tokens and the context holds 150 (with 20 kept for the "
        "reply). Start a new chat, let older messages be left out (the chat's overflow "
        "setting), or load the model with a longer context.")
    assert isinstance(info.value, ContextOverflow)
    restored = pickle.loads(pickle.dumps(info.value))
    assert type(restored) is ContextFull and str(restored) == str(info.value)


def test_unknown_policies_are_the_default() -> None:
    assert policy_of("rolling") == "rolling"
    assert policy_of("sideways") == policy_of(None) == "middle"


def test_what_is_left_out_stays_the_same_for_many_turns() -> None:
    """The prompt's start must not change every turn, or the KV cache is lost every turn."""
    starts = []
    for turn in range(20):
        history = conversation(60 + turn, size=12)
        fit = fit_messages(history, WordCounter(), n_ctx=1200, reserve=200)
        check_one_run_left_out(history, fit)
        starts.append(fit.dropped)
    changes = sum(a != b for a, b in itertools.pairwise(starts))
    assert starts == sorted(starts)  # never more history back in
    assert changes <= 20 // 3, starts  # a chunk lasts several turns


def test_long_histories_render_only_windows_near_what_fits() -> None:
    messages = conversation(500)
    counter = WordCounter()
    fit = fit_messages(messages, counter, n_ctx=2000, reserve=500)
    assert counter(fit.messages) <= 1500
    assert counter.calls <= 2 + 2 * 10  # doubling from the end, then halving
    assert counter.largest <= 2 * 1500 + 100  # never the whole 10,000-token history


def test_a_first_exchange_too_long_to_keep_is_left_out_too() -> None:
    messages = [Message("system", "be nice"), Message("user", words(200)),
                Message("assistant", words(10)), *conversation(3)[1:]]
    fit = fit_messages(messages, WordCounter(), n_ctx=150, reserve=20)
    check_one_run_left_out(messages, fit)
    assert fit.dropped_start == 1 and messages[1] not in fit.messages


def test_keeps_only_system_and_latest_when_nothing_else_fits() -> None:
    messages = conversation(3, size=50)
    fit = fit_messages(messages, WordCounter(), n_ctx=30, reserve=10)
    assert fit == Fit((messages[0], messages[-1]), 6, 1)


def test_without_system_message() -> None:
    messages = conversation(4)[1:]
    fit = fit_messages(messages, WordCounter(), n_ctx=30, reserve=0, policy="rolling")
    check_one_run_left_out(messages, fit)
    assert fit.messages[0].role == "user" and fit.dropped_start == 0


def test_messages_after_latest_user_are_kept() -> None:
    messages = [*conversation(5), Message("assistant", "partial reply to continue")]
    fit = fit_messages(messages, WordCounter(), n_ctx=40, reserve=0)
    assert fit.messages[-2:] == tuple(messages[-2:])


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
    fit = fit_messages(messages, WordCounter(), n_ctx=20, reserve=0)
    assert fit == Fit((messages[-1],), 1, 0)
