"""The real window with the real engine and the bundled model, for GUI tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from inglenook.core.settings import Settings
from inglenook.ui.main_window import MainWindow

LOAD_TIMEOUT_MS = 60_000
REPLY_TIMEOUT_MS = 60_000


@pytest.fixture
def window(qtbot: QtBot) -> Iterator[MainWindow]:
    """Greedy, short replies, a 2,048-token context; returns once the model is loaded."""
    settings = Settings()
    settings.n_ctx = 2048
    settings.sampling = settings.sampling.replace(temperature=0.0, seed=7, max_tokens=48)
    win = MainWindow(settings=settings)
    qtbot.addWidget(win)
    win.show()
    qtbot.waitUntil(lambda: win.model is not None, timeout=LOAD_TIMEOUT_MS)
    yield win
    win.close()


def start_reply(qtbot: QtBot, win: MainWindow, text: str) -> None:
    """Type `text` and press Enter; returns once the request is on its way."""
    win.composer.edit.setPlainText(text)
    with qtbot.waitSignal(win.reply_started, timeout=REPLY_TIMEOUT_MS):
        qtbot.keyClick(win.composer.edit, Qt.Key.Key_Return)


def wait_reply(qtbot: QtBot, win: MainWindow) -> None:
    qtbot.waitUntil(lambda: win.current_id is None, timeout=REPLY_TIMEOUT_MS)
