"""Find in this chat (Ctrl+F): a bar above the transcript. Type, and the view goes to the
nearest message that holds the words (the latest one at or above what is in view), with the
first of them selected; Enter or F3 goes to the next (newer) one, Shift+Enter or Shift+F3 to the
previous (older) one, Esc closes. "3 of 17" counts messages.

The store finds them (FTS5, like Ctrl+K across all chats: every word, the last as a prefix,
case and accents ignored), so a 10,000-message chat is searched without reading it; only hits
on the branch on screen count.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QEvent, QObject, Qt, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QLineEdit, QToolButton, QWidget

from inglenook.chat.session import ChatSession
from inglenook.store import Store, StoreError
from inglenook.ui import tasks
from inglenook.ui.chat.chat_view import ChatView
from inglenook.ui.widgets.keys import keeps_key

DEBOUNCE_MS = 150


class _FindEdit(QLineEdit):
    """The query. Esc closes the bar here: it must not reach the window's "stop the reply"."""

    closed = Signal()
    stepped = Signal(int)

    def event(self, event: QEvent) -> bool:
        return keeps_key(event, Qt.Key.Key_Escape, Qt.Key.Key_Return, Qt.Key.Key_Enter) \
            or super().event(event)

    def keyPressEvent(self, event: QKeyEvent) -> None:
        key = event.key()
        if key == Qt.Key.Key_Escape:
            self.closed.emit()
        elif key in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            shift = event.modifiers() & Qt.KeyboardModifier.ShiftModifier
            self.stepped.emit(-1 if shift else 1)
        else:
            super().keyPressEvent(event)


class FindBar(QFrame):
    """The bar; FindInChat drives it."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("findBar")
        self.edit = _FindEdit(self)
        self.edit.setObjectName("findEdit")
        self.edit.setPlaceholderText("Find in this chat")
        self.edit.setAccessibleName("Find in this chat")
        self.edit.setClearButtonEnabled(True)
        self.count = QLabel(self)
        self.count.setObjectName("findCount")
        self.count.setTextFormat(Qt.TextFormat.PlainText)
        self.previous = self._button("↑", "Previous (older) match (Shift+Enter, Shift+F3)")
        self.next = self._button("↓", "Next (newer) match (Enter, F3)")
        self.close_button = self._button("✕", "Close (Esc)")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(12, 6, 12, 6)
        layout.setSpacing(6)
        layout.addWidget(self.edit, 1)
        layout.addWidget(self.count)
        for button in (self.previous, self.next, self.close_button):
            layout.addWidget(button)
        self.hide()

    def _button(self, text: str, tip: str) -> QToolButton:
        button = QToolButton(self)
        button.setText(text)
        button.setToolTip(tip)
        button.setAccessibleName(tip.split(" (")[0])
        button.setAutoRaise(True)
        return button


class FindInChat(QObject):
    """Finds in the chat on screen. `session()` gives it; `focus_back()` is called on close."""

    def __init__(self, bar: FindBar, view: ChatView, store: Store,
                 session: Callable[[], ChatSession], focus_back: Callable[[], None],
                 parent: QObject) -> None:
        super().__init__(parent)
        self.bar, self.view, self.store = bar, view, store
        self._session, self._focus_back = session, focus_back
        self.hits: list[int] = []  # message ids on the branch shown, oldest first
        self.current = -1
        self._typing = tasks.debounce(DEBOUNCE_MS, self.run, self)
        bar.edit.textChanged.connect(lambda _text: self._typing.call())
        bar.edit.stepped.connect(self.step)
        bar.edit.closed.connect(self.close)
        bar.previous.clicked.connect(lambda: self.step(-1))
        bar.next.clicked.connect(lambda: self.step(1))
        bar.close_button.clicked.connect(self.close)

    def open(self) -> None:
        self.bar.show()
        self.bar.edit.setFocus()
        self.bar.edit.selectAll()
        if self.bar.edit.text():
            self.run()

    def close(self) -> None:
        self._typing.cancel()
        self.bar.hide()
        self.hits, self.current = [], -1
        self._focus_back()

    def chat_changed(self) -> None:
        """Another chat (or another branch) is on screen: its matches, if the bar is open."""
        if self.bar.isVisible():
            self._typing.call()

    def run(self) -> None:
        """Find what is typed; go to the latest match at or above the bottom of the view."""
        self._typing.cancel()
        text = self.bar.edit.text()
        session = self._session()
        self.hits, self.current = [], -1
        if text.strip() and session.conv_id is not None:
            try:
                found = self.store.find_in(session.conv_id, text)
            except StoreError as exc:
                self.bar.count.setText(f"Could not search: {exc}")
                return
            path = session.path
            positions = sorted(i for i in (path.index_of(m) for m in found) if i is not None)
            self.hits = [path.outline.ids[i] for i in positions]
            shown = self.view.visible_rows()
            bottom = shown[-1] if len(shown) else len(path) - 1
            before = [n for n, i in enumerate(positions) if i <= bottom]
            self.current = before[-1] if before else 0 if self.hits else -1
        self._show()

    def step(self, direction: int) -> None:
        """The next (1, newer) or previous (-1, older) match, round the ends."""
        if self._typing.pending:
            self.run()
        if self.hits:
            self.current = (self.current + direction) % len(self.hits)
            self._show()

    def _show(self) -> None:
        text = self.bar.edit.text()
        if not self.hits:
            self.bar.count.setText("No matches" if text.strip() else "")
        else:
            self.bar.count.setText(f"{self.current + 1:,} of {len(self.hits):,}")
            self.view.scroll_to_message(self.hits[self.current], text.split())
        for button in (self.bar.previous, self.bar.next):
            button.setEnabled(len(self.hits) > 1)
