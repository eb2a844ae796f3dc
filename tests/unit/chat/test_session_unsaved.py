"""A reply that ends while the store cannot take it (a full disk) is kept whole in memory, said
to be not saved yet, and written once it can be: tried again on demand (the window's beat and its
closing), and before anything else of the chat is written. Once on a real full disk (a small
tmpfs; skipped where mounting is not permitted), once with the store's write failing on purpose."""

from __future__ import annotations

from pathlib import Path

import pytest

from inglenook.chat.session import ChatSession
from inglenook.chat.sessions import Sessions
from inglenook.core.replies import Finish
from inglenook.store import Store, StoreError
from tests.helpers.tmpfs import fill, tmpfs

STORY = "Once upon a time a lighthouse keeper counted the waves. " * 6000  # ~340 KB


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def replying(store: Store) -> tuple[ChatSession, Sessions, Clock]:
    clock = Clock()
    session = ChatSession(store, clock=clock)
    session.add_user("Tell me a long story.")
    sessions = Sessions()
    sessions.show(session)
    assert session.begin_reply(1) is not None
    sessions.keep(session)
    return session, sessions, clock


def stored_reply(store: Store, conv_id: int) -> tuple[str, str]:
    last = store.active_path(conv_id)[-1]
    return last.content, last.status


def test_a_reply_ended_on_a_full_disk_is_saved_once_there_is_room(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "small", "2m") as disk:
        path = disk / "inglenook.db"
        store = Store(path)
        try:
            session, sessions, clock = replying(store)
            conv = session.conv_id
            assert conv is not None
            filler = fill(disk)
            clock.now += 1
            streaming = sessions.delta(1, STORY)
            assert streaming is not None and "Could not save the reply" in streaming.problem
            ended = sessions.finished(1, Finish("stop"), None, "")
            assert ended is not None and ended.message is None
            assert ended.problem.startswith("The reply in «Tell me a long story.» is not saved "
                                            "yet: The disk is full")
            assert "It is kept, and saved once there is room" in ended.problem
            assert session.unsaved is not None and session.unsaved.content == STORY
            assert stored_reply(store, conv) == ("", "streaming")  # what a quit would leave
            assert sessions.save_unsaved()[0] == []  # still full: kept, said again
            assert "not saved yet" in sessions.save_unsaved()[1]
            assert sessions.find(conv) is session  # kept while the reply is only here
            filler.unlink()
            (saved, message), = sessions.save_unsaved()[0]
            assert saved is session and session.unsaved is None
            assert message is not None and message.content == STORY
            assert stored_reply(store, conv) == (STORY, "complete")
        finally:
            store.close()
        with Store(path) as again:  # the next start finds it whole, not interrupted
            assert stored_reply(again, conv) == (STORY, "complete")


def test_a_reply_the_store_refused_is_written_before_the_next_question(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with Store(tmp_path / "inglenook.db") as store:
        session, sessions, _ = replying(store)
        conv = session.conv_id
        assert conv is not None
        real_update = store.update_message
        full = True

        def update_message(*args: object, **kwargs: object) -> None:
            if full:
                raise StoreError("The disk is full: the last change could not be saved.",
                                 "full")
            real_update(*args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(store, "update_message", update_message)
        session.reply_delta("The sea was calm.")
        ended = sessions.finished(1, Finish("stop"), None, "")
        assert ended is not None and "not saved yet" in ended.problem
        with pytest.raises(StoreError, match="disk is full"):  # not sent: it would follow
            session.add_user("And then?")                      # an empty reply
        assert [m.content for m in store.active_path(conv)] == ["Tell me a long story.", ""]
        full = False
        session.add_user("And then?")
        assert [(t.role, t.content) for t in session.turns()] == [
            ("user", "Tell me a long story."), ("assistant", "The sea was calm."),
            ("user", "And then?")]
        assert stored_reply(store, conv) == ("And then?", "complete")
        assert session.unsaved is None and sessions.unsaved() == []


def test_a_reply_deleted_before_it_could_be_saved_is_let_go(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with Store(tmp_path / "inglenook.db") as store:
        session, sessions, _ = replying(store)
        real_update = store.update_message

        def refused(*_args: object, **_kwargs: object) -> None:
            raise StoreError("The database is busy.", "busy")

        monkeypatch.setattr(store, "update_message", refused)
        session.reply_delta("Soon gone.")
        sessions.finished(1, Finish("stop"), None, "")
        assert session.unsaved is not None
        session.delete_from(session.unsaved.message_id)
        monkeypatch.setattr(store, "update_message", real_update)
        assert sessions.save_unsaved() == ([(session, None)], "")
        assert session.unsaved is None and not session.busy
