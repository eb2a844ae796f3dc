"""The real window, with a fake engine (scripted replies, no llama.cpp) or the real one.

`window` runs the fake engine host (tests/helpers/fake_host.py) on the bundled model's file:
the same protocol, process and scheduler as the real thing, with replies a test can script
(`script` fixture). `real_window` runs llama.cpp with the bundled model; tests that use it
are marked integration (make test-fast skips them).
"""

from __future__ import annotations

import contextlib
import json
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication
from pytestqt.qtbot import QtBot

from inglenook.core.settings import Settings
from inglenook.engine.client import EngineClient
from inglenook.engine.worker import EngineWorker
from inglenook.ui.main_window import MainWindow

LOAD_TIMEOUT_MS = 60_000
REPLY_TIMEOUT_MS = 60_000


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "real_window" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.integration)


class Script:
    """The fake engine's replies; write() takes effect with the next request."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.write()

    def write(self, replies: list[dict] | None = None, default: dict | None = None,
              **extra: object) -> None:
        data = {"replies": replies or [],
                "default": default or {"text": "Echo: {last}", "token_ms": 1}, **extra}
        self.path.write_text(json.dumps(data), encoding="utf-8")


@pytest.fixture(autouse=True)
def empty_clipboard(qapp: object) -> Iterator[None]:
    """The clipboard emptied after each test: on the offscreen platform, a QMimeData left on
    it (the image view's Copy) crashes the process when the application is destroyed at exit
    (under xcb it does not), which would turn a green run red after its last test."""
    yield
    QGuiApplication.clipboard().clear()


@pytest.fixture
def script(tmp_path: Path) -> Script:
    return Script(tmp_path / "fake-engine.json")


def greedy_settings() -> Settings:
    """Greedy, short replies, a 2,048-token context."""
    settings = Settings()
    settings.load = settings.load.replace(n_ctx=2048)
    settings.sampling = settings.sampling.replace(temperature=0.0, seed=7, max_tokens=48)
    return settings


def start_early(worker: EngineWorker) -> None:
    """The host started while the window that loads the model is built: the host's Python
    start and imports (~0.3 s of CPU) came after the window's construction, one after the
    other, in every test. A failed start is the window's load's to report."""
    def start() -> None:
        with contextlib.suppress(Exception):
            worker.client.local.start()

    threading.Thread(target=start, daemon=True, name="host-start").start()


def fake_worker(script: Script, log: Path) -> EngineWorker:
    command = [sys.executable, "-m", "tests.helpers.fake_host", str(script.path)]
    worker = EngineWorker(EngineClient(log_path=log, command=command))
    start_early(worker)
    return worker


def open_window(qtbot: QtBot, worker: EngineWorker | None,
                settings: Settings | None = None) -> MainWindow:
    win = MainWindow(worker=worker, settings=settings or greedy_settings())
    qtbot.addWidget(win)
    win.show()
    qtbot.waitUntil(lambda: win.models.model is not None, timeout=LOAD_TIMEOUT_MS)
    return win


@pytest.fixture
def window(qtbot: QtBot, script: Script, tmp_path: Path) -> Iterator[MainWindow]:
    """The window on the fake engine, with the bundled model's file loaded."""
    win = open_window(qtbot, fake_worker(script, tmp_path / "engine.log"))
    yield win
    win.close()


@pytest.fixture
def real_window(qtbot: QtBot) -> Iterator[MainWindow]:
    """The window on llama.cpp with the bundled model loaded."""
    win = open_window(qtbot, None)
    yield win
    win.close()


def start_reply(qtbot: QtBot, win: MainWindow, text: str) -> None:
    """Type `text` and press Enter; returns once the request is on its way."""
    win.composer.edit.setPlainText(text)
    with qtbot.waitSignal(win.reply_started, timeout=REPLY_TIMEOUT_MS):
        qtbot.keyClick(win.composer.edit, Qt.Key.Key_Return)


def wait_reply(qtbot: QtBot, win: MainWindow) -> None:
    qtbot.waitUntil(lambda: win.chats.session.reply is None, timeout=REPLY_TIMEOUT_MS)


def chat(qtbot: QtBot, win: MainWindow, text: str) -> None:
    start_reply(qtbot, win, text)
    wait_reply(qtbot, win)
