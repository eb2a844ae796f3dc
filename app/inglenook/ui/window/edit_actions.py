"""The Edit menu's Undo, Redo, Cut, Copy, Paste and Select All: they act on the widget that has
the keyboard focus (the message box, a reply, a settings field), as in any desktop app, and are
greyed out in the open menu when that widget cannot do them now.

Their shortcuts are the platform's; a text field handles those keys itself first (Qt lets a
focused widget override a window shortcut), so the actions only run for the keys when the focus
is somewhere else, such as a reply, or when chosen from the menu.
"""

from __future__ import annotations

from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QAbstractSpinBox,
    QApplication,
    QComboBox,
    QLineEdit,
    QPlainTextEdit,
    QTextEdit,
    QWidget,
)

from inglenook.ui.chat.rich_text import RichTextView


def _target(widget: QWidget | None) -> QWidget | None:
    """The text widget an edit applies to: the focused one, the field inside a spin box or an
    editable combo box, or the reply a focused part of it belongs to."""
    if isinstance(widget, QAbstractSpinBox | QComboBox):
        return widget.findChild(QLineEdit)
    found = widget
    while found is not None and not isinstance(found, QLineEdit | QTextEdit | QPlainTextEdit
                                               | RichTextView):
        found = found.parentWidget()
    return found if found is not None else widget


def _text_edit_can(edit: QTextEdit | QPlainTextEdit, op: str) -> bool:
    document, read_only = edit.document(), edit.isReadOnly()
    selected = edit.textCursor().hasSelection()
    return {"undo": not read_only and document.isUndoAvailable(),
            "redo": not read_only and document.isRedoAvailable(),
            "cut": not read_only and selected, "copy": selected,
            "paste": not read_only and edit.canPaste(),
            "selectAll": not document.isEmpty()}[op]


def can(op: str, widget: QWidget | None = None) -> bool:
    """Whether `op` would do something in `widget` (default: the focused widget) now."""
    target = _target(widget if widget is not None else QApplication.focusWidget())
    if isinstance(target, QLineEdit):
        editable = not target.isReadOnly()
        return {"undo": editable and target.isUndoAvailable(),
                "redo": editable and target.isRedoAvailable(),
                "cut": editable and target.hasSelectedText(),
                "copy": target.hasSelectedText(),
                "paste": editable and bool(QGuiApplication.clipboard().text()),
                "selectAll": bool(target.text())}[op]
    if isinstance(target, QTextEdit | QPlainTextEdit):
        return _text_edit_can(target, op)
    if isinstance(target, RichTextView):  # a reply: read-only text
        return {"copy": target.has_selection(), "selectAll": True}.get(op, False)
    return False


def run(op: str) -> None:
    """Do `op` in the focused widget, if it can."""
    target = _target(QApplication.focusWidget())
    if target is None or not can(op, target):
        return
    if isinstance(target, RichTextView):
        (target.copy if op == "copy" else target.select_all)()
        return
    getattr(target, op)()
