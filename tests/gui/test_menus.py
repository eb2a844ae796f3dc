"""The menu bar and its keys: one table drives menus, shortcuts and the Shortcuts sheet."""

from __future__ import annotations

from collections import Counter

from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication, QKeySequence
from PySide6.QtWidgets import QPushButton
from pytestqt.qtbot import QtBot

from inglenook.core.settings import load_settings
from inglenook.ui.main_window import MainWindow
from inglenook.ui.window.commands import KEYS
from inglenook.ui.window.help import AboutDialog, ShortcutsDialog
from tests.gui.conftest import REPLY_TIMEOUT_MS, chat


def test_the_menu_bar_has_the_usual_menus(window: MainWindow) -> None:
    titles = [a.text().replace("&", "") for a in window.menuBar().actions()]
    assert titles == ["File", "Edit", "View", "Chat", "Models", "Help"]
    assert window.command_actions["quit"].shortcut() == QKeySequence("Ctrl+Q")
    assert window.command_actions["preferences"].shortcut() == QKeySequence("Ctrl+,")


def test_no_two_commands_share_a_key(window: MainWindow) -> None:
    keys = Counter(k.toString() for a in window.command_actions.values() for k in a.shortcuts())
    assert [k for k, n in keys.items() if n > 1] == []


def test_the_shortcuts_sheet_lists_every_key(qtbot: QtBot, window: MainWindow) -> None:
    qtbot.keyClick(window.composer.edit, Qt.Key.Key_F1)
    sheet = window.findChild(ShortcutsDialog)
    assert sheet is not None and sheet.isVisible()
    commands = [sheet.table.item(r, 1).text() for r in range(sheet.table.rowCount())]
    assert "Search conversations" in commands and "Stop the reply" in commands
    shown = sum(len(a.shortcuts()) > 0 for a in window.command_actions.values())
    assert sheet.table.rowCount() == shown + len(KEYS)  # and the keys of the window's parts
    sheet.close()


def test_about_names_the_versions(qtbot: QtBot, window: MainWindow) -> None:
    window.command_actions["about"].trigger()
    about = window.findChild(AboutDialog)
    rows = dict(about.rows)
    assert rows["Inglenook"] and "PySide6" in rows["Qt"]
    assert "llama-cpp-python" in rows["llama.cpp"] and "CPU only" in rows["llama.cpp"]
    about.close()


def test_copy_last_reply_and_regenerate_from_the_keyboard(
        qtbot: QtBot, window: MainWindow) -> None:
    chat(qtbot, window, "Name a colour.")
    qtbot.keyClick(window.composer.edit, Qt.Key.Key_C,
                   Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
    assert QGuiApplication.clipboard().text() == "Echo: Name a colour."
    with qtbot.waitSignal(window.reply_started, timeout=REPLY_TIMEOUT_MS):
        qtbot.keyClick(window.composer.edit, Qt.Key.Key_R, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: window.chats.session.reply is None, timeout=REPLY_TIMEOUT_MS)
    assert window.chat.bubbles[-1].sibling_label.text() == "2/2"


def test_the_sidebar_can_be_hidden_and_stays_hidden(qtbot: QtBot, window: MainWindow) -> None:
    window.command_actions["toggleSidebar"].trigger()
    assert window.sidebar.isHidden()
    window.close()
    assert load_settings().sidebar_visible is False


def test_ctrl_w_closes_the_window(qtbot: QtBot, window: MainWindow) -> None:
    qtbot.keyClick(window.composer.edit, Qt.Key.Key_W, Qt.KeyboardModifier.ControlModifier)
    assert not window.isVisible()


def test_the_window_is_usable_at_700_by_600(qtbot: QtBot, window: MainWindow) -> None:
    assert window.minimumSizeHint().width() <= 700
    window.resize(700, 600)
    qtbot.waitUntil(lambda: window.width() == 700, timeout=5_000)
    assert window.side_panel.isHidden() and not window.sidebar.isHidden()  # folded for room
    qtbot.waitUntil(lambda: window.chat.width() >= 300, timeout=5_000)
    assert window.composer.button.isVisible()
    window.command_actions["toggleSidePanel"].trigger()  # asked for: it gets the room
    assert not window.side_panel.isHidden() and window.sidebar.isHidden()
    window.resize(1400, 900)
    qtbot.waitUntil(lambda: not window.sidebar.isHidden(), timeout=5_000)
    assert not window.side_panel.isHidden()
    window.close()
    stored = load_settings()
    assert stored.sidebar_visible and stored.side_panel_visible  # folding is not a choice


def test_a_gguf_dropped_on_the_window_goes_into_the_library(
        qtbot: QtBot, window: MainWindow, bundled_model, tmp_path, monkeypatch) -> None:
    import shutil

    from PySide6.QtCore import QMimeData, QPointF, QUrl
    from PySide6.QtGui import QDropEvent

    from inglenook import paths
    from inglenook.ui.models import model_controller

    copy = tmp_path / "Dropped-Model.gguf"
    shutil.copyfile(bundled_model, copy)
    monkeypatch.setattr(model_controller, "ask_import_mode", lambda _parent, _name: "copy")
    data = QMimeData()
    data.setUrls([QUrl.fromLocalFile(str(copy))])
    drop = QDropEvent(QPointF(10, 10), Qt.DropAction.CopyAction, data,
                      Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier)
    # Qt delivers drops only from a real drag, which an offscreen test cannot make: hand the
    # event to the window's drop filter as Qt would.
    assert window._drops.eventFilter(window, drop)
    qtbot.waitUntil(lambda: (paths.models_dir() / "Dropped-Model.gguf").exists(),
                    timeout=30_000)
    qtbot.waitUntil(lambda: window.picker.findData(str(paths.models_dir() /
                                                     "Dropped-Model.gguf")) >= 0,
                    timeout=30_000)
    window.models._dialog.close()


def test_the_first_run_welcomes_once_and_starters_fill_the_message_box(
        qtbot: QtBot, window: MainWindow) -> None:
    empty = window.chat.empty
    assert not empty.welcome.isHidden() and "on this computer" in empty.welcome_text.text()
    assert window.side_panel.isHidden() or window.app_settings.value.side_panel_visible
    qtbot.mouseClick(empty.starter_buttons[2], Qt.MouseButton.LeftButton)
    assert window.composer.edit.toPlainText().startswith("Write a Python function")
    qtbot.mouseClick(empty.findChild(QPushButton, "welcomeDismissButton"),
                     Qt.MouseButton.LeftButton)
    assert empty.welcome.isHidden()
    window.close()
    assert load_settings().welcomed is True
