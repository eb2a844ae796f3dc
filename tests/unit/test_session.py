"""ConversationSession over a real SQLite store: branches, batching while streaming, turns."""

from __future__ import annotations

from pathlib import Path

import pytest

from inglenook.core.messages import Message
from inglenook.store import Store
from inglenook.store.session import SAVE_INTERVAL_S, ConversationSession, title_from


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


def test_first_message_creates_a_titled_conversation(store: Store) -> None:
    session = ConversationSession(store)
    session.add_user("How do rainbows form?\nPlease explain simply.")
    (conv,) = store.conversations()
    assert conv.id == session.conv_id and conv.title == "How do rainbows form?"


def test_title_is_shortened_at_a_word() -> None:
    title = title_from("word " * 40)
    assert title.endswith("…") and len(title) <= 49 and "  " not in title


def test_streaming_reply_is_saved_in_batches_not_per_token(store: Store) -> None:
    clock = Clock()
    session = ConversationSession(store, clock=clock)
    session.add_user("Hi")
    reply = session.begin_reply()
    assert reply.status == "streaming"
    saved = [session.stream("Hel"), session.stream("Hello")]
    assert saved == [False, False]  # too soon
    clock.now += SAVE_INTERVAL_S
    assert session.stream("Hello, wor")
    assert store.active_path(session.conv_id)[-1].content == "Hello, wor"
    session.finish_reply("Hello, world", "complete", {"seed": 3})
    last = store.active_path(session.conv_id)[-1]
    assert (last.content, last.status, last.provenance.seed) == ("Hello, world", "complete", 3)


def test_regenerate_and_edit_make_sibling_branches(store: Store) -> None:
    session = ConversationSession(store)
    session.add_user("Q1")
    session.begin_reply()
    session.finish_reply("A1", "complete")
    session.begin_reply()  # Regenerate
    session.finish_reply("A1 again", "complete")
    assert [m.content for m in session.path] == ["Q1", "A1 again"]
    assert (session.path[-1].sibling_index, session.path[-1].sibling_count) == (2, 2)
    first_reply = store.siblings(session.path[-1].id)[0]
    session.select_sibling(first_reply.id)
    assert [m.content for m in session.path] == ["Q1", "A1"]
    session.edit_user(session.path[0].id, "Q1 edited")
    assert [m.content for m in session.path] == ["Q1 edited"]
    assert (session.path[0].sibling_index, session.path[0].sibling_count) == (2, 2)


def test_a_failed_empty_reply_drops_its_question_from_the_turns(store: Store) -> None:
    session = ConversationSession(store)
    session.add_user("too long")
    session.begin_reply()
    session.finish_reply("", "error", {"error": "does not fit"})
    session.add_user("Hello")
    assert session.turns() == [Message("user", "Hello")]
