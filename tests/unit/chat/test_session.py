"""ChatSession over a real SQLite store: settings kept with the chat, branches, the reply in
flight saved in batches, and Sessions keeping only what is on screen or replying."""

from __future__ import annotations

from pathlib import Path

import pytest

from inglenook.chat.session import (
    SAVE_INTERVAL_S,
    ChatSession,
    ChatSettings,
    title_from,
)
from inglenook.chat.sessions import Sessions
from inglenook.core.messages import Message
from inglenook.core.replies import Finish, Stats
from inglenook.core.sampling import SamplingParams
from inglenook.store import Store


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def store(tmp_path: Path):
    s = Store(tmp_path / "test.db")
    yield s
    s.close()


def answer(session: ChatSession, rid: int, text: str, finish: str = "stop") -> None:
    assert session.begin_reply(rid) is not None
    session.reply_started()
    session.reply_delta(text)
    session.finish_reply(Finish(finish), None)  # type: ignore[arg-type]


def test_first_message_creates_a_titled_conversation_with_its_settings(store: Store) -> None:
    settings = ChatSettings("Be terse.", SamplingParams(temperature=0.0), None)
    session = ChatSession(store, settings)
    session.add_user("How do rainbows form?\nPlease explain simply.")
    (conv,) = store.conversations()
    assert conv.id == session.conv_id and conv.title == "How do rainbows form?"
    assert store.chat_settings(conv.id) == (None, settings.to_dict())


def test_title_is_shortened_at_a_word() -> None:
    title = title_from("word " * 40)
    assert title.endswith("…") and len(title) <= 49 and "  " not in title


def test_settings_are_saved_with_the_chat_and_read_back(store: Store) -> None:
    session = ChatSession(store)
    session.add_user("Hi")
    custom = ChatSettings("You are a pirate.", SamplingParams(temperature=0.0, top_k=3), None)
    session.set_settings(custom)
    assert session.settings_dirty
    session.save_settings()
    assert not session.settings_dirty
    presets = store.presets()
    again = ChatSession.open(store, session.conv_id, presets, ChatSettings())
    assert again.settings == custom


def test_a_chat_from_before_v2_uses_its_preset_and_else_the_defaults(store: Store) -> None:
    presets = store.presets()
    fallback = ChatSettings("Fallback.", SamplingParams(temperature=0.5))
    with_preset = store.create_conversation("old", preset="Creative")
    unknown = store.create_conversation("older", preset="Gone")
    creative = ChatSession.open(store, with_preset, presets, fallback).settings
    assert creative.preset == "Creative" and creative.sampling.temperature == 1.0
    assert ChatSession.open(store, unknown, presets, fallback).settings == fallback


def test_a_reply_is_saved_in_batches_then_with_its_provenance(store: Store) -> None:
    clock = Clock()
    session = ChatSession(store, clock=clock)
    session.add_user("Hi")
    request = session.begin_reply(7)
    assert request is not None and request.request_id == 7
    assert [m.role for m in request.messages] == ["system", "user"]
    assert session.path[-1].status == "streaming" and session.reply.phase == "waiting"
    assert session.begin_reply(8) is None  # one reply at a time per chat
    session.reply_started()
    assert [session.reply_delta("Hel"), session.reply_delta("lo")] == [False, False]  # too soon
    clock.now += SAVE_INTERVAL_S
    assert session.reply_delta(", wor")
    assert store.active_path(session.conv_id)[-1].content == "Hello, wor"
    session.reply_delta("ld")
    stats = Stats(5, 0, 4, 0.1, 50.0, 100.0, 9, 2048, seed=3)
    session.reply_stats(stats)
    session.finish_reply(Finish("cancelled", "Stopped by you."), None)
    last = store.active_path(session.conv_id)[-1]
    assert (last.content, last.status) == ("Hello, world", "complete")
    assert last.provenance.finish == "cancelled" and last.provenance.seed == 3
    assert last.provenance.stats == stats and last.provenance.error == "Stopped by you."
    assert session.reply is None


def test_regenerate_and_edit_make_sibling_branches(store: Store) -> None:
    session = ChatSession(store)
    session.add_user("Q1")
    answer(session, 1, "A1")
    answer(session, 2, "A1 again")  # Regenerate: the last message is a reply
    assert [m.content for m in session.path] == ["Q1", "A1 again"]
    assert (session.path[-1].sibling_index, session.path[-1].sibling_count) == (2, 2)
    session.select_sibling(session.path[-1].id, -1)
    assert [m.content for m in session.path] == ["Q1", "A1"]
    session.select_sibling(session.path[-1].id, -1)  # no earlier version: nothing changes
    assert [m.content for m in session.path] == ["Q1", "A1"]
    session.edit_user(session.path[0].id, "Q1 edited")
    assert [m.content for m in session.path] == ["Q1 edited"]
    assert (session.path[0].sibling_index, session.path[0].sibling_count) == (2, 2)


def test_a_failed_empty_reply_drops_its_question_from_the_turns(store: Store) -> None:
    session = ChatSession(store)
    session.add_user("too long")
    session.begin_reply(1)
    session.finish_reply(Finish("error", "does not fit"), None)
    assert session.path[-1].status == "error"
    session.add_user("Hello")
    assert session.turns() == [Message("user", "Hello")]


def test_sessions_keep_only_the_visible_and_the_replying(store: Store) -> None:
    sessions = Sessions()
    a, b = ChatSession(store), ChatSession(store)
    a.add_user("A")
    b.add_user("B")
    request = a.begin_reply(1)
    sessions.keep(a)
    sessions.keep(b)
    assert sessions.by_request(1) is a and len(sessions) == 2
    sessions.release(a, visible=b)  # still replying: kept
    assert sessions.find(a.conv_id) is a
    a.finish_reply(Finish("stop"), None)
    sessions.reply_ended(request.request_id)
    sessions.release(a, visible=b)
    sessions.release(b, visible=b)  # on screen: kept
    assert sessions.find(a.conv_id) is None and sessions.find(b.conv_id) is b
    assert sessions.by_request(1) is None and sessions.replying() == []


def test_a_title_already_taken_gets_a_number(store: Store) -> None:
    for _ in range(3):
        ChatSession(store).add_user("Same question")
    titles = sorted(c.title for c in store.conversations())
    assert titles == ["Same question", "Same question (2)", "Same question (3)"]
