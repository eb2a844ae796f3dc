"""Editing a question where it stands: the bubble's text becomes an editor with Send and
Cancel (Ctrl+Enter sends, Esc cancels). Sending makes a new branch; the original stays."""

from __future__ import annotations

from PySide6.QtCore import QEvent, Qt, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QHBoxLayout, QPlainTextEdit, QPushButton, QVBoxLayout, QWidget

from inglenook.ui.widgets.keys import keeps_key


class _Editor(QPlainTextEdit):
    submit = Signal()
    cancel = Signal()

    def event(self, event: QEvent) -> bool:
        # Esc here cancels the edit: it must not reach the window's "stop the reply" key.
        return keeps_key(event, Qt.Key.Key_Escape) or super().event(event)

    def keyPressEvent(self, event: QKeyEvent) -> None:
        enter = event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter)
        if enter and event.modifiers() & Qt.KeyboardModifier.ControlModifier:
            self.submit.emit()
        elif event.key() == Qt.Key.Key_Escape:
            self.cancel.emit()
        else:
            super().keyPressEvent(event)


class InlineEdit(QWidget):
    """Signals:
    submitted(str): the edited text (stripped, never empty).
    cancelled(): the edit was abandoned.
    """

    submitted = Signal(str)
    cancelled = Signal()

    def __init__(self, text: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("inlineEdit")
        self.editor = _Editor(self)
        self.editor.setObjectName("inlineEditor")
        self.editor.setAccessibleName("Edit the question")
        self.editor.setToolTip("Ctrl+Enter sends it as a new version; Esc cancels")
        self.editor.setPlainText(text)
        lines = max(2, min(10, text.count("\n") + 2))
        self.editor.setFixedHeight(self.editor.fontMetrics().lineSpacing() * lines + 16)
        self.send_button = QPushButton("Send", self)
        self.send_button.setObjectName("inlineSendButton")
        self.send_button.setToolTip("Ask this version (the original stays as a branch)")
        self.cancel_button = QPushButton("Cancel", self)
        self.cancel_button.setObjectName("inlineCancelButton")
        self.cancel_button.setToolTip("Keep the question as it was")
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        buttons.addWidget(self.cancel_button)
        buttons.addWidget(self.send_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.editor)
        layout.addLayout(buttons)
        self.send_button.clicked.connect(self._submit)
        self.editor.submit.connect(self._submit)
        self.cancel_button.clicked.connect(self.cancelled)
        self.editor.cancel.connect(self.cancelled)

    def _submit(self) -> None:
        text = self.editor.toPlainText().strip()
        if text:
            self.submitted.emit(text)
