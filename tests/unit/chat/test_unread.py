"""A chat whose reply finished while another was on screen is unread until viewed."""

from inglenook.chat.unread import Unread


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
