"""Messages shown in a ChatView without a store behind them: the view on its own, as tests and
benches use it (`ChatView.add_bubble`)."""

from __future__ import annotations

from typing import Protocol

from PySide6.QtWidgets import QWidget

from inglenook.store.branch import MessageOutline, Outline
from inglenook.ui.chat.bubble import MessageBubble
from inglenook.ui.chat.bubble_pool import Factory


class Rows(Protocol):
    """The part of ChatView these messages use."""

    def makes_with(self, make: Factory) -> bool: ...
    def set_rows(self, rows: Outline, make: Factory) -> None: ...
    def append(self, row: MessageOutline) -> MessageBubble: ...
    def key_at(self, index: int) -> int: ...


class LooseMessages:
    def __init__(self, view: Rows) -> None:
        self.view = view
        self._messages: dict[int, tuple[str, str]] = {}  # key -> (role, text)
        self._next_key = -1

    def add(self, role: str, text: str) -> MessageBubble:
        key, self._next_key = self._next_key, self._next_key - 1
        self._messages[key] = (role, text)
        if not self.view.makes_with(self.make):
            self.view.set_rows(Outline(), self.make)
        return self.view.append(MessageOutline(key, role, len(text), 0, text.count("\n"),
                                               False, 0, 0))

    def clear(self) -> None:
        self._messages.clear()
        self.view.set_rows(Outline(), self.make)

    def make(self, index: int, parent: QWidget) -> MessageBubble:
        role, text = self._messages[self.view.key_at(index)]
        return MessageBubble(role, text, parent)
