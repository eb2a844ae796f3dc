"""A model per chat in the window: the model chosen in a chat stays with it; showing the chat
again brings it back, also after a restart (fake engine)."""

from __future__ import annotations

import shutil
from pathlib import Path

from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from inglenook import paths
from inglenook.core.settings import SettingsFile
from inglenook.ui.main_window import MainWindow
from tests.gui.conftest import (
    LOAD_TIMEOUT_MS,
    REPLY_TIMEOUT_MS,
    Script,
    chat,
    fake_worker,
    open_window,
    start_reply,
)

SLOW = {"match": "story", "text": " ".join(f"w{i}" for i in range(40)), "token_ms": 40}


def loaded(window: MainWindow) -> str:
    return window.models.model.path if window.models.model else ""


def choose(qtbot: QtBot, window: MainWindow, path: str) -> None:
    window.models.load(path)  # what the picker and the Models dialog do
    qtbot.waitUntil(lambda: loaded(window) == path and not window.models.is_loading,
                    timeout=LOAD_TIMEOUT_MS)


def test_each_chat_keeps_its_model(qtbot: QtBot, window: MainWindow, script: Script,
                                   tmp_path: Path) -> None:
    first_model = loaded(window)
    other_model = str(tmp_path / "other.gguf")
    shutil.copyfile(paths.bundled_model_path(), other_model)
    chat(qtbot, window, "Hello first")
    first = window.chats.conv_id
    qtbot.mouseClick(window.new_chat_button, Qt.MouseButton.LeftButton)
    choose(qtbot, window, other_model)
    chat(qtbot, window, "Hello other")
    other = window.chats.conv_id
    assert window.chats.session.settings.model == other_model

    window.chats.open(first)  # its own model comes back
    qtbot.waitUntil(lambda: loaded(window) == first_model, timeout=LOAD_TIMEOUT_MS)
    assert window.picker.path() == first_model
    window.chats.open(other)
    qtbot.waitUntil(lambda: loaded(window) == other_model, timeout=LOAD_TIMEOUT_MS)
    chat(qtbot, window, "And again")
    assert window.chats.session.path[-1].provenance.model.path == other_model

    # A reply written in another chat is not stopped to switch: the chat's own model is loaded
    # beside the window's, and its replies go there.
    script.write([SLOW])
    start_reply(qtbot, window, "Tell me a story")
    window.chats.open(first)
    assert loaded(window) == other_model and "beside" in window.banner.text()
    assert window.picker.path() == first_model
    assert window.chat_models.group(window.chats.session) == first_model
    session = window.chats.sessions.find(other)
    assert session is not None
    qtbot.waitUntil(lambda: session.reply is None, timeout=REPLY_TIMEOUT_MS)
    window.close()

    again = open_window(qtbot, fake_worker(script, tmp_path / "engine2.log"),
                        SettingsFile().load())
    try:
        assert loaded(again) == other_model  # the last chosen: what new chats start with
        again.chats.open(first)
        qtbot.waitUntil(lambda: loaded(again) == first_model, timeout=LOAD_TIMEOUT_MS)
    finally:
        again.close()


def test_a_chat_answered_beside_keeps_its_model_through_a_reload(
        qtbot: QtBot, window: MainWindow, script: Script, tmp_path: Path) -> None:
    window_model = loaded(window)
    other_model = str(tmp_path / "other.gguf")
    shutil.copyfile(paths.bundled_model_path(), other_model)
    script.write([SLOW])
    start_reply(qtbot, window, "Tell me a story")
    story = window.chats.sessions.find(window.chats.conv_id)
    qtbot.mouseClick(window.new_chat_button, Qt.MouseButton.LeftButton)
    window.chat_models.choose(other_model)  # another chat is being answered: beside
    assert loaded(window) == window_model and window.picker.path() == other_model
    chat(qtbot, window, "Hello beside")
    beside = window.chats.session
    assert beside.path[-1].provenance.model.path == other_model
    assert story is not None
    qtbot.waitUntil(lambda: story.reply is None, timeout=REPLY_TIMEOUT_MS)
    with qtbot.waitSignal(window.model_ready, timeout=LOAD_TIMEOUT_MS):
        window.models.reload()  # the window's model again, with the panel's options
    assert beside.settings.model == other_model and window.picker.path() == other_model
    window.chat_models.choose(window_model)  # chosen: the chat goes back to the window's
    assert beside.settings.model == window_model
    assert window.chat_models.group(beside) == ""
