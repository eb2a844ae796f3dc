"""Which chats have a reply the user has not seen: one that finished while another chat was on
screen. Shown in the chat list until the chat is opened. Qt-free; kept for the session (a
restart shows every chat as read)."""

from __future__ import annotations


class Unread:
    def __init__(self) -> None:
        self._ids: set[int] = set()

    @property
    def ids(self) -> frozenset[int]:
        return frozenset(self._ids)

    def reply_finished(self, conv_id: int | None, on_screen: bool, reason: str) -> bool:
        """A reply of chat `conv_id` ended; whether that made it unread. A reply stopped by
        the user (cancelled) has nothing new to show."""
        if conv_id is None or on_screen or reason == "cancelled" or conv_id in self._ids:
            return False
        self._ids.add(conv_id)
        return True

    def viewed(self, conv_id: int | None) -> bool:
        """The chat is on screen; whether it was unread."""
        if conv_id in self._ids:
            self._ids.discard(conv_id)
            return True
        return False
