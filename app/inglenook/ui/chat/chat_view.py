"""The conversation pane: a column of message bubbles that follows a streaming reply.

Auto-scroll follows new text only while the user is at the bottom; scrolling up to read pauses
it, and scrolling back down resumes it.

The column is at most MAX_COLUMN_WIDTH wide, centred: lines much longer are hard to read. When
the theme changes, every message renders again in its colours.

Each message is a light widget (see bubble.py and markdown_view.py for why and how); a
virtualised list painting cached documents would be lighter still, but the window and its tests
drive every message's buttons and labels as real widgets, and at ~0.2 MB a message (80 messages
add ~15 MB) the widgets are no longer what costs. Removed rows are deleted, not kept hidden.
"""

from __future__ import annotations

from collections.abc import Sequence

import shiboken6
from PySide6.QtCore import QRect, Qt, QTimer
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from inglenook.ui import theme
from inglenook.ui.chat.bubble import MessageBubble, format_stats
from inglenook.ui.chat.empty_state import EmptyState

BOTTOM_SLACK_PX = 40
MAX_USER_WIDTH = 0.78  # user bubbles keep some room on the left, like a messenger
MAX_COLUMN_WIDTH = 820  # px: the messages' column in a wide window, centred
SIDE_MARGIN = 24

__all__ = ["ChatView", "MessageBubble", "format_stats"]


class ChatView(QScrollArea):
    """The scrolling column of bubbles."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("chatView")
        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self._content = QWidget(self)
        self._content.setObjectName("chatContent")
        self._column = _CentredColumn(self._content)
        self._column.setContentsMargins(SIDE_MARGIN, 20, SIDE_MARGIN, 20)
        self._column.setSpacing(14)
        self._column.addStretch(1)
        self.setWidget(self._content)
        self.bubbles: list[MessageBubble] = []
        self._rows: list[QWidget] = []
        self._follow = True
        self._target: QWidget | None = None  # a search hit to keep in view
        bar = self.verticalScrollBar()
        bar.valueChanged.connect(self._on_scrolled)
        bar.rangeChanged.connect(self._on_range_changed)
        self.empty = EmptyState(self._content)
        self.empty_label = self.empty.label
        self._column.insertWidget(0, self.empty)
        theme.manager().changed.connect(self._theme_changed)

    def _theme_changed(self, new: theme.Theme) -> None:
        for bubble in self.bubbles:
            bubble.body.set_markdown_palette(new.markdown)

    def set_empty_text(self, text: str) -> None:
        self.empty_label.setText(text)

    def add_bubble(self, role: str, text: str = "") -> MessageBubble:
        self.empty.hide()
        bubble = MessageBubble(role, text, self._content)
        row: QWidget = bubble
        if role == "user":  # a row only where one is needed: each widget costs memory
            row = QWidget(self._content)
            row_layout = QHBoxLayout(row)
            row_layout.setContentsMargins(0, 0, 0, 0)
            row_layout.addStretch(int(100 * (1 - MAX_USER_WIDTH)))
            row_layout.addWidget(bubble, int(100 * MAX_USER_WIDTH))
        self._column.insertWidget(self._column.count() - 1, row)
        self.bubbles.append(bubble)
        self._rows.append(row)
        self._follow = True
        self._target = None
        return bubble

    def remove_last(self) -> None:
        if self.bubbles:
            self.bubbles.pop()
            row = self._rows.pop()
            row.hide()
            row.deleteLater()

    def clear(self) -> None:
        for row in self._rows:
            row.hide()
            row.deleteLater()
        self.bubbles.clear()
        self._rows.clear()
        self.empty.show()
        self._follow = True
        self._target = None

    def scroll_to_bottom(self) -> None:
        self._follow = True
        self._target = None
        QTimer.singleShot(0, self._to_bottom)

    def _to_bottom(self) -> None:
        if self._target is None:  # a search hit shown meanwhile wins
            self.verticalScrollBar().setValue(self.verticalScrollBar().maximum())

    def scroll_to_message(self, message_id: int, words: Sequence[str] = ()) -> None:
        """Bring a message into view (a search result) and stop following the bottom; the
        first of `words` found in it is selected, so the match stands out."""
        for bubble, row in zip(self.bubbles, self._rows, strict=True):
            if bubble.message_id == message_id:
                self._follow = False
                if words:
                    bubble.body.find_words(words)
                # Rows above it are still being laid out: keep it in view while the column
                # grows (until the next message or chat).
                self._target = row
                QTimer.singleShot(0, lambda r=row: self._show_row(r))
                return

    def _show_row(self, row: QWidget) -> None:
        if shiboken6.isValid(row):  # the chat may have been cleared since
            self.ensureWidgetVisible(row, 0, 40)

    @property
    def following(self) -> bool:
        return self._follow

    def _on_scrolled(self, value: int) -> None:
        bar = self.verticalScrollBar()
        self._follow = value >= bar.maximum() - BOTTOM_SLACK_PX

    def _on_range_changed(self, _minimum: int, maximum: int) -> None:
        if self._target is not None and shiboken6.isValid(self._target):
            self.ensureWidgetVisible(self._target, 0, 40)  # laid out a bit more: still there
        elif self._follow:
            self.verticalScrollBar().setValue(maximum)


class _CentredColumn(QVBoxLayout):
    """A column of at most MAX_COLUMN_WIDTH (and its margins), centred in the room it gets.

    Narrowing the layout's own rect rather than changing its margins with the width: changed
    margins make Qt lay every message out a second time, and a nested widget doing the same
    costs a deeper height-for-width pass on every change of a streaming message."""

    def _widest(self) -> int:
        margins = self.contentsMargins()
        return MAX_COLUMN_WIDTH + margins.left() + margins.right()

    def setGeometry(self, rect: QRect) -> None:
        width = min(rect.width(), self._widest())
        super().setGeometry(QRect(rect.x() + (rect.width() - width) // 2, rect.y(), width,
                                  rect.height()))

    def heightForWidth(self, width: int) -> int:
        return super().heightForWidth(min(width, self._widest()))
