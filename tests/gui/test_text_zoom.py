"""Text zoom of the chat: Ctrl+= / Ctrl+- / Ctrl+0, kept across restarts."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from inglenook.core.settings import SettingsFile
from inglenook.ui.main_window import MainWindow
from inglenook.ui.window.text_zoom import STEPS, next_zoom
from tests.gui.conftest import Script, chat, fake_worker, open_window


def test_zoom_steps() -> None:
    assert next_zoom(100, 1) == 110 and next_zoom(100, -1) == 90 and next_zoom(250, 0) == 100
    assert next_zoom(STEPS[-1], 1) == STEPS[-1] and next_zoom(STEPS[0], -1) == STEPS[0]
    assert next_zoom(104, 1) == 110 and next_zoom(104, -1) == 100  # between steps


def size_of(window: MainWindow) -> float:
    return window.chat.font().pointSizeF()


def test_keys_zoom_the_chat_text_and_it_is_kept(qtbot: QtBot, window: MainWindow,
                                               script: Script, tmp_path) -> None:
    chat(qtbot, window, "Hello")
    base = QApplication.font().pointSizeF()
    bubble = window.chat.bubbles[-1]
    height = bubble.body.heightForWidth(300)
    window.composer.edit.setFocus()
    qtbot.keyClick(window.composer.edit, Qt.Key.Key_Equal, Qt.KeyboardModifier.ControlModifier)
    qtbot.keyClick(window.composer.edit, Qt.Key.Key_Equal, Qt.KeyboardModifier.ControlModifier)
    assert window.app_settings.value.text_zoom == 125
    assert abs(size_of(window) - base * 1.25) < 0.01
    assert window.chat.bubbles[-1].body.font().pointSizeF() == size_of(window)  # inherited
    assert window.chat.bubbles[-1].body.heightForWidth(300) > height  # laid out again
    qtbot.keyClick(window.composer.edit, Qt.Key.Key_Minus, Qt.KeyboardModifier.ControlModifier)
    assert window.app_settings.value.text_zoom == 110
    window.close()  # saved at close
    assert SettingsFile().load().text_zoom == 110
    again = open_window(qtbot, fake_worker(script, tmp_path / "engine2.log"),
                        SettingsFile().load())
    try:
        assert abs(size_of(again) - base * 1.1) < 0.01
        qtbot.keyClick(again.composer.edit, Qt.Key.Key_0, Qt.KeyboardModifier.ControlModifier)
        assert again.app_settings.value.text_zoom == 100 and size_of(again) == base
    finally:
        again.close()
