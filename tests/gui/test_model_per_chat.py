"""A model per chat with several models loaded, in the real window on the real engine router:
the bundled model is loaded twice, as the window's model and, under another name, beside it.
Choosing a model in the picker gives it to the chat on screen (its replies go to that model
through the router; the window's model is not reloaded), switching chats switches the picker,
and two chats on two models write at the same time."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from inglenook import paths
from inglenook.chat.session import ChatSession
from inglenook.core.load import ModelDefaults
from inglenook.ui.main_window import MainWindow
from inglenook.ui.models.picker import LOADED_MARK
from tests.gui.conftest import LOAD_TIMEOUT_MS, REPLY_TIMEOUT_MS, start_reply


def loaded(window: MainWindow) -> str:
    return window.models.model.path if window.models.model else ""


def choose_in_picker(window: MainWindow, path: str) -> None:
    index = window.picker.findData(path)
    assert index >= 0, f"{path} is not in the picker"
    window.picker.setCurrentIndex(index)
    window.picker.activated.emit(index)  # what a click on the item does


def short_replies(window: MainWindow, max_tokens: int = 16) -> None:
    """Two models on the machine's cores at once: a few words each are enough."""
    session = window.chats.session
    session.set_settings(session.settings.replace(
        sampling=session.settings.sampling.replace(max_tokens=max_tokens)))


def answered_by(session: ChatSession) -> str:
    provenance = session.path[-1].provenance
    assert session.path[-1].role == "assistant" and provenance.model is not None
    return provenance.model.path


def test_two_chats_on_two_models_write_side_by_side(
        qtbot: QtBot, real_window: MainWindow, bundled_model: Path) -> None:
    window = real_window
    window_model = loaded(window)
    twin = str(paths.models_dir() / "Twin-Q4_1.gguf")
    shutil.copyfile(bundled_model, twin)
    window.models.refresh()
    window.worker.preload(twin)  # several models loaded (as the API or a chat loads them)
    qtbot.waitUntil(lambda: twin in [m.path for m in window.worker.loaded_models()],
                    timeout=LOAD_TIMEOUT_MS)
    # The router says so from its thread; the picker marks it once the window hears of it.
    picker = window.picker
    qtbot.waitUntil(lambda: picker.itemText(picker.findData(twin)).startswith(LOADED_MARK))

    short_replies(window, 1024)  # still writing when the second chat starts, however slow
    start_reply(qtbot, window, "Write a long story about a dragon who bakes bread.")
    first = window.chats.session
    qtbot.mouseClick(window.new_chat_button, Qt.MouseButton.LeftButton)
    choose_in_picker(window, twin)
    assert not window.models.is_loading and loaded(window) == window_model  # nothing reloads
    assert window.picker.path() == twin and window.chats.session.settings.model == twin
    assert window.picker.currentText().startswith(LOADED_MARK)  # loaded, beside the window's
    assert "Twin-Q4_1" in window.model_label.text()
    assert "this chat's model" in window.model_label.text()
    short_replies(window)
    start_reply(qtbot, window, "What is the capital of France?")
    second = window.chats.session
    assert first is not second

    at_once: list[bool] = []

    def second_done() -> bool:
        busy = {m.path: m.busy for m in window.worker.loaded_models()}
        at_once.append(busy.get(window_model, 0) > 0 and busy.get(twin, 0) > 0)
        return second.reply is None

    qtbot.waitUntil(second_done, timeout=REPLY_TIMEOUT_MS * 3)
    assert any(at_once)  # each model wrote its chat's reply, at the same time
    window.chats.stop_conversation(first.conv_id)  # the story has shown what it had to
    qtbot.waitUntil(lambda: first.reply is None, timeout=REPLY_TIMEOUT_MS)
    assert answered_by(first) == window_model and answered_by(second) == twin
    assert second.path[-1].content and "Paris" in second.path[-1].content

    window.chats.open(first.conv_id)  # switching chats switches the picker, and nothing else
    assert window.picker.path() == window_model and loaded(window) == window_model
    assert "this chat's model" not in window.model_label.text()
    window.chats.open(second.conv_id)
    assert window.picker.path() == twin and not window.models.is_loading
    assert loaded(window) == window_model


def test_choosing_the_window_model_again_takes_the_chat_back_to_it(
        qtbot: QtBot, real_window: MainWindow, bundled_model: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    window = real_window
    window_model = loaded(window)
    twin = str(paths.models_dir() / "Twin-Q4_1.gguf")
    shutil.copyfile(bundled_model, twin)
    window.models.refresh()
    marked: list[threading.Thread] = []
    set_beside = window.picker.set_beside

    def recorded(found: frozenset[str]) -> None:
        marked.append(threading.current_thread())
        set_beside(found)

    monkeypatch.setattr(window.picker, "set_beside", recorded)
    window.worker.preload(twin)
    qtbot.waitUntil(lambda: twin in [m.path for m in window.worker.loaded_models()],
                    timeout=LOAD_TIMEOUT_MS)
    qtbot.waitUntil(lambda: bool(marked))  # the engine's thread said so; the GUI thread marks
    assert set(marked) == {threading.main_thread()}
    assert window.picker.itemText(window.picker.findData(twin)).startswith(LOADED_MARK)
    choose_in_picker(window, twin)
    assert window.chat_models.group(window.chats.session) == twin
    choose_in_picker(window, window_model)
    assert window.chats.session.settings.model == window_model
    assert window.chat_models.group(window.chats.session) == ""
    assert loaded(window) == window_model and not window.models.is_loading


def test_a_chat_on_gemma_beside_the_bundled_model(
        qtbot: QtBot, real_window: MainWindow, gemma_model: Path) -> None:
    """Another architecture beside the window's (the real Gemma 3 270M file): the chat's reply
    is written by it, and the context meter counts against its context, not the window's."""
    window = real_window
    window_model = loaded(window)
    gemma = str(paths.models_dir() / gemma_model.name)
    shutil.copyfile(gemma_model, gemma)
    window.models.refresh()
    window.app_settings.set_model_defaults(gemma, ModelDefaults({"n_ctx": 1024}))  # its own
    window.worker.preload(gemma)
    qtbot.waitUntil(lambda: window.worker.model_of(gemma) is not None, timeout=LOAD_TIMEOUT_MS)
    info = window.worker.model_of(gemma)
    assert info is not None
    choose_in_picker(window, gemma)
    assert loaded(window) == window_model and not window.models.is_loading
    assert info.n_ctx == 1024 and window.models.model is not None
    assert window.models.model.n_ctx != info.n_ctx
    assert window.context_label.text().endswith(f"/ {info.n_ctx:,}")
    short_replies(window)
    start_reply(qtbot, window, "The capital of France is")
    session = window.chats.session
    qtbot.waitUntil(lambda: session.reply is None, timeout=REPLY_TIMEOUT_MS)
    assert answered_by(session) == gemma and session.path[-1].content.strip()
