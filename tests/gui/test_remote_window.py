"""The window on a remote engine, through the engine router (the worker's client) with nothing
else changed: a remote model loads like a file, replies stream with stats, Stop works, a
connection that breaks keeps the partial reply with a message, and a file loads again after."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from inglenook.core.load import LoadParams
from inglenook.engine.client import EngineClient
from inglenook.engine.providers import ProviderStore
from inglenook.engine.router import EngineRouter
from inglenook.engine.worker import EngineWorker
from inglenook.ui.main_window import MainWindow
from tests.gui.conftest import (
    LOAD_TIMEOUT_MS,
    REPLY_TIMEOUT_MS,
    Script,
    greedy_settings,
    open_window,
    start_reply,
    wait_reply,
)
from tests.helpers import keyrings
from tests.helpers.api import Served, serving
from tests.helpers.flaky_server import MODEL, flaky_server
from tests.helpers.keyrings import MemoryKeyring

pytestmark = pytest.mark.gui
memory_keyring = keyrings.memory_keyring
TOKEN = "window-remote-token-0123456789"
LONG = " ".join(f"w{i}" for i in range(400))


@pytest.fixture(scope="module")
def served(bundled_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("window-remote")
    script = folder / "script.json"
    script.write_text(json.dumps({
        "default": {"text": "Remote says: {last}", "token_ms": 0},
        "replies": [{"match": "long", "text": LONG, "token_ms": 20}]}))
    client = EngineClient(log_path=folder / "engine.log",
                          command=[sys.executable, "-m", "tests.helpers.fake_host", str(script)])
    client.load(LoadParams(str(bundled_model)))
    with serving(client, token=TOKEN) as s:
        yield s
    client.close()


@pytest.fixture
def window(qtbot: QtBot, served: Served, bundled_model: Path, script: Script, tmp_path: Path,
           memory_keyring: MemoryKeyring) -> Iterator[tuple[MainWindow, ProviderStore]]:
    store = ProviderStore()
    provider = store.save("Other Inglenook", served.base_url, TOKEN)
    settings = greedy_settings()
    settings.last_model = provider.ref(bundled_model.stem)
    local = EngineClient(log_path=tmp_path / "engine.log",
                         command=[sys.executable, "-m", "tests.helpers.fake_host",
                                  str(script.path)])
    worker = EngineWorker(EngineRouter(local, store))  # type: ignore[arg-type]
    win = open_window(qtbot, worker, settings)
    yield win, store
    win.close()


def test_chat_stop_and_a_broken_connection_on_remote_engines(
        qtbot: QtBot, window: tuple[MainWindow, ProviderStore], bundled_model: Path) -> None:
    win, store = window
    info = win.models.model
    assert info is not None and info.path.startswith("remote://other-inglenook/")
    assert info.name == bundled_model.stem and "Inglenook at 127.0.0.1" in info.architecture

    start_reply(qtbot, win, "Hello")
    wait_reply(qtbot, win)
    assert win.chat.bubbles[-1].text == "Remote says: Hello"
    assert win.chat.bubbles[-1].stats_label.text().startswith("3 tokens")

    start_reply(qtbot, win, "a long one please")
    qtbot.waitUntil(lambda: len(win.chat.bubbles[-1].text) > 10, timeout=REPLY_TIMEOUT_MS)
    with qtbot.waitSignal(win.reply_finished, timeout=REPLY_TIMEOUT_MS) as stopped:
        qtbot.keyClick(win.composer.edit, Qt.Key.Key_Escape)
    assert stopped.args[1].reason == "cancelled"
    assert win.chat.bubbles[-1].text.startswith("w0 w1")

    with flaky_server() as url:
        flaky = store.save("Flaky", url)
        with qtbot.waitSignal(win.model_ready, timeout=LOAD_TIMEOUT_MS):
            win.models.load(flaky.ref(MODEL))
        with qtbot.waitSignal(win.reply_finished, timeout=REPLY_TIMEOUT_MS) as broken:
            start_reply(qtbot, win, "Hi")
    finish = broken.args[1]
    assert finish.reason == "error" and "broke during the reply" in finish.message
    reply = win.chat.bubbles[-1]
    assert reply.text == "Half a reply"  # kept
    assert reply.notice.isVisible() and "The text received so far is kept." in \
        reply.notice.text()
    assert win.chats.session.turns()[-1].content == "Half a reply"

    with qtbot.waitSignal(win.model_ready, timeout=LOAD_TIMEOUT_MS):
        win.models.load(str(bundled_model))  # a file again: the local engine
    start_reply(qtbot, win, "Back home")
    wait_reply(qtbot, win)
    assert win.chat.bubbles[-1].text == "Echo: Back home"
