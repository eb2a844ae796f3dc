"""A chat whose reply finished while another was on screen is unread until viewed."""

from pathlib import Path

from inglenook.chat.unread import Unread
from inglenook.store import Store


def test_a_reply_finished_in_the_background_is_unread_until_viewed() -> None:
    unread = Unread()
    assert not unread.reply_finished(1, True, "stop")  # on screen: seen as it came
    assert unread.reply_finished(2, False, "stop") and unread.ids == {2}
    assert not unread.reply_finished(2, False, "length")  # already unread: no news
    assert unread.reply_finished(3, False, "error")  # a failure is news too
    assert not unread.reply_finished(4, False, "cancelled")  # stopped: nothing new
    assert not unread.reply_finished(None, False, "stop")
    assert unread.viewed(2) and unread.ids == {3}
    assert not unread.viewed(2) and not unread.viewed(None)


def test_the_marks_are_kept_with_the_chats(tmp_path: Path) -> None:
    with Store(tmp_path / "inglenook.db") as store:
        first, second = store.create_conversation("A"), store.create_conversation("B")
        unread = Unread(store)
        assert unread.ids == set()
        assert unread.reply_finished(first, False, "stop")
        assert unread.reply_finished(second, False, "stop")
        assert unread.viewed(second)
        store.delete(first)  # a chat in the bin is not listed as unread
        assert Unread(store).ids == set()
        store.undelete(first)
    with Store(tmp_path / "inglenook.db") as store:  # a restart
        again = Unread(store)
        assert again.ids == {first}
        assert again.viewed(first)
        assert Unread(store).ids == set()


def test_a_mark_that_cannot_be_kept_is_still_shown(tmp_path: Path) -> None:
    with Store(tmp_path / "inglenook.db") as store:
        unread = Unread(store)
        assert unread.reply_finished(12345, False, "stop")  # no such chat: nothing to write
        assert unread.ids == {12345} and unread.viewed(12345)
