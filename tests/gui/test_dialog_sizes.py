"""Dialogs show all they hold (issue 16's rough edges): the server dialog's fields at their own
height and "New token" with its label; the smaller-copy dialog's whole explanation and an
unclipped type box; Details with the whole file path and sha256, wrapped, never cut."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import (
    QAbstractButton,
    QAbstractSpinBox,
    QComboBox,
    QLabel,
    QLineEdit,
    QScrollArea,
    QWidget,
)
from pytestqt.qtbot import QtBot

from inglenook.core.settings import Settings
from inglenook.server.status import ServerStatus
from inglenook.ui.chat.details import DetailsDialog
from inglenook.ui.main_window import MainWindow
from inglenook.ui.models.quantize_dialog import QuantizeDialog
from inglenook.ui.server.server_dialog import ServerDialog
from tests.gui.conftest import chat


def squeezed(dialog: QWidget) -> list[str]:
    """The fields, buttons and labels of `dialog` shorter than they need to be."""
    found = []
    for widget in dialog.findChildren(QWidget):
        if not widget.isVisible() or isinstance(widget.parent(), QComboBox | QAbstractSpinBox):
            continue  # a combo box's or spin box's own line edit: sized by its box
        if isinstance(widget, QLineEdit | QComboBox | QAbstractButton):
            need = widget.sizeHint().height()
        elif isinstance(widget, QLabel) and widget.wordWrap():
            need = widget.heightForWidth(widget.width())
        else:
            continue
        if widget.height() < need:
            found.append(f"{widget.objectName() or type(widget).__name__}: "
                         f"{widget.height()} < {need}")
    return found


def shown(qtbot: QtBot, dialog: QWidget) -> None:
    qtbot.addWidget(dialog)
    dialog.show()
    qtbot.waitExposed(dialog)


def test_the_server_dialog_gives_each_field_its_height(qtbot: QtBot) -> None:
    dialog = ServerDialog(Settings())
    shown(qtbot, dialog)
    qtbot.waitUntil(lambda: not squeezed(dialog))
    new_token = next(b for b in dialog.findChildren(QAbstractButton) if b.text() == "New token")
    assert new_token.width() >= new_token.sizeHint().width()
    # A long error wraps onto more lines: the dialog grows, nothing is cut.
    dialog.show_status(ServerStatus(), "The server did not start: " + "address in use. " * 12)
    qtbot.waitUntil(lambda: not squeezed(dialog))


def test_the_smaller_copy_dialog_shows_its_whole_note(qtbot: QtBot, bundled_model: Path) -> None:
    dialog = QuantizeDialog(str(bundled_model))
    shown(qtbot, dialog)
    qtbot.waitUntil(lambda: not squeezed(dialog))
    dialog.type.setCurrentText("Q4_K_M")  # the longest note: not smaller, and which types are
    assert "would not be smaller" in dialog.note.text()
    qtbot.waitUntil(lambda: not squeezed(dialog))
    assert dialog.type.height() >= dialog.type.sizeHint().height()


def test_details_wrap_the_file_path_and_sha256_instead_of_cutting_them(
        qtbot: QtBot, window: MainWindow) -> None:
    qtbot.waitUntil(lambda: bool(window.models.sha256), timeout=60_000)
    chat(qtbot, window, "Hi")
    dialog = DetailsDialog(window.chats.session.path[-1], window)
    shown(qtbot, dialog)
    scroll = dialog.findChild(QScrollArea)
    for label in ("File", "SHA-256"):
        value = dialog.values[label]
        assert value.text() == dict(dialog.message.provenance.describe("complete"))[label]
        qtbot.waitUntil(lambda v=value: v.height() >= v.heightForWidth(v.width()))
        assert value.geometry().right() <= scroll.viewport().width()
    assert len(dialog.values["SHA-256"].text()) == 64
    assert scroll.horizontalScrollBar().maximum() == 0
