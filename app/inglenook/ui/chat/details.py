"""Details of one reply: how it was made (model, settings, seed, timings), readable."""

from __future__ import annotations

import json

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLabel,
    QPushButton,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from inglenook.store import StoredMessage
from inglenook.ui.plain import plain_label
from inglenook.ui.widgets.wrapped_text import WrappedText


def describe(message: StoredMessage) -> str:
    """The Details rows as plain text (one "Label: value" per line)."""
    return "\n".join(f"{label}: {value}"
                     for label, value in message.provenance.describe(message.status))


class DetailsDialog(QDialog):
    """The provenance of one reply, as labelled rows; "Copy as JSON" gives the stored record.

    Signals:
        prompt_requested(): "Show prompt": the exact prompt this reply was made from.
    """

    prompt_requested = Signal()

    def __init__(self, message: StoredMessage, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("detailsDialog")
        self.setWindowTitle("How this reply was made")
        self.resize(600, 460)
        self.message = message
        rows = message.provenance.describe(message.status)
        body = QWidget()
        body.setObjectName("detailsBody")
        form = QFormLayout(body)
        form.setContentsMargins(16, 14, 16, 14)
        form.setHorizontalSpacing(14)
        form.setVerticalSpacing(8)
        form.setLabelAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignTop)
        form.setRowWrapPolicy(QFormLayout.RowWrapPolicy.DontWrapRows)
        self.values: dict[str, WrappedText] = {}
        for label, value in rows:
            name = plain_label(label, body, name="detailsLabel")
            name.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignTop)
            # Plain text (system prompts are user text, model names and errors outside text)
            # that wraps inside a path or a sha256 rather than cutting it.
            text = WrappedText(value, body)
            text.setObjectName("detailsValue")
            form.addRow(name, text)
            self.values[label] = text
        if not rows:
            form.addRow(QLabel("Nothing was recorded about this reply.", body))
        scroll = QScrollArea(self)
        scroll.setWidgetResizable(True)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)  # it wraps
        scroll.setWidget(body)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        self.copy_button = QPushButton("Copy as JSON", self)
        self.copy_button.setObjectName("detailsCopyButton")
        self.copy_button.setToolTip("Copy the full record, as stored, to the clipboard")
        self.copy_button.clicked.connect(self._copy)
        buttons.addButton(self.copy_button, QDialogButtonBox.ButtonRole.ActionRole)
        self.prompt_button = QPushButton("Show prompt", self)
        self.prompt_button.setObjectName("detailsPromptButton")
        self.prompt_button.setToolTip("The exact text and tokens the model was sent")
        self.prompt_button.clicked.connect(self.prompt_requested)
        buttons.addButton(self.prompt_button, QDialogButtonBox.ButtonRole.ActionRole)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(scroll, 1)
        layout.addWidget(buttons)

    def as_json(self) -> str:
        data = {"status": self.message.status, **self.message.provenance.to_dict()}
        return json.dumps(data, indent=2, ensure_ascii=False, sort_keys=True)

    def _copy(self) -> None:
        QGuiApplication.clipboard().setText(self.as_json())
