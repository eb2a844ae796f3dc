"""The text of an attachment, as the model was given it (a click on a chip in a message)."""

from __future__ import annotations

import re

from PySide6.QtCore import Qt
from PySide6.QtGui import QFontDatabase, QGuiApplication, QTextOption
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from inglenook.core.attachments import Attachment
from inglenook.ui.plain import plain_label

_LONG_RUN = re.compile(r"\S{2000}")  # Qt's line breaking is quadratic in such runs


class AttachmentDialog(QDialog):
    def __init__(self, attachment: Attachment, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("attachmentDialog")
        self.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        self.setWindowTitle(attachment.name)
        self.resize(720, 560)
        column = QVBoxLayout(self)
        self.info = plain_label(f"{attachment.describe()} · ≈{attachment.tokens:,} tokens", self,
                                name="attachmentInfo")
        column.addWidget(self.info)
        self.text = QPlainTextEdit(self)
        self.text.setObjectName("attachmentText")
        self.text.setReadOnly(True)
        if attachment.kind in ("code", "csv"):
            self.text.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
            self.text.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        elif _LONG_RUN.search(attachment.text):
            self.text.setWordWrapMode(QTextOption.WrapMode.WrapAnywhere)
        self.text.setPlainText(attachment.text if attachment.kind != "image"
                               else "An image: the model was given the picture itself.")
        column.addWidget(self.text, 1)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        self.copy_button = QPushButton("Copy text", self)
        self.copy_button.setEnabled(bool(attachment.text))
        buttons.addButton(self.copy_button, QDialogButtonBox.ButtonRole.ActionRole)
        self.copy_button.clicked.connect(
            lambda: QGuiApplication.clipboard().setText(attachment.text))
        buttons.rejected.connect(self.reject)
        column.addWidget(buttons)
