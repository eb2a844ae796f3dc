"""Every interactive widget a screen reader can reach has a name and a description, in the
main window and its dialogs (issue 13, part 7)."""

from __future__ import annotations

from PySide6.QtGui import QAccessible
from PySide6.QtWidgets import (
    QAbstractButton,
    QAbstractSlider,
    QAbstractSpinBox,
    QComboBox,
    QLineEdit,
    QListView,
    QPlainTextEdit,
    QScrollBar,
    QTextEdit,
    QWidget,
)
from pytestqt.qtbot import QtBot

from inglenook.ui.main_window import MainWindow
from tests.gui.conftest import chat

INTERACTIVE = (QAbstractButton, QAbstractSlider, QAbstractSpinBox, QComboBox, QLineEdit,
               QListView, QPlainTextEdit, QTextEdit)


def unnamed(root: QWidget) -> list[str]:
    """Interactive widgets shown under `root` whose accessible name or description is empty."""
    missing = []
    for widget in root.findChildren(QWidget):
        if not isinstance(widget, INTERACTIVE) or not widget.isVisibleTo(root):
            continue
        if isinstance(widget, QScrollBar):  # Qt names scroll bars by their orientation
            continue
        if isinstance(widget, QLineEdit) and isinstance(widget.parent(), (QAbstractSpinBox,
                                                                          QComboBox)):
            continue  # the editor inside a spin or combo box: the box carries the name
        face = QAccessible.queryAccessibleInterface(widget)
        name = face.text(QAccessible.Text.Name) if face else ""
        description = widget.accessibleDescription() or widget.toolTip()
        if not name.strip() or not description.strip():
            missing.append(f"{type(widget).__name__} {widget.objectName() or '?'} "
                           f"(name {name!r})")
    return missing


def test_the_main_window_names_every_control(qtbot: QtBot, window: MainWindow) -> None:
    chat(qtbot, window, "Hello")  # the messages' own buttons too
    window.panel_button.setChecked(True)
    assert unnamed(window) == []


def test_the_dialogs_name_every_control(qtbot: QtBot, window: MainWindow) -> None:
    window.models.show_dialog()
    dialog = window.models._dialog
    for page in ("library", "discover", "downloads"):
        dialog.show_page(page)
        assert unnamed(dialog) == [], page
    dialog.close()
    window.server.show_dialog()
    assert unnamed(window.server._dialog) == []
