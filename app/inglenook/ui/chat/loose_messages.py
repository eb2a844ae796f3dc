"""Messages shown in a ChatView without a store behind them: the view on its own, as tests and
benches use it (`ChatView.add_bubble`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtWidgets import QWidget

from inglenook.store.branch import MessageOutline, Outline
from inglenook.ui.chat.bubble import MessageBubble

if TYPE_CHECKING:
    from inglenook.ui.chat.chat_view import ChatView


class LooseMessages:
    def __init__(self, view: ChatView) -> None:
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
