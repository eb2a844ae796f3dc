"""A long chat sends only what its model could hold: older turns are left behind in blocks
(so the prompt stays the same for many turns), the first exchange stays for "middle", and what
was left behind counts as left out in the reply's figures and markers."""

from __future__ import annotations

import dataclasses

import pytest

from inglenook.chat.session import ChatSession, ChatSettings, ReplyOptions
from inglenook.core.context import SEND_CHARS_PER_TOKEN, SKIP_BLOCK, history_start
from inglenook.core.replies import Stats
from inglenook.store import Store
from tests.helpers.long_chat import add_long_chat, text_of

STATS = Stats(prompt_tokens=1_000, cached_tokens=0, generated_tokens=5, ttft_s=0.1,
              decode_tok_s=10.0, prompt_tok_s=100.0, context_used=1_005, n_ctx=2_048,
              dropped_messages=6, dropped_start=3)


@pytest.fixture
def store() -> Store:
    return Store()


def test_history_start_leaves_behind_whole_blocks_of_old_turns() -> None:
    assert history_start([100] * 50, 2_048, "rolling") == 0  # short: all of it
    sizes = [1_000] * 2_000
    start = history_start(sizes, 2_048, "rolling")
    assert start > 0 and start % SKIP_BLOCK == 0
    assert sum(sizes[start:]) >= SEND_CHARS_PER_TOKEN * 2_048  # still more than fits
    assert history_start([*sizes, 1_000], 2_048, "rolling") == start  # the next turn too
    middle = history_start(sizes, 2_048, "middle")
    assert middle > 1 and (middle - 1) % SKIP_BLOCK == 0
    assert history_start(sizes, 2_048, "stop") == 0  # nothing may be left out
    assert history_start(sizes, 0, "rolling") == 0  # the context is not known


def open_long(store: Store, overflow: str, system: str = "") -> ChatSession:
    conv = add_long_chat(store, 4_001)  # ends with a question
    settings = ChatSettings(system_prompt=system, overflow=overflow)  # type: ignore[arg-type]
    return ChatSession.open(store, conv, [], settings)


def test_a_long_chat_sends_its_newest_turns_and_counts_the_rest_as_left_out(
        store: Store) -> None:
    session = open_long(store, "rolling")
    request = session.begin_reply(1, ReplyOptions(n_ctx=2_048))
    assert request is not None
    sent = request.messages
    assert 100 < len(sent) < 1_000
    assert sent[-1].content == text_of(4_000)  # the question
    assert [m.content for m in sent[:2]] == [text_of(4_001 - len(sent)),
                                             text_of(4_002 - len(sent))]
    behind = 4_001 - len(sent)
    session.reply_stats(STATS)
    stats = session.reply.stats  # type: ignore[union-attr]
    assert stats is not None
    assert (stats.dropped_start, stats.dropped_messages) == (0, behind + 6)
    reply_id = session.reply.message_id  # type: ignore[union-attr]
    left_out = session.left_out(reply_id)
    assert left_out == session.path.ids()[:behind + 6]  # the oldest, as one run


def test_middle_keeps_the_first_exchange_and_the_system_prompt_counts(store: Store) -> None:
    session = open_long(store, "middle", system="Be brief.")
    request = session.begin_reply(1, ReplyOptions(n_ctx=2_048))
    assert request is not None
    sent = request.messages
    assert [m.content for m in sent[:3]] == ["Be brief.", text_of(0), text_of(1)]
    assert sent[3].content != text_of(2) and sent[-1].content == text_of(4_000)
    behind = 4_001 - (len(sent) - 1)
    session.reply_stats(dataclasses.replace(STATS, dropped_start=3))
    stats = session.reply.stats  # type: ignore[union-attr]
    assert stats is not None and (stats.dropped_start, stats.dropped_messages) == (3, behind + 6)
    left_out = session.left_out(session.reply.message_id)  # type: ignore[union-attr]
    assert left_out == session.path.ids()[2:2 + behind + 6]


def test_without_a_context_or_under_stop_everything_is_sent(store: Store) -> None:
    for overflow, n_ctx in (("stop", 2_048), ("rolling", 0)):
        session = open_long(store, overflow)
        request = session.begin_reply(1, ReplyOptions(n_ctx=n_ctx))
        assert request is not None and len(request.messages) == 4_001
        session.reply_stats(STATS)
        assert session.reply.stats == STATS  # type: ignore[union-attr]


def test_the_prompt_inspector_shows_what_was_sent(store: Store) -> None:
    session = open_long(store, "rolling")
    request = session.begin_reply(1, ReplyOptions(n_ctx=2_048))
    assert request is not None
    reply_id = session.reply.message_id  # type: ignore[union-attr]
    again = session.request_for(reply_id, 2, n_ctx=2_048)
    assert again is not None and again.messages == request.messages


@pytest.mark.parametrize("overflow", ["rolling", "middle"])
@pytest.mark.parametrize("system", ["", "Be brief."])
def test_the_next_prompt_is_what_the_engine_would_keep_not_the_whole_chat(
        store: Store, overflow: str, system: str) -> None:
    """The meter's figure for a chat that outgrew the context: the fit the engine makes of what
    is sent (estimated), with the run it leaves out ending where the kept turns start."""
    from inglenook.core.context import estimate, fit_messages, reply_reserve

    session = open_long(store, overflow, system)
    whole, exact = session.context_used()
    assert not exact and whole > 50_000  # the whole chat, estimated
    ahead = session.next_prompt(2_048)
    assert ahead is not None and ahead.first_seen is not None
    assert ahead.tokens <= 2_048 - reply_reserve(2_048, -1)
    assert session.next_prompt(2_048) is ahead  # kept until the chat changes
    assert session.next_prompt(1_000_000) is None  # a context that holds it all
    request = session.begin_reply(1, ReplyOptions(n_ctx=2_048))
    assert request is not None
    fit = fit_messages(request.messages, estimate, 2_048, reply_reserve(2_048, -1), overflow)
    assert ahead.tokens == estimate(fit.messages)
    pinned = 2 if overflow == "middle" else 0
    behind = 4_001 - (len(request.messages) - (1 if system else 0))
    assert ahead.left_out == behind + fit.dropped > behind
    # The marker goes on the first message sent after the run.
    assert ahead.first_seen == pinned + ahead.left_out
    kept_first = fit.messages[(1 if system else 0) + pinned]
    assert session.path[ahead.first_seen].content == kept_first.content
