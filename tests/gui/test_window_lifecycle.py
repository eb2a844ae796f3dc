"""The window over time: an engine that dies mid-load, settings across restarts, auto-scroll while
a reply grows, and the notice for a model without a chat template."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDoubleSpinBox, QPlainTextEdit
from pytestqt.qtbot import QtBot

from inglenook import paths
from inglenook.core.settings import load_settings
from inglenook.core.template import CHATML_TEMPLATE
from inglenook.engine import protocol as p
from inglenook.ui.chat.chat_view import ChatView, MessageBubble
from inglenook.ui.main_window import MainWindow
from inglenook.ui.models.defaults_dialog import CUSTOM, ModelDefaultsDialog
from tests.gguf_tools import rewrite_metadata
from tests.gui.conftest import LOAD_TIMEOUT_MS, REPLY_TIMEOUT_MS, start_reply, wait_reply


def send(qtbot: QtBot, win: MainWindow, text: str) -> None:
    """Send and wait for the whole reply."""
    start_reply(qtbot, win, text)
    wait_reply(qtbot, win)


# ---- the engine dies while a model loads -------------------------------------------------------


def test_engine_dying_mid_load_keeps_the_chat_and_forgets_the_model(
        qtbot: QtBot, window: MainWindow, bundled_model: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    send(qtbot, window, "What is the capital of France?")
    bubbles_before = [(b.role, b.text) for b in window.chat.bubbles]
    turns_before = list(window.chats.session.turns())
    assert len(bubbles_before) == 2 and bubbles_before[1][1]
    # The model that loaded is remembered for the next start (saved after a short debounce).
    qtbot.waitUntil(lambda: load_settings().last_model == str(bundled_model),
                    timeout=LOAD_TIMEOUT_MS)

    # Freeze the idle host, so the Load request waits in its pipe while the worker waits for an
    # answer that will never come; then kill it: the engine dies in the middle of the load.
    client = window.worker.client.local  # the window's engine host, behind the router
    pid = client.pid
    assert pid is not None and client.alive
    load_sent = threading.Event()
    original_send = client._send

    def send_and_note(message: object) -> None:
        original_send(message)
        if isinstance(message, p.Load):
            load_sent.set()

    monkeypatch.setattr(client, "_send", send_and_note)
    os.kill(pid, signal.SIGSTOP)
    window.models.load(str(bundled_model))
    qtbot.waitUntil(load_sent.is_set, timeout=LOAD_TIMEOUT_MS)
    assert window.models.is_loading and window.composer.button.text() == "Send"
    with qtbot.waitSignal(window.engine_lost, timeout=LOAD_TIMEOUT_MS) as lost:
        os.kill(pid, signal.SIGKILL)

    assert "stopped unexpectedly" in lost.args[0] and "SIGKILL" in lost.args[0]
    assert window.isVisible()
    assert window.banner.isVisible() and "stopped unexpectedly" in window.banner.text()
    assert "conversation is safe" in window.banner.text()
    assert window.banner.action_button.isVisible()
    assert [(b.role, b.text) for b in window.chat.bubbles] == bubbles_before
    assert window.chats.session.turns() == turns_before
    assert window.models.model is None and not window.models.is_loading
    assert window.model_label.text() == "No model"
    assert not window.composer.button.isEnabled()
    assert not window.status_bar.model.progress.isVisible()
    # A model that was loading when the engine died is not retried on the next start.
    assert window.app_settings.value.last_model == ""
    qtbot.waitUntil(lambda: load_settings().last_model == "", timeout=LOAD_TIMEOUT_MS)
    # That took the save's debounce (half a second): nothing was reloaded by itself meanwhile.
    assert window.models.model is None and not window.models.is_loading
    assert not client.alive and client.pid == pid
    assert window.banner.isVisible() and window.banner.action_button.isVisible()

    # The way back is the Reload button.
    with qtbot.waitSignal(window.model_ready, timeout=LOAD_TIMEOUT_MS) as ready:
        qtbot.mouseClick(window.banner.action_button, Qt.MouseButton.LeftButton)
    assert ready.args[0].path == str(bundled_model)
    assert client.alive and client.pid != pid
    assert not window.banner.isVisible() and not window.banner.action_button.isVisible()
    assert window.app_settings.value.last_model == str(bundled_model)
    send(qtbot, window, "And what is the capital of Germany?")
    assert len(window.chat.bubbles) == 4 and window.chat.bubbles[-1].text
    roles = [m.role for m in window.chats.last_request.messages]
    assert roles == ["system", "user", "assistant", "user"]


# ---- settings across restarts ------------------------------------------------------------------


def test_panel_settings_survive_a_restart(
        qtbot: QtBot, window: MainWindow, bundled_model: Path) -> None:
    prompt = "You are a terse pirate.\nAnswer in one line."
    window.panel.findChild(QDoubleSpinBox, "temperature_spin").setValue(1.3)
    window.panel.findChild(QPlainTextEdit, "system_prompt_edit").setPlainText(prompt)
    window.close()  # saves at once, without waiting for the debounce

    stored = load_settings()
    assert stored.sampling.temperature == 1.3
    assert stored.system_prompt == prompt
    assert stored.last_model == str(bundled_model)
    assert (stored.load.n_ctx, stored.sampling.seed, stored.sampling.max_tokens) == (2048, 7, 48)

    again = MainWindow()  # reads the settings file, like a fresh start
    qtbot.addWidget(again)
    again.show()
    assert again.panel.findChild(QDoubleSpinBox, "temperature_spin").value() == 1.3
    assert again.panel.findChild(QPlainTextEdit, "system_prompt_edit").toPlainText() == prompt
    qtbot.waitUntil(lambda: again.models.model is not None, timeout=LOAD_TIMEOUT_MS)
    assert again.models.model.path == str(bundled_model)  # the last model is loaded again
    assert again.models.model.n_ctx == 2048
    send(qtbot, again, "Hello!")
    request = again.chats.last_request
    assert request.sampling.temperature == 1.3
    assert request.messages[0].role == "system" and request.messages[0].content == prompt
    again.close()
    assert load_settings().system_prompt == prompt


# ---- auto-scroll -------------------------------------------------------------------------------

LONG = ("A long paragraph that wraps over several lines in a narrow window, so that forty of "
        "them are much taller than the view. ") * 4
MORE = "\n\nAnother paragraph streams in, long enough to wrap over a line or two of the bubble."


@pytest.fixture
def chat(qtbot: QtBot) -> ChatView:
    view = ChatView()
    qtbot.addWidget(view)
    for i in range(40):
        view.add_bubble("user" if i % 2 == 0 else "assistant", f"Message {i}. {LONG}")
    view.resize(600, 400)
    view.show()
    qtbot.waitExposed(view)
    bar = view.verticalScrollBar()
    qtbot.waitUntil(lambda: bar.maximum() > 2000, timeout=REPLY_TIMEOUT_MS)
    view.scroll_to_bottom()
    qtbot.waitUntil(lambda: bar.value() == bar.maximum(), timeout=REPLY_TIMEOUT_MS)
    return view


def first_in_view(chat: ChatView) -> tuple[int, int]:
    """The first row in view and where its bubble's top is in the viewport."""
    index = chat.visible_rows()[0]
    bubble = chat.bubble_at(index)
    assert bubble is not None
    return index, bubble.y()


def grow(qtbot: QtBot, chat: ChatView, bubble: MessageBubble) -> None:
    """Append a paragraph and wait until the view's layout has taken it in."""
    bar = chat.verticalScrollBar()
    before = bar.maximum()
    bubble.append_text(MORE)
    qtbot.waitUntil(lambda: bar.maximum() > before, timeout=REPLY_TIMEOUT_MS)


def test_the_view_follows_a_growing_reply_only_while_at_the_bottom(
        qtbot: QtBot, chat: ChatView) -> None:
    bar = chat.verticalScrollBar()
    last = chat.bubbles[-1]
    chat.pin(chat.keys()[-1])  # as the window pins a reply being written
    for _ in range(5):
        grow(qtbot, chat, last)
        qtbot.waitUntil(lambda: bar.value() == bar.maximum(), timeout=REPLY_TIMEOUT_MS)
        assert chat.following

    bar.setValue(0)  # the user scrolls up to read
    assert not chat.following
    for _ in range(5):
        grow(qtbot, chat, last)
        assert bar.value() == 0

    bar.setValue(bar.maximum() // 2)
    assert not chat.following
    reading = first_in_view(chat)
    for _ in range(3):  # what the user reads does not move (rows above may get measured)
        grow(qtbot, chat, last)
        assert first_in_view(chat) == reading

    bar.setValue(bar.maximum())  # back at the bottom: following resumes
    assert chat.following
    for _ in range(3):
        grow(qtbot, chat, last)
        qtbot.waitUntil(lambda: bar.value() == bar.maximum(), timeout=REPLY_TIMEOUT_MS)


def test_near_the_bottom_counts_as_the_bottom(qtbot: QtBot, chat: ChatView) -> None:
    bar = chat.verticalScrollBar()
    bar.setValue(bar.maximum() - 10)  # a wheel tick short of the end still follows
    assert chat.following
    grow(qtbot, chat, chat.bubbles[-1])
    qtbot.waitUntil(lambda: bar.value() == bar.maximum(), timeout=REPLY_TIMEOUT_MS)


def test_a_new_message_scrolls_back_to_the_bottom(qtbot: QtBot, chat: ChatView) -> None:
    bar = chat.verticalScrollBar()
    bar.setValue(0)
    assert not chat.following
    before = bar.maximum()
    chat.add_bubble("user", f"A new question. {LONG}")
    assert chat.following
    qtbot.waitUntil(lambda: bar.maximum() > before and bar.value() == bar.maximum(),
                    timeout=REPLY_TIMEOUT_MS)


# ---- a model without a chat template -----------------------------------------------------------


def test_a_model_without_a_chat_template_says_which_it_uses_and_why(
        qtbot: QtBot, window: MainWindow, bundled_model: Path) -> None:
    copy = rewrite_metadata(bundled_model, paths.models_dir() / "SmolLM2-no-template.gguf",
                            {"tokenizer.chat_template": None})
    window.models.refresh()
    index = window.picker.findData(str(copy))
    assert index == 1  # right after the bundled model, which stays selected
    assert window.picker.currentIndex() == 0
    assert "SmolLM2-no-template" in window.picker.itemText(index)
    assert "bundled" not in window.picker.itemText(index)

    with qtbot.waitSignal(window.model_ready, timeout=LOAD_TIMEOUT_MS) as ready:
        qtbot.keyClick(window.picker, Qt.Key.Key_Down)  # pick the next model in the list
    info = ready.args[0]
    assert info.path == str(copy) and info.template_source == "detected"
    assert window.model_label.text() == "SmolLM2-no-template  ·  ChatML template"
    assert window.status_bar.model.notice.isVisible()
    assert window.status_bar.model.notice.text() == (
        "No chat template in the file: using ChatML, chosen from its <|im_start|> and "
        "<|im_end|> tokens.")
    assert "chosen from its <|im_start|>" in window.model_label.toolTip()
    assert not window.banner.isVisible()

    send(qtbot, window, "Hello!")  # the fallback template works
    assert window.chat.bubbles[-1].text
    assert "ChatML" in window.model_label.text()  # still said after the status bar moved on


# ---- per-model defaults ------------------------------------------------------------------------


def test_per_model_defaults_are_used_when_the_model_loads(
        qtbot: QtBot, window: MainWindow, bundled_model: Path) -> None:
    window.side.edit_model_defaults(str(bundled_model))
    dialog = window.findChild(ModelDefaultsDialog)
    dialog.set_own("n_ctx", 1024)
    dialog.preset.setCurrentIndex(dialog.preset.findData("Precise"))
    dialog.template_choice.setCurrentIndex(dialog.template_choice.findData(CUSTOM))
    assert dialog.template.isVisibleTo(dialog)
    dialog.template.setPlainText("{% for m in messages %}")  # unfinished: refused
    dialog._save()
    assert dialog.isVisible() and "syntax" in dialog.error.text()
    dialog.template.setPlainText(CHATML_TEMPLATE)
    dialog._save()
    assert not dialog.isVisible()
    qtbot.waitUntil(lambda: load_settings().defaults_for(str(bundled_model)).own("n_ctx")
                    == 1024)
    with qtbot.waitSignal(window.model_ready, timeout=LOAD_TIMEOUT_MS) as ready:
        qtbot.mouseClick(window.banner.action_button, Qt.MouseButton.LeftButton)
    info = ready.args[0]
    assert info.n_ctx == 1024 and info.template_source == "override"
    assert window.preset_bar.combo.currentData() == "Precise"
    assert window.panel.sampling().temperature == 0.2
    send(qtbot, window, "Hello!")
    assert window.chat.bubbles[-1].text
