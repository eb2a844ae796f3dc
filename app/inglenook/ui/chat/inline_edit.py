"""Editing a question where it stands: the bubble's text becomes an editor with Send and
Cancel (Ctrl+Enter sends, Esc cancels), above it the question's files and images, each with ✕
to leave it out of the new version. Sending makes a new branch; the original stays, with all
of them. (Files are added in the composer, with a new question.)"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QEvent, Qt, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QHBoxLayout, QPlainTextEdit, QPushButton, QVBoxLayout, QWidget

from inglenook.core.attachments import Attachment
from inglenook.ui.chat.attachment_chips import AttachmentStrip, chip_for_draft
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
    """`attachments`: those of the question still in it (✕ takes one out).

    Signals:
    submitted(str): the edited text (stripped; empty only when attachments are left).
    cancelled(): the edit was abandoned.
    """

    submitted = Signal(str)
    cancelled = Signal()

    def __init__(self, text: str, parent: QWidget | None = None,
                 attachments: Sequence[Attachment] = ()) -> None:
        super().__init__(parent)
        self.setObjectName("inlineEdit")
        self.attachments = list(attachments)
        self.strip = AttachmentStrip(self)
        self.editor = _Editor(self)
        self.editor.setObjectName("inlineEditor")
        self.editor.setAccessibleName("Edit the question")
        self.editor.setTabChangesFocus(True)  # as in the message box: Tab reaches Send
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
        layout.addWidget(self.strip)
        layout.addWidget(self.editor)
        layout.addLayout(buttons)
        self.send_button.clicked.connect(self._submit)
        self.editor.submit.connect(self._submit)
        self.cancel_button.clicked.connect(self.cancelled)
        self.editor.cancel.connect(self.cancelled)

        self._show_chips()

    def remove_attachment(self, index: int) -> None:
        del self.attachments[index]
        self._show_chips()

    def _show_chips(self) -> None:
        chips = []
        for index, attachment in enumerate(self.attachments):
            chip = chip_for_draft(attachment)
            if chip.remove_button is not None:
                chip.remove_button.setToolTip("Leave this file out of the new version")
            chip.remove_requested.connect(lambda i=index: self.remove_attachment(i))
            chips.append(chip)
        self.strip.set_chips(chips)

    def _submit(self) -> None:
        text = self.editor.toPlainText().strip()
        if text or self.attachments:
            self.submitted.emit(text)
