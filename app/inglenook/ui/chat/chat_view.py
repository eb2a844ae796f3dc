"""The conversation pane: a column of message bubbles that follows a streaming reply.

Auto-scroll follows new text only while the user is at the bottom; scrolling up to read pauses
it, and scrolling back down resumes it.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QScrollArea,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from inglenook.core.replies import Finish, Stats
from inglenook.ui.chat.markdown_view import MarkdownView

BOTTOM_SLACK_PX = 40
MAX_USER_WIDTH = 0.78  # user bubbles keep some room on the left, like a messenger


def format_stats(stats: Stats) -> str:
    parts = [f"{stats.generated_tokens} tokens"]
    if stats.decode_tok_s > 0:
        parts.append(f"{stats.decode_tok_s:.1f} tok/s")
    parts.append(f"TTFT {stats.ttft_s * 1000:.0f} ms")
    if stats.cached_tokens:
        parts.append(f"{stats.cached_tokens} of {stats.prompt_tokens} prompt tokens cached")
    if stats.dropped_messages:
        parts.append(f"{stats.dropped_messages} oldest messages left out to fit the context")
    return "  ·  ".join(parts)


class MessageBubble(QFrame):
    """One message. Assistant bubbles have a footer with figures and actions.

    Signals:
        copy_requested(): Copy was clicked (the text is copied here; the signal is for tests).
        regenerate_requested(): Regenerate was clicked.
        stop_requested(): Stop was clicked while this reply streams.
        edit_requested(): Edit was clicked (user messages).
        details_requested(): Details was clicked (how a reply was made).
        delete_requested(): Delete was clicked (this message and all after it).
        sibling_requested(int): ‹ or › was clicked: -1 or +1.
    """

    copy_requested = Signal()
    regenerate_requested = Signal()
    stop_requested = Signal()
    edit_requested = Signal()
    details_requested = Signal()
    delete_requested = Signal()
    sibling_requested = Signal(int)

    def __init__(self, role: str, text: str = "", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.role = role
        self.text = text
        self.message_id: int | None = None
        self.setObjectName("userBubble" if role == "user" else "assistantBubble")
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Maximum)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(14, 10, 14, 8)
        layout.setSpacing(4)
        if role == "assistant":
            self.author = QLabel("Assistant", self)
            self.author.setObjectName("bubbleAuthor")
            layout.addWidget(self.author)
        self.body = MarkdownView(self)
        self.body.setObjectName("bubbleBody")
        layout.addWidget(self.body)
        self.notice = QLabel(self)
        self.notice.setObjectName("bubbleNotice")
        self.notice.setWordWrap(True)
        self.notice.hide()
        layout.addWidget(self.notice)
        self.stats_label = QLabel(self)
        self.stats_label.setObjectName("bubbleStats")
        self.stats_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        # Figures wrap rather than widen the bubble past a narrow chat column.
        self.stats_label.setWordWrap(True)
        self.stats_label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.stats_label.setMinimumWidth(60)
        self.stats_label.hide()
        self.copy_button = self._action("Copy", "Copy this message as Markdown")
        self.copy_button.clicked.connect(self._copy)
        self.regenerate_button = self._action("Regenerate", "Write this reply again")
        self.regenerate_button.clicked.connect(self.regenerate_requested)
        self.stop_button = self._action("Stop", "Stop this reply (Esc)")
        self.stop_button.clicked.connect(self.stop_requested)
        self.edit_button = self._action("Edit", "Ask this again differently (a new branch)")
        self.edit_button.clicked.connect(self.edit_requested)
        self.details_button = self._action("Details", "Model, settings, seed and timings")
        self.details_button.clicked.connect(self.details_requested)
        self.delete_button = self._action("Delete", "Delete this message and everything after it")
        self.delete_button.clicked.connect(self.delete_requested)
        self.previous_button = self._action("‹", "Previous version")
        self.previous_button.setObjectName("bubblePreviousButton")
        self.previous_button.clicked.connect(lambda: self.sibling_requested.emit(-1))
        self.sibling_label = QLabel(self)
        self.sibling_label.setObjectName("bubbleSiblings")
        self.next_button = self._action("›", "Next version")
        self.next_button.setObjectName("bubbleNextButton")
        self.next_button.clicked.connect(lambda: self.sibling_requested.emit(1))
        footer = QHBoxLayout()
        footer.setContentsMargins(0, 2, 0, 0)
        footer.setSpacing(6)
        for widget in (self.previous_button, self.sibling_label, self.next_button):
            footer.addWidget(widget)
        footer.addWidget(self.stats_label, 1)
        footer.addStretch(0)
        for button in (self.stop_button, self.edit_button, self.details_button,
                       self.regenerate_button, self.copy_button, self.delete_button):
            footer.addWidget(button)
        self.set_siblings(1, 1)
        layout.addLayout(footer)
        self.stop_button.hide()
        self.regenerate_button.setVisible(role == "assistant")
        self.edit_button.setVisible(role == "user")
        self.details_button.setVisible(role == "assistant")
        self.set_text(text)

    def set_siblings(self, index: int, count: int) -> None:
        """Show ‹ index/count › when this message has other versions."""
        for widget in (self.previous_button, self.sibling_label, self.next_button):
            widget.setVisible(count > 1)
        self.sibling_label.setText(f"{index}/{count}")
        self.previous_button.setEnabled(index > 1)
        self.next_button.setEnabled(index < count)

    def _action(self, label: str, tip: str) -> QToolButton:
        button = QToolButton(self)
        button.setText(label)
        button.setToolTip(tip)
        button.setObjectName(f"bubble{label}Button")
        button.setCursor(Qt.CursorShape.PointingHandCursor)
        button.setAutoRaise(True)
        return button

    def set_text(self, text: str) -> None:
        self.text = text
        self.body.set_markdown(text)
        self.body.setVisible(bool(text))
        if text and self.notice.property("kind") == "waiting":
            self.set_notice("")

    def append_text(self, delta: str) -> None:
        self.set_text(self.text + delta)

    def set_streaming(self, streaming: bool) -> None:
        if streaming and not self.text:
            self.set_notice("Thinking…", "waiting")
        self.stop_button.setVisible(streaming)
        self.delete_button.setEnabled(not streaming)
        self.regenerate_button.setEnabled(not streaming)
        self.copy_button.setEnabled(not streaming)

    def set_stats(self, stats: Stats) -> None:
        self.stats_label.setText(format_stats(stats))
        self.stats_label.show()

    def set_notice(self, text: str, kind: str = "info") -> None:
        self.notice.setText(text)
        self.notice.setProperty("kind", kind)
        self.notice.style().unpolish(self.notice)
        self.notice.style().polish(self.notice)
        self.notice.setVisible(bool(text))

    def set_finish(self, finish: Finish) -> None:
        if self.notice.property("kind") == "waiting":
            self.set_notice("")
        if finish.reason == "cancelled":
            self.set_notice(finish.message or "Stopped.", "info")
        elif finish.reason == "length":
            self.set_notice("The reply reached its length limit.", "info")
        elif finish.reason == "error":
            self.set_notice(finish.message, "error")

    def _copy(self) -> None:
        QGuiApplication.clipboard().setText(self.text)
        self.copy_requested.emit()


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
        self._column = QVBoxLayout(self._content)
        self._column.setContentsMargins(24, 20, 24, 20)
        self._column.setSpacing(14)
        self._column.addStretch(1)
        self.setWidget(self._content)
        self.bubbles: list[MessageBubble] = []
        self._rows: list[QWidget] = []
        self._follow = True
        bar = self.verticalScrollBar()
        bar.valueChanged.connect(self._on_scrolled)
        bar.rangeChanged.connect(self._on_range_changed)
        self.empty = QWidget(self._content)
        empty_layout = QVBoxLayout(self.empty)
        empty_layout.setContentsMargins(40, 110, 40, 40)
        empty_layout.setSpacing(8)
        title = QLabel("What shall we talk about?", self.empty)
        title.setObjectName("emptyTitle")
        title.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.empty_label = QLabel(self.empty)
        self.empty_label.setObjectName("emptyLabel")
        self.empty_label.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.empty_label.setWordWrap(True)
        empty_layout.addWidget(title)
        empty_layout.addWidget(self.empty_label)
        self._column.insertWidget(0, self.empty)

    def set_empty_text(self, text: str) -> None:
        self.empty_label.setText(text)

    def add_bubble(self, role: str, text: str = "") -> MessageBubble:
        self.empty.hide()
        bubble = MessageBubble(role, text)
        row = QWidget(self._content)
        row_layout = QHBoxLayout(row)
        row_layout.setContentsMargins(0, 0, 0, 0)
        if role == "user":
            row_layout.addStretch(int(100 * (1 - MAX_USER_WIDTH)))
            row_layout.addWidget(bubble, int(100 * MAX_USER_WIDTH))
        else:
            row_layout.addWidget(bubble)
        self._column.insertWidget(self._column.count() - 1, row)
        self.bubbles.append(bubble)
        self._rows.append(row)
        self._follow = True
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

    def scroll_to_bottom(self) -> None:
        self._follow = True
        QTimer.singleShot(0, lambda: self.verticalScrollBar().setValue(
            self.verticalScrollBar().maximum()))

    def scroll_to_message(self, message_id: int) -> None:
        """Bring a message into view (a search result) and stop following the bottom."""
        for bubble, row in zip(self.bubbles, self._rows, strict=True):
            if bubble.message_id == message_id:
                self._follow = False
                QTimer.singleShot(0, lambda r=row: self.ensureWidgetVisible(r, 0, 40))
                return

    @property
    def following(self) -> bool:
        return self._follow

    def _on_scrolled(self, value: int) -> None:
        bar = self.verticalScrollBar()
        self._follow = value >= bar.maximum() - BOTTOM_SLACK_PX

    def _on_range_changed(self, _minimum: int, maximum: int) -> None:
        if self._follow:
            self.verticalScrollBar().setValue(maximum)
