"""A window of its own opens within the screen with room for the frame around it."""

from __future__ import annotations

from PySide6.QtWidgets import QWidget
from pytestqt.qtbot import QtBot

from inglenook.ui.widgets.window_size import FRAME, fit_in_window


def test_a_top_level_window_leaves_room_for_its_frame(qtbot: QtBot) -> None:
    window = QWidget()
    qtbot.addWidget(window)
    fit_in_window(window, 10_000, 10_000)
    screen = window.screen().availableGeometry()
    assert window.height() <= screen.height() - FRAME.height()
    assert window.width() <= screen.width() - FRAME.width()
