"""Conversations as sessions: each chat keeps its settings and its reply; switching chats
changes only what is on screen (fake engine with scripted replies)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDoubleSpinBox, QLineEdit, QPlainTextEdit
from pytestqt.qtbot import QtBot

from inglenook.store import Store
from inglenook.ui.main_window import MainWindow
from tests.gui.conftest import (
    REPLY_TIMEOUT_MS,
    Script,
    chat,
    fake_worker,
    open_window,
    start_reply,
    wait_reply,
)

SLOW = {"match": "story", "text": " ".join(f"w{i}" for i in range(40)), "token_ms": 40}


def new_chat(qtbot: QtBot, window: MainWindow) -> None:
    qtbot.mouseClick(window.new_chat_button, Qt.MouseButton.LeftButton)


def test_custom_settings_stay_with_their_chat_across_switches_and_restarts(
        qtbot: QtBot, window: MainWindow, script: Script, tmp_path) -> None:
    prompt = "You answer like a lighthouse keeper."
    window.panel.findChild(QPlainTextEdit, "system_prompt_edit").setPlainText(prompt)
    window.panel.findChild(QDoubleSpinBox, "temperature_spin").setValue(0.0)
    chat(qtbot, window, "Hello there.")
    custom = window.chats.conv_id
    assert window.preset_bar.combo.currentData() is None  # "Custom"

    new_chat(qtbot, window)
    window.side.apply_preset_named("Creative")
    chat(qtbot, window, "Another chat.")
    assert window.panel.sampling().temperature == 1.0

    window.chats.open(custom)
    assert window.panel.system_prompt() == prompt
    assert window.panel.sampling().temperature == 0.0
    assert window.preset_bar.combo.currentData() is None
    chat(qtbot, window, "And again.")
    sent = window.chats.last_request
    assert sent.messages[0].content == prompt and sent.sampling.temperature == 0.0
    window.close()

    again = open_window(qtbot, fake_worker(script, tmp_path / "engine2.log"))
    again.chats.open(custom)
    assert again.panel.system_prompt() == prompt
    assert again.panel.sampling().temperature == 0.0
    again.close()


def test_a_reply_keeps_streaming_while_another_chat_is_on_screen(
        qtbot: QtBot, window: MainWindow, script: Script) -> None:
    chat(qtbot, window, "Something short first.")
    other = window.chats.conv_id
    new_chat(qtbot, window)
    script.write([SLOW])
    start_reply(qtbot, window, "Tell me a story.")
    story = window.chats.conv_id
    qtbot.waitUntil(lambda: window.sidebar.activity(story) == "generating",
                    timeout=REPLY_TIMEOUT_MS)
    window.chats.open(other)  # through the sidebar's own signal path
    assert window.sidebar.activity(story) == "generating"
    assert window.composer.button.text() == "Send"
    session = window.chats.sessions.find(story)
    assert session is not None and session.reply is not None
    qtbot.waitUntil(lambda: session.reply is not None and len(session.reply.text) > 20,
                    timeout=REPLY_TIMEOUT_MS)
    window.chats.open(story)  # back: what was written meanwhile is on screen
    assert window.chat.bubbles[-1].text.startswith("w0 w1")
    assert window.composer.button.text() == "Stop"
    wait_reply(qtbot, window)
    assert window.chat.bubbles[-1].text == SLOW["text"]
    # The engine's queue reports the job's end just after the reply's last event.
    qtbot.waitUntil(lambda: window.sidebar.activity(story) == "", timeout=REPLY_TIMEOUT_MS)


def test_switching_away_before_the_first_token_leaves_no_empty_reply(
        qtbot: QtBot, window: MainWindow, script: Script) -> None:
    chat(qtbot, window, "First chat.")
    first = window.chats.conv_id
    new_chat(qtbot, window)
    script.write([{"match": "story", "text": "Late but complete.", "token_ms": 300}])
    start_reply(qtbot, window, "A story, please.")
    story = window.chats.conv_id
    window.chats.open(first)
    session = window.chats.sessions.find(story)
    qtbot.waitUntil(lambda: session.reply is None, timeout=REPLY_TIMEOUT_MS)
    window.chats.open(story)
    assert window.chat.bubbles[-1].text == "Late but complete."
    assert not window.chat.bubbles[-1].notice.isVisible()


def test_a_second_chat_waits_its_turn_visibly_and_either_can_be_stopped(
        qtbot: QtBot, window: MainWindow, script: Script) -> None:
    script.write([SLOW])
    start_reply(qtbot, window, "A long story.")
    first = window.chats.conv_id
    first_title = window.chats.session.title
    qtbot.waitUntil(lambda: bool(window.chat.bubbles[-1].text), timeout=REPLY_TIMEOUT_MS)
    new_chat(qtbot, window)
    start_reply(qtbot, window, "Name a colour.")
    second = window.chats.conv_id
    qtbot.waitUntil(lambda: window.queue_notice.isVisible(), timeout=REPLY_TIMEOUT_MS)
    assert f"«{first_title}»" in window.queue_notice.label.text()
    assert window.sidebar.activity(second) == "waiting"
    assert window.composer.button.text() == "Stop"

    with qtbot.waitSignal(window.reply_finished, timeout=REPLY_TIMEOUT_MS) as stopped:
        qtbot.mouseClick(window.queue_notice.stop_other_button, Qt.MouseButton.LeftButton)
    assert stopped.args[1].reason == "cancelled"
    wait_reply(qtbot, window)  # the waiting reply runs as soon as the engine is free
    assert window.chat.bubbles[-1].text == "Echo: Name a colour."
    assert not window.queue_notice.isVisible()
    window.chats.open(first)
    reply = window.chat.bubbles[-1]
    assert reply.text.startswith("w0") and reply.text != SLOW["text"]
    assert "Stopped" in reply.notice.text()  # never cut silently
    qtbot.waitUntil(reply.notice.isVisible, timeout=REPLY_TIMEOUT_MS)


def test_cancelling_a_waiting_reply_never_runs_it(
        qtbot: QtBot, window: MainWindow, script: Script) -> None:
    script.write([SLOW])
    start_reply(qtbot, window, "A long story.")
    new_chat(qtbot, window)
    start_reply(qtbot, window, "Name a colour.")
    qtbot.waitUntil(lambda: window.queue_notice.isVisible(), timeout=REPLY_TIMEOUT_MS)
    with qtbot.waitSignal(window.reply_finished, timeout=REPLY_TIMEOUT_MS) as cancelled:
        qtbot.mouseClick(window.queue_notice.stop_own_button, Qt.MouseButton.LeftButton)
    assert cancelled.args[1].reason == "cancelled"
    assert window.chats.session.reply is None and not window.queue_notice.isVisible()
    reply = window.chat.bubbles[-1]
    assert reply.text == "" and "Cancelled before it started" in reply.notice.text()
    assert window.composer.button.text() == "Send"


def test_closing_the_window_mid_reply_keeps_what_was_written(
        qtbot: QtBot, window: MainWindow, script: Script) -> None:
    script.write([SLOW])
    start_reply(qtbot, window, "A long story.")
    conv = window.chats.conv_id
    qtbot.waitUntil(lambda: len(window.chat.bubbles[-1].text) > 10, timeout=REPLY_TIMEOUT_MS)
    shown = window.chat.bubbles[-1].text
    window.close()
    with Store() as store:
        last = store.active_path(conv)[-1]
    assert last.content.startswith(shown) and last.status == "complete"
    assert last.provenance.finish == "cancelled" and "closed" in last.provenance.error


def test_deleting_a_chat_stops_its_reply(
        qtbot: QtBot, window: MainWindow, script: Script) -> None:
    script.write([SLOW])
    start_reply(qtbot, window, "A long story.")
    conv = window.chats.conv_id
    with qtbot.waitSignal(window.reply_finished, timeout=REPLY_TIMEOUT_MS) as finished:
        window.history.delete(conv)
    assert finished.args[1].reason == "cancelled"
    assert window.chats.conv_id is None and not window.chat.bubbles


def test_keys_step_through_conversations_in_sidebar_order(
        qtbot: QtBot, window: MainWindow) -> None:
    for text in ("First.", "Second.", "Third."):
        new_chat(qtbot, window)
        chat(qtbot, window, text)
    order = window.sidebar.order()  # newest first
    assert window.chats.conv_id == order[0]
    qtbot.keyClick(window.composer.edit, Qt.Key.Key_PageDown, Qt.KeyboardModifier.ControlModifier)
    assert window.chats.conv_id == order[1]
    qtbot.keyClick(window.composer.edit, Qt.Key.Key_Down, Qt.KeyboardModifier.AltModifier)
    assert window.chats.conv_id == order[2]
    qtbot.keyClick(window.composer.edit, Qt.Key.Key_Down, Qt.KeyboardModifier.AltModifier)
    assert window.chats.conv_id == order[2]  # the last stays the last
    qtbot.keyClick(window.composer.edit, Qt.Key.Key_PageUp, Qt.KeyboardModifier.ControlModifier)
    qtbot.keyClick(window.composer.edit, Qt.Key.Key_Up, Qt.KeyboardModifier.AltModifier)
    assert window.chats.conv_id == order[0]
    assert window.chat.bubbles[0].text == "Third."


def test_the_context_meter_follows_the_chat_on_screen(
        qtbot: QtBot, window: MainWindow, script: Script) -> None:
    script.write(default={"text": " ".join(["word"] * 40), "token_ms": 0})
    chat(qtbot, window, "A question with quite a few words in it, to count.")
    long_chat, long_meter = window.chats.conv_id, window.context_label.text()
    new_chat(qtbot, window)
    assert window.context_label.text() != long_meter
    chat(qtbot, window, "Hi")
    short_meter = window.context_label.text()
    assert short_meter != long_meter
    window.chats.open(long_chat)
    assert window.context_label.text() == long_meter


def test_escape_stops_the_reply_from_anywhere_in_the_window(
        qtbot: QtBot, window: MainWindow, script: Script) -> None:
    script.write([SLOW])
    start_reply(qtbot, window, "A long story.")
    qtbot.waitUntil(lambda: bool(window.chat.bubbles[-1].text), timeout=REPLY_TIMEOUT_MS)
    window.sidebar.list.setFocus()
    with qtbot.waitSignal(window.reply_finished, timeout=REPLY_TIMEOUT_MS) as stopped:
        qtbot.keyClick(window.sidebar.list, Qt.Key.Key_Escape)
    assert stopped.args[1].reason == "cancelled"


def test_a_conversation_is_renamed_in_place(qtbot: QtBot, window: MainWindow) -> None:
    chat(qtbot, window, "Original title.")
    conv = window.chats.conv_id
    # As a user's: the window active. An editor in a list is committed and closed when its
    # window stops being active (Qt's delegate), as when a window of an earlier test is.
    window.activateWindow()
    qtbot.waitUntil(window.isActiveWindow)
    window.sidebar.ask_rename(conv)
    editor = window.sidebar.list.findChild(QLineEdit)
    assert editor is not None and editor.text() == "Original title."
    # A reply's activity mark and a list refresh arriving meanwhile do not end the rename.
    window.sidebar.set_activity({conv: "generating"})
    window.history.refresh()
    assert window.sidebar.list.findChild(QLineEdit) is editor
    editor.setText("Renamed in place")
    assert editor.isVisible() and window.isActiveWindow(), "the editor closed before Enter"
    qtbot.keyClick(editor, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: window.store.conversation(conv).title == "Renamed in place",
                    timeout=REPLY_TIMEOUT_MS)
    window.sidebar.ask_rename(conv)
    editor = window.sidebar.list.findChild(QLineEdit)
    editor.setText("Not kept")
    qtbot.keyClick(editor, Qt.Key.Key_Escape)
    qtbot.waitUntil(lambda: window.sidebar._renaming is None, timeout=REPLY_TIMEOUT_MS)
    items = [window.sidebar.list.item(r).text() for r in range(window.sidebar.list.count())]
    assert "Renamed in place" in items and "Not kept" not in items
    assert window.store.conversation(conv).title == "Renamed in place"
