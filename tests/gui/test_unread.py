"""A chat whose reply finished while another was on screen is marked unread in the list."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from inglenook.ui.main_window import MainWindow
from tests.gui.conftest import (
    REPLY_TIMEOUT_MS,
    Script,
    chat,
    fake_worker,
    open_window,
    start_reply,
)

SLOW = {"match": "story", "text": " ".join(f"w{i}" for i in range(20)), "token_ms": 20}


def item_of(window: MainWindow, conv_id: int):
    for row in range(window.sidebar.list.count()):
        item = window.sidebar.list.item(row)
        if item.data(Qt.ItemDataRole.UserRole) == conv_id:
            return item
    raise AssertionError(f"chat {conv_id} is not in the list")


def test_a_reply_finished_in_the_background_marks_its_chat_until_viewed(
        qtbot: QtBot, window: MainWindow, script: Script) -> None:
    chat(qtbot, window, "Something short first.")
    other = window.chats.conv_id
    assert other is not None and not window.sidebar.is_unread(other)  # seen as it came
    qtbot.mouseClick(window.new_chat_button, Qt.MouseButton.LeftButton)
    script.write([SLOW])
    start_reply(qtbot, window, "Tell me a story.")
    story = window.chats.conv_id
    assert story is not None
    window.chats.open(other)
    session = window.chats.sessions.find(story)
    assert session is not None
    qtbot.waitUntil(lambda: session.reply is None, timeout=REPLY_TIMEOUT_MS)
    assert window.sidebar.is_unread(story)
    # The list redraws the row when the reply's end reaches it ("Writing a reply…" until then).
    qtbot.waitUntil(lambda: "New reply" in item_of(window, story).toolTip(),
                    timeout=REPLY_TIMEOUT_MS)
    assert item_of(window, story).font().bold()
    window.chats.open(story)
    assert not window.sidebar.is_unread(story)
    assert not item_of(window, story).font().bold()


def test_the_unread_mark_is_kept_across_a_restart(
        qtbot: QtBot, window: MainWindow, script: Script, tmp_path: Path) -> None:
    chat(qtbot, window, "Something short first.")
    other = window.chats.conv_id
    qtbot.mouseClick(window.new_chat_button, Qt.MouseButton.LeftButton)
    script.write([SLOW])
    start_reply(qtbot, window, "Tell me a story.")
    story = window.chats.conv_id
    assert story is not None and other is not None
    window.chats.open(other)
    session = window.chats.sessions.find(story)
    assert session is not None
    qtbot.waitUntil(lambda: session.reply is None, timeout=REPLY_TIMEOUT_MS)
    assert window.sidebar.is_unread(story)
    window.close()

    again = open_window(qtbot, fake_worker(script, tmp_path / "engine2.log"))
    try:
        qtbot.waitUntil(lambda: again.sidebar.list.count() >= 2, timeout=REPLY_TIMEOUT_MS)
        assert again.sidebar.is_unread(story) and not again.sidebar.is_unread(other)
        qtbot.waitUntil(lambda: item_of(again, story).font().bold(), timeout=REPLY_TIMEOUT_MS)
        again.chats.open(story)  # opened: read, also for the next start
        assert not again.sidebar.is_unread(story)
        assert again.chats.store.unread_ids() == []
    finally:
        again.close()
