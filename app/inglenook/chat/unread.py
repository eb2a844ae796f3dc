"""Which chats have a reply the user has not seen: one that finished while another chat was on
screen. Shown in the chat list until the chat is opened, and kept with the chat in the store
(a restart shows the same marks). Qt-free."""

from __future__ import annotations

import logging

from inglenook.store import Store, StoreError

log = logging.getLogger(__name__)


class Unread:
    """The marks, read from `store` when given (and written there as they change)."""

    def __init__(self, store: Store | None = None) -> None:
        self._store = store
        self._ids: set[int] = set()
        if store is not None:
            try:
                self._ids = set(store.unread_ids())
            except StoreError as exc:  # a mark is a convenience: the chats open as read
                log.warning("Could not read which chats are unread: %s", exc)

    @property
    def ids(self) -> frozenset[int]:
        return frozenset(self._ids)

    def reply_finished(self, conv_id: int | None, on_screen: bool, reason: str) -> bool:
        """A reply of chat `conv_id` ended; whether that made it unread. A reply stopped by
        the user (cancelled) has nothing new to show."""
        if conv_id is None or on_screen or reason == "cancelled" or conv_id in self._ids:
            return False
        self._ids.add(conv_id)
        self._keep(conv_id, True)
        return True

    def viewed(self, conv_id: int | None) -> bool:
        """The chat is on screen; whether it was unread."""
        if conv_id is not None and conv_id in self._ids:
            self._ids.discard(conv_id)
            self._keep(conv_id, False)
            return True
        return False

    def _keep(self, conv_id: int, unread: bool) -> None:
        if self._store is None:
            return
        try:
            self._store.set_unread(conv_id, unread)
        except (StoreError, KeyError) as exc:  # a full disk, a chat deleted meanwhile
            log.warning("Could not keep chat %s %s: %s", conv_id,
                        "unread" if unread else "read", exc)
