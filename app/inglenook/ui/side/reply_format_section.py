"""The side panel's "Reply format": a chat's "Reply as JSON", with an optional JSON Schema the
replies must match (enforced by a grammar while the model writes, core/reply_format.py). The
schema is checked as it is typed and the reason shown under it; what is typed is kept with the
chat either way (ChatSettings.reply_schema), so nothing is lost."""

from __future__ import annotations

import json

from PySide6.QtCore import Signal
from PySide6.QtGui import QFocusEvent, QFontDatabase, QTextCursor
from PySide6.QtWidgets import QPlainTextEdit, QVBoxLayout, QWidget

from inglenook.chat.chat_settings import MAX_SCHEMA, ChatSettings
from inglenook.core.reply_format import schema_problem
from inglenook.ui.widgets.controls import CollapsibleSection, helper_label
from inglenook.ui.widgets.narrow import WrappingCheckBox
from inglenook.ui.widgets.style import restyle

ANY_OBJECT = "Replies are a JSON object. A JSON Schema here makes them match it."
MATCHING = "Replies will match this schema."


def pretty(text: str) -> str:
    """Valid JSON laid out with two-space indents; anything else as it is."""
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except (ValueError, RecursionError):
        return text


class SchemaEdit(QPlainTextEdit):
    """A schema box in a narrow panel: lines scroll sideways rather than wrap (indents stay
    readable), and a valid schema is laid out when the box is left."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)

    def focusOutEvent(self, event: QFocusEvent) -> None:
        super().focusOutEvent(event)
        text = self.toPlainText()
        if text.strip() and (laid_out := pretty(text)) != text:
            cursor = self.textCursor()  # one undo step, so Ctrl+Z brings the typing back
            cursor.select(QTextCursor.SelectionType.Document)
            cursor.insertText(laid_out)


class ReplyFormatSection(CollapsibleSection):
    """Changes made with show_chat() emit nothing.

    Signals:
        format_changed(bool, str): "Reply as JSON" and the schema text, as the user left them.
    """

    format_changed = Signal(bool, str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Reply format", "replyFormatSection", parent)
        self.json_check = WrappingCheckBox("Reply as JSON", self.body)
        self.json_check.setObjectName("reply_json_check")
        self.json_check.setToolTip("The model can only write JSON (a grammar holds it to it "
                                   "while it writes). Kept with this chat.")
        self.json_check.toggled.connect(self._edited)
        self.schema_edit = SchemaEdit(self.body)
        self.schema_edit.setObjectName("reply_schema_edit")
        self.schema_edit.setAccessibleName("JSON Schema of the replies")
        self.schema_edit.setTabChangesFocus(True)
        self.schema_edit.setPlaceholderText('Optional JSON Schema, e.g. {"type": "object", '
                                            '"properties": {"name": {"type": "string"}}}')
        self.schema_edit.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.schema_edit.setToolTip("Laid out as indented JSON when you leave the box")
        line = self.schema_edit.fontMetrics().lineSpacing()
        self.schema_edit.setFixedHeight(line * 10 + 14)
        self.schema_edit.textChanged.connect(self._edited)
        self.note = helper_label("", self.body, name="replyFormatNote")
        layout = QVBoxLayout(self.body)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(6)
        layout.addWidget(self.json_check)
        layout.addWidget(self.schema_edit)
        layout.addWidget(self.note)
        self._quiet = False
        self._show_state()

    def show_chat(self, settings: ChatSettings) -> None:
        self._quiet = True
        try:
            self.json_check.setChecked(settings.reply_json)
            if self.schema_edit.toPlainText() != settings.reply_schema:  # the cursor stays
                self.schema_edit.setPlainText(settings.reply_schema)
        finally:
            self._quiet = False
        self._show_state()

    @property
    def problem(self) -> str:
        """What is wrong with the schema typed ("" when it is fine or empty)."""
        text = self.schema_edit.toPlainText().strip()
        if len(text) > MAX_SCHEMA:
            return f"A schema may be at most {MAX_SCHEMA:,} characters."
        return schema_problem(text) if text else ""

    def _edited(self) -> None:
        self._show_state()
        if not self._quiet:
            self.format_changed.emit(self.json_check.isChecked(),
                                     self.schema_edit.toPlainText()[:MAX_SCHEMA])

    def _show_state(self) -> None:
        on = self.json_check.isChecked()
        self.schema_edit.setVisible(on)
        problem = self.problem if on else ""
        text = problem or (MATCHING if self.schema_edit.toPlainText().strip() else ANY_OBJECT)
        self.note.setText(text if on else "")
        self.note.setVisible(on)
        restyle(self.note, kind="error" if problem else "")
