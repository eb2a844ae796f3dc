"""The window: send, stream, stop, regenerate, settings, crashes (fake engine unless it is
llama.cpp's behaviour that is under test: `real_window`)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDoubleSpinBox, QSpinBox
from pytestqt.qtbot import QtBot

from inglenook.ui.main_window import MainWindow
from tests.gui.conftest import (
    LOAD_TIMEOUT_MS,
    REPLY_TIMEOUT_MS,
    Script,
    start_reply,
    wait_reply,
)

send = start_reply


def test_bundled_model_is_listed_and_loaded(window: MainWindow) -> None:
    assert "bundled" in window.picker.itemText(0)
    assert window.models.model is not None and "SmolLM2" in window.models.model.name
    assert "SmolLM2" in window.model_label.text()
    assert "/ 2,048" in window.context_label.text()


def test_send_streams_a_reply_into_a_bubble(qtbot: QtBot, real_window: MainWindow) -> None:
    window = real_window
    send(qtbot, window, "What is the capital of France?")
    assert window.composer.button.text() == "Stop"
    qtbot.waitUntil(lambda: len(window.chat.bubbles) == 2 and bool(window.chat.bubbles[1].text),
                    timeout=REPLY_TIMEOUT_MS)
    wait_reply(qtbot, window)
    user, reply = window.chat.bubbles
    assert user.text == "What is the capital of France?"
    assert "Paris" in reply.text
    assert "tok/s" in reply.stats_label.text() and "TTFT" in reply.stats_label.toolTip()
    assert window.composer.button.text() == "Send"
    assert [m.role for m in window.chats.session.turns()] == ["user", "assistant"]
    assert window.composer.edit.toPlainText() == ""


def test_shift_enter_is_a_newline(qtbot: QtBot, window: MainWindow) -> None:
    window.composer.edit.setPlainText("line one")
    window.composer.edit.moveCursor(window.composer.edit.textCursor().MoveOperation.End)
    qtbot.keyClick(window.composer.edit, Qt.Key.Key_Return, Qt.KeyboardModifier.ShiftModifier)
    assert window.composer.edit.toPlainText() == "line one\n"
    assert not window.chat.bubbles


def test_follow_up_uses_the_conversation(qtbot: QtBot, real_window: MainWindow) -> None:
    window = real_window
    send(qtbot, window, "What is the capital of France?")
    wait_reply(qtbot, window)
    send(qtbot, window, "And what is the capital of Germany?")
    wait_reply(qtbot, window)
    request = window.chats.last_request
    assert request is not None
    assert [m.role for m in request.messages] == ["system", "user", "assistant", "user"]
    assert "cached" in window.chat.bubbles[-1].stats_label.toolTip()


def test_escape_stops_and_keeps_the_partial_reply(
        qtbot: QtBot, window: MainWindow, script: Script) -> None:
    script.write(default={"text": "Once upon a time " * 200, "token_ms": 5})
    send(qtbot, window, "Write a long story about a dragon who bakes bread.")
    qtbot.waitUntil(lambda: len(window.chat.bubbles[-1].text) > 30, timeout=REPLY_TIMEOUT_MS)
    with qtbot.waitSignal(window.reply_finished, timeout=REPLY_TIMEOUT_MS) as blocker:
        qtbot.keyClick(window.composer.edit, Qt.Key.Key_Escape)
    assert blocker.args[1].reason == "cancelled"
    reply = window.chat.bubbles[-1]
    assert reply.text and window.chats.session.turns()[-1].content == reply.text
    assert reply.notice.isVisible() and "Stopped" in reply.notice.text()


def test_the_status_line_clears_once_the_reply_writes(
        qtbot: QtBot, window: MainWindow, script: Script) -> None:
    script.write(default={"text": "Once upon a time " * 100, "token_ms": 5})
    send(qtbot, window, "Tell me a story.")
    qtbot.waitUntil(lambda: bool(window.chat.bubbles[-1].text), timeout=REPLY_TIMEOUT_MS)
    assert window.chats.session.reply is not None  # still writing
    assert window.status_bar.reply.text.text() == ""  # not "Thinking…" under text already there
    window.chats.stop()
    wait_reply(qtbot, window)


def test_regenerate_replaces_the_last_reply(qtbot: QtBot, window: MainWindow) -> None:
    send(qtbot, window, "Name a colour.")
    wait_reply(qtbot, window)
    first = window.chat.bubbles[-1].text
    with qtbot.waitSignal(window.reply_started, timeout=REPLY_TIMEOUT_MS):
        qtbot.mouseClick(window.chat.bubbles[-1].regenerate_button, Qt.MouseButton.LeftButton)
    wait_reply(qtbot, window)
    assert len(window.chat.bubbles) == 2
    assert [m.role for m in window.chats.session.turns()] == ["user", "assistant"]
    assert window.chat.bubbles[-1].text == first  # greedy: the same reply again


def test_side_panel_changes_reach_the_request(qtbot: QtBot, window: MainWindow) -> None:
    window.panel.findChild(QDoubleSpinBox, "temperature_spin").setValue(1.3)
    window.panel.findChild(QSpinBox, "top_k_spin").setValue(7)
    window.panel.findChild(QSpinBox, "max_tokens_spin").setValue(16)
    send(qtbot, window, "Hello!")
    wait_reply(qtbot, window)
    sampling = window.chats.last_request.sampling
    assert (sampling.temperature, sampling.top_k, sampling.max_tokens) == (1.3, 7, 16)
    assert window.chat.bubbles[-1].stats_label.text().startswith(
        tuple(f"{n} tokens" for n in range(1, 17)))


def test_killed_engine_leaves_the_window_up_and_the_chat_intact(
        qtbot: QtBot, window: MainWindow, script: Script) -> None:
    script.write(default={"text": "Once upon a time " * 200, "token_ms": 5})
    send(qtbot, window, "Write a long story about a dragon who bakes bread.")
    qtbot.waitUntil(lambda: bool(window.chat.bubbles[-1].text), timeout=REPLY_TIMEOUT_MS)
    with qtbot.waitSignal(window.engine_lost, timeout=REPLY_TIMEOUT_MS):
        window.worker.client.kill()
    wait_reply(qtbot, window)
    assert window.banner.isVisible() and "stopped unexpectedly" in window.banner.text()
    assert window.banner.action_button.isVisible()
    assert window.chat.bubbles[0].text.startswith("Write a long story")
    assert window.chat.bubbles[1].text  # what was streamed stays
    assert not window.composer.button.isEnabled()
    qtbot.mouseClick(window.banner.action_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: window.models.model is not None, timeout=LOAD_TIMEOUT_MS)
    assert not window.banner.isVisible()
    send(qtbot, window, "Hello again.")
    wait_reply(qtbot, window)
    assert len(window.chat.bubbles) == 4


def test_new_chat_clears_the_conversation(qtbot: QtBot, window: MainWindow) -> None:
    send(qtbot, window, "Hi")
    wait_reply(qtbot, window)
    qtbot.mouseClick(window.new_chat_button, Qt.MouseButton.LeftButton)
    assert not window.chat.bubbles and not window.chats.session.turns()


def test_new_chat_while_a_reply_streams_leaves_the_old_reply_running(
        qtbot: QtBot, window: MainWindow, script: Script) -> None:
    story_text = " ".join(f"Word{i}" for i in range(40))  # under the 48-token limit
    script.write([{"match": "dragon", "text": story_text, "token_ms": 10}])
    send(qtbot, window, "Write a long story about a dragon who bakes bread.")
    story = window.chats.session
    qtbot.waitUntil(lambda: bool(window.chat.bubbles[-1].text), timeout=REPLY_TIMEOUT_MS)
    qtbot.mouseClick(window.new_chat_button, Qt.MouseButton.LeftButton)
    assert window.composer.button.text() == "Send" and window.composer.button.isEnabled()
    assert story.reply is not None  # still being written
    send(qtbot, window, "Hi")
    wait_reply(qtbot, window)
    assert [m.role for m in window.chats.last_request.messages] == ["system", "user"]
    assert [m.role for m in window.chats.session.turns()] == ["user", "assistant"]
    assert len(window.chat.bubbles) == 2
    qtbot.waitUntil(lambda: story.reply is None, timeout=REPLY_TIMEOUT_MS)
    assert story.path[-1].content == story_text  # written to the end, not cut
    assert story.path[-1].provenance.finish == "stop"


def test_a_failed_reply_does_not_break_the_next_message(
        qtbot: QtBot, real_window: MainWindow) -> None:
    window = real_window
    # ~1,800 digits: the window's estimate (4 characters a token) lets it through, but each
    # digit is a token of its own, so the engine finds it does not fit the 2,048-token context.
    send(qtbot, window, " ".join(str(i % 10) for i in range(1800)))
    wait_reply(qtbot, window)
    failed = window.chat.bubbles[-1]
    assert failed.notice.isVisible() and "context" in failed.notice.text()
    send(qtbot, window, "Hello!")
    wait_reply(qtbot, window)
    assert [m.role for m in window.chats.last_request.messages] == ["system", "user"]
    assert window.chat.bubbles[-1].text


def test_models_button_opens_the_models_dialog(qtbot: QtBot, window: MainWindow) -> None:
    qtbot.mouseClick(window.models_button, Qt.MouseButton.LeftButton)
    dialog = window.models._dialog
    assert dialog is not None and dialog.isVisible()
    dialog.close()
    qtbot.mouseClick(window.models_button, Qt.MouseButton.LeftButton)
    assert window.models._dialog is dialog and dialog.isVisible()  # one instance
    dialog.close()
