"""Where the user types: Enter sends, Shift+Enter is a newline, Esc stops.

A paste (or drop) that would make the prompt longer than MAX_PROMPT_CHARS is refused with a
message, and the draft stays as it was: a 20 MB paste used to keep the window busy for a minute
and a half, and no local model's context holds that much anyway. Text with a very long run of
characters without a space (base64, minified code) switches the box to wrapping anywhere: Qt's
usual line breaking takes time quadratic in such a run (48 s for a 1 MB line).
"""

from __future__ import annotations

import re

from PySide6.QtCore import QMimeData, QSize, Qt, Signal
from PySide6.QtGui import QKeyEvent, QTextOption
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

MAX_LINES = 8
MAX_PROMPT_CHARS = 1_000_000
_LONG_RUN = re.compile(r"\S{2000}")


class PromptEdit(QPlainTextEdit):
    """A text box that grows with its content up to MAX_LINES.

    Signals:
        submit(): Enter without Shift.
        escape(): Esc.
        paste_refused(int): a paste or drop of this many characters was refused: with the
            draft, the prompt would have been longer than MAX_PROMPT_CHARS.
    """

    submit = Signal()
    escape = Signal()
    paste_refused = Signal(int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("promptEdit")
        self.setPlaceholderText("Ask anything…  (Enter to send, Shift+Enter for a new line)")
        self.setTabChangesFocus(True)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.document().contentsChanged.connect(self.updateGeometry)
        self.document().contentsChanged.connect(self._on_contents_changed)

    def insertFromMimeData(self, source: QMimeData) -> None:
        if source.hasText():
            text = source.text()
            if len(text) + self.document().characterCount() > MAX_PROMPT_CHARS:
                self.paste_refused.emit(len(text))
                return
            if _LONG_RUN.search(text):
                self.setWordWrapMode(QTextOption.WrapMode.WrapAnywhere)
        super().insertFromMimeData(source)

    def _on_contents_changed(self) -> None:
        if self.document().isEmpty():  # sent or cleared: back to breaking lines between words
            self.setWordWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)

    def keyPressEvent(self, event: QKeyEvent) -> None:
        key = event.key()
        if key in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            if not event.modifiers() & Qt.KeyboardModifier.ShiftModifier:
                self.submit.emit()
                return
            self.insertPlainText("\n")
            return
        if key == Qt.Key.Key_Escape:
            self.escape.emit()
            return
        super().keyPressEvent(event)

    def sizeHint(self) -> QSize:
        line = self.fontMetrics().lineSpacing()
        lines = max(1, min(MAX_LINES, int(self.document().size().height())))
        margins = self.contentsMargins()
        height = lines * line + 2 * int(self.document().documentMargin())
        return QSize(400, height + margins.top() + margins.bottom() + 4)

    def minimumSizeHint(self) -> QSize:
        # QAbstractScrollArea's own minimum is ~5 lines; one line is the right minimum here,
        # and a narrow one: the window must fit 700 px.
        return QSize(120, self.sizeHint().height())


class Composer(QWidget):
    """The prompt box, its Send/Stop button, and a line that says why a paste was refused.

    Signals:
        send_requested(str): the user sent this text (already stripped, never empty).
        stop_requested(): the user asked to stop the reply being generated.
    """

    send_requested = Signal(str)
    stop_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("composer")
        self.edit = PromptEdit(self)
        self.button = QPushButton("Send", self)
        self.button.setObjectName("sendButton")
        self.button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.button.setMinimumWidth(84)
        self.notice = QLabel(self)
        self.notice.setObjectName("composerNotice")
        self.notice.setWordWrap(True)
        self.notice.hide()
        column = QVBoxLayout(self)
        column.setContentsMargins(12, 10, 12, 10)
        column.setSpacing(6)
        column.addWidget(self.notice)
        layout = QHBoxLayout()
        layout.setSpacing(10)
        layout.addWidget(self.edit, 1)
        layout.addWidget(self.button, 0, Qt.AlignmentFlag.AlignBottom)
        column.addLayout(layout)
        self._generating = False
        self._can_send = True
        self._loading = False  # a model is loading: Enter keeps the message for when it is ready
        self.pending = False  # a message waits for the model
        self.edit.submit.connect(self._submit)
        self.edit.escape.connect(self._escape)
        self.edit.paste_refused.connect(self._paste_refused)
        self.edit.textChanged.connect(self.notice.hide)
        self.button.clicked.connect(self._clicked)

    @property
    def generating(self) -> bool:
        return self._generating

    def set_generating(self, generating: bool) -> None:
        self._generating = generating
        self.button.setText("Stop" if generating else "Send")
        self.button.setProperty("stop", generating)
        self.button.setToolTip("Stop the reply (Esc)" if generating else "Send (Enter)")
        self.button.style().unpolish(self.button)
        self.button.style().polish(self.button)
        self._update_enabled()

    def set_can_send(self, can_send: bool) -> None:
        """False while no model is loaded: typing is fine, sending is not. A message kept
        while a model loaded is sent as soon as sending is possible."""
        self._can_send = can_send
        self._update_enabled()
        if can_send and self.pending:
            self._hold(False)
            self._submit()

    def set_loading(self, loading: bool) -> None:
        """While a model loads, Enter keeps the message and sends it once the model is ready;
        if the load fails, the message stays here, unsent."""
        self._loading = loading
        if not loading and self.pending and not self._can_send:
            self._hold(False)
            self.notice.setText("The model did not load, so your message was not sent.")
            self.notice.show()
        self._update_enabled()

    def _hold(self, pending: bool) -> None:
        self.pending = pending
        self.edit.setReadOnly(pending)
        self.notice.setText("Your message will be sent as soon as the model is ready "
                            "(Esc to edit it)." if pending else "")
        self.notice.setVisible(pending)

    def _update_enabled(self) -> None:
        self.button.setEnabled(self._generating or self._can_send or self._loading)

    def _clicked(self) -> None:
        if self._generating:
            self.stop_requested.emit()
        else:
            self._submit()

    def _paste_refused(self, size: int) -> None:
        self.notice.setText(
            f"That paste was not added: {size:,} characters, and a prompt can have at most "
            f"{MAX_PROMPT_CHARS:,}. Your draft is unchanged.")
        self.notice.show()

    def _escape(self) -> None:
        if not self.cancel_pending() and self._generating:
            self.stop_requested.emit()

    def cancel_pending(self) -> bool:
        """Esc on a message waiting for the model: it becomes editable again, unsent."""
        if not self.pending:
            return False
        self._hold(False)
        return True

    def _submit(self) -> None:
        text = self.edit.toPlainText().strip()
        if self._generating or not text or self.pending:
            return
        if not self._can_send:
            if self._loading:
                self._hold(True)
            return
        self.edit.clear()
        self.send_requested.emit(text)
