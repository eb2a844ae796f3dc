"""Several replies at once in the real window with the real engine: two chats write at the same
time, the status bar says how many replies run, and the loaded models can be listed."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QPushButton
from pytestqt.qtbot import QtBot

from inglenook.engine.scheduler import QueueState
from inglenook.ui.main_window import MainWindow
from inglenook.ui.models.loaded_view import LoadedModelsDialog, lanes_text
from tests.gui.conftest import REPLY_TIMEOUT_MS, start_reply


def test_two_chats_reply_at_once(qtbot: QtBot, real_window: MainWindow) -> None:
    window = real_window
    assert window.models.model is not None and window.models.model.n_slots >= 2
    most_busy: list[int] = [0]
    lanes_shown: list[str] = []

    def seen(state: QueueState) -> None:
        most_busy[0] = max(most_busy[0], len(state.busy))
        if window.lanes_label.text():
            lanes_shown.append(window.lanes_label.text())

    window.worker.queue_changed.connect(seen)
    start_reply(qtbot, window, "Write a long story about a dragon who bakes bread.")
    first = window.chats.session
    qtbot.mouseClick(window.new_chat_button, Qt.MouseButton.LeftButton)
    start_reply(qtbot, window, "What is the capital of France?")
    second = window.chats.session
    assert first is not second
    qtbot.waitUntil(lambda: first.reply is None and second.reply is None,
                    timeout=REPLY_TIMEOUT_MS * 3)
    assert most_busy[0] == 2  # both were written at the same time
    assert any(text.startswith("2 of") for text in lanes_shown)
    # Neither waited for the other: no "waiting for the reply in …" notice was needed.
    assert not window.queue_notice.isVisible()
    for session in (first, second):
        turns = session.turns()
        assert turns[-1].role == "assistant" and turns[-1].content


def test_the_loaded_models_dialog_lists_the_windows_model(
        qtbot: QtBot, real_window: MainWindow) -> None:
    dialog = LoadedModelsDialog(real_window.worker, 5, real_window)
    qtbot.addWidget(dialog)
    dialog.show()
    texts = [w.text() for w in dialog.rows.findChildren(QLabel)]
    model = real_window.models.model
    assert model is not None and model.name in texts
    assert any("the window's" in t and "GB" in t for t in texts)


def test_loaded_models_lists_the_model_and_unloads_it(qtbot: QtBot, window: MainWindow) -> None:
    """On the fake engine: Models → Loaded models…, then Unload."""
    window.command_actions["loadedModels"].trigger()
    dialog = window.loaded._dialog
    assert dialog is not None and dialog.isVisible()
    model = window.models.model
    assert model is not None
    texts = [w.text() for w in dialog.rows.findChildren(QLabel)]
    assert model.name in texts and any("the window's" in t for t in texts)
    unload = dialog.rows.findChild(QPushButton, "unload_0")
    assert unload is not None
    qtbot.mouseClick(unload, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: window.models.model is None, timeout=REPLY_TIMEOUT_MS)
    assert window.model_label.text() == "No model"
    qtbot.waitUntil(lambda: "No model is loaded." in [w.text() for w in
                                                      dialog.rows.findChildren(QLabel)],
                    timeout=REPLY_TIMEOUT_MS)
    assert not window.chats.can_send
    dialog.close()


def test_lanes_text() -> None:
    assert lanes_text(QueueState(None, (), (), 1)) == ""
    assert lanes_text(QueueState(None, (), (), 4)) == ""  # idle: nothing, not "0 of 4"
    assert lanes_text(QueueState(("a", 1), (), (("a", 1),), 4)) == "1 of 4 replies at once"
    assert lanes_text(QueueState(("a", 1), (("b", 2),), (("a", 1),), 1)) == (
        "1 of 1 replies at once, 1 waiting")
