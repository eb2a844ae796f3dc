"""Rough edges from the walkthrough of issue 16 (the window on the fake engine): who wrote an
imported reply, a reply stopped while thinking, the welcome shown once, the Edit menu, what
About says leaves the machine, search results grouped by chat."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QTextCursor
from PySide6.QtWidgets import QApplication, QLabel, QMenu
from pytestqt.qtbot import QtBot

from inglenook.ui.history.search_dialog import LIMIT, SearchDialog
from inglenook.ui.main_window import MainWindow
from inglenook.ui.window.help import AboutDialog
from tests.gui.conftest import Script, chat, start_reply, wait_reply
from tests.gui.test_reasoning_window import window_with
from tests.gui.test_trust import window_from_disk
from tests.templates import QWEN3


def imported(win: MainWindow, model: str | None) -> int:
    """A conversation as `inglenook conversations import` brings it in: the reply's provenance
    names `model`, or nothing at all."""
    provenance = {"model": {"name": model}} if model else {}
    return win.store.import_json({
        "format": "inglenook.conversation", "version": 1, "title": "From elsewhere",
        "messages": [
            {"id": 1, "parent": None, "role": "user", "content": "Hi", "status": "complete"},
            {"id": 2, "parent": 1, "role": "assistant", "content": "Hello", "status": "complete",
             "provenance": provenance}]})


def test_an_imported_reply_is_not_credited_to_the_model_loaded_now(
        qtbot: QtBot, window: MainWindow) -> None:
    loaded = window.models.model
    assert loaded is not None
    for model, shown in ((None, "Assistant"), ("gpt-4o", "gpt-4o")):
        window.chats.open(imported(window, model))
        reply = window.chat.bubbles[-1]
        assert reply.author.text() == shown != loaded.name


@pytest.mark.parametrize("ending", ["stopped", "length"])
def test_a_reply_that_ends_while_thinking_says_so(
        qtbot: QtBot, script: Script, tmp_path: Path, ending: str) -> None:
    """Stopped (or at its 48-token limit) before the answer began: not "Thought for 2 s" over
    an empty answer, as it ends and when the chat is opened again."""
    win = window_with(qtbot, script, tmp_path, QWEN3)
    script.write(default={"pieces": ["<think>\n", *(f"step {n}. " for n in range(200))],
                          "token_ms": 50 if ending == "stopped" else 1})
    with qtbot.waitSignal(win.reply_finished, timeout=20_000):
        start_reply(qtbot, win, "2+2?")
        bubble = win.chat.bubbles[-1]
        if ending == "stopped":
            qtbot.waitUntil(lambda: "step 2." in bubble.reasoning.text, timeout=20_000)
            win.chats.stop()
    for shown in (bubble, None):
        if shown is None:
            conv = win.chats.session.conv_id
            win.chats.new_chat()
            win.chats.open(conv)
            shown = win.chat.bubbles[-1]
        header = shown.reasoning.header.text()
        assert header.startswith("Stopped while thinking") and "Thought" not in header
        assert "no answer was written" in shown.notice.text() and shown.text == ""
        assert ("length limit" in shown.notice.text()) == (ending == "length")
    win.close()


def menu_of(win: MainWindow, title: str) -> QMenu:
    return next(a.menu() for a in win.menuBar().actions() if a.text() == title)


def test_the_edit_menu_edits_the_focused_widget(qtbot: QtBot, window: MainWindow) -> None:
    edit_menu = menu_of(window, "&Edit")
    texts = [a.text() for a in edit_menu.actions() if not a.isSeparator()]
    assert texts[:6] == ["Undo", "Redo", "Cut", "Copy", "Paste", "Select all"]
    act = window.command_actions
    box = window.composer.edit
    window.activateWindow()
    box.setFocus()
    qtbot.waitUntil(lambda: QApplication.focusWidget() is box)
    box.setPlainText("")
    qtbot.keyClicks(box, "hello")
    edit_menu.aboutToShow.emit()  # as it opens: what the message box can do now
    assert act["undo"].isEnabled() and not act["copy"].isEnabled()
    edit_menu.aboutToHide.emit()
    act["selectAll"].trigger()
    act["copy"].trigger()
    assert QApplication.clipboard().text() == "hello"
    act["cut"].trigger()
    assert box.toPlainText() == ""
    act["undo"].trigger()
    assert box.toPlainText() == "hello"
    box.moveCursor(QTextCursor.MoveOperation.End)
    act["paste"].trigger()
    assert box.toPlainText() == "hellohello"
    chat(qtbot, window, "Say something")  # a reply: read-only text that can be copied
    reply = window.chat.bubbles[-1].body
    reply.setFocus()
    qtbot.waitUntil(lambda: QApplication.focusWidget() is reply)
    edit_menu.aboutToShow.emit()
    assert not act["paste"].isEnabled() and not act["undo"].isEnabled()
    edit_menu.aboutToHide.emit()
    act["selectAll"].trigger()
    act["copy"].trigger()
    assert QApplication.clipboard().text() == window.chat.bubbles[-1].text


def test_the_welcome_is_shown_once(qtbot: QtBot, script: Script, tmp_path: Path) -> None:
    """At the first start, whether or not "Got it" was pressed; not at the next."""
    first = window_from_disk(qtbot, script, tmp_path / "one.log")
    qtbot.waitUntil(lambda: first.models.model is not None, timeout=60_000)
    assert not first.chat.empty.welcome.isHidden()
    first.close()
    second = window_from_disk(qtbot, script, tmp_path / "two.log")
    qtbot.waitUntil(lambda: second.models.model is not None, timeout=60_000)
    assert second.chat.empty.welcome.isHidden()
    second.close()


def test_about_says_what_can_leave_the_machine(qtbot: QtBot) -> None:
    about = AboutDialog(False)
    qtbot.addWidget(about)
    text = about.findChild(QLabel, "aboutBlurb").text()
    for what in ("downloads", "Remote engines", "Tool servers", "API server"):
        assert what in text, what
    assert "Nothing leaves" not in text


def test_search_groups_matches_by_chat_and_says_when_there_are_more(
        qtbot: QtBot, window: MainWindow) -> None:
    store = window.store
    for c in range(3):
        conv = store.create_conversation(f"Chat {c}")
        parent = None
        for n in range(30):  # 90 matches in all: more than are shown
            parent = store.add_message(conv, "user", f"walrus number {n}", parent)
    dialog = SearchDialog(store, window)
    qtbot.addWidget(dialog)
    dialog.query.setText("walrus")
    dialog.run_query()
    shown = [dialog.results.item(i).data(Qt.ItemDataRole.UserRole)
             for i in range(dialog.results.count())]
    assert len(shown) == LIMIT and "there are more" in dialog.status.text()
    assert not dialog.status.text().startswith(f"{LIMIT} matches")
    chats = [conv for conv, _ in shown]
    assert chats == sorted(chats, key=chats.index)  # each chat's matches together
    titles = [dialog.results.itemWidget(dialog.results.item(i)).text()
              for i in range(dialog.results.count())]
    assert sum("Chat " in t for t in titles) == len(set(chats))  # its title once, above them
    dialog.query.setText("walrus number 7")  # fewer: the count, no "more"
    dialog.run_query()
    assert dialog.status.text() == "3 matches in 3 chats"


def test_the_meter_and_tok_s_move_while_a_reply_streams(
        qtbot: QtBot, window: MainWindow, script: Script) -> None:
    """The engine counts once, at the end: until then both are estimated from the text so far
    (marked ≈) and move with it; the exact figures replace them."""
    script.write(default={"pieces": [f"word{n} " for n in range(60)], "token_ms": 40})
    chat(qtbot, window, "Hello")  # a first reply: the meter is exact from here
    meter = window.context_label
    before = meter.text()
    assert "≈" not in before
    script.write(default={"pieces": [f"word{n} " for n in range(120)], "token_ms": 40})
    start_reply(qtbot, window, "Tell me more")
    bubble = window.chat.bubbles[-1]
    readings = []

    def moved() -> bool:
        readings.append(meter.text())
        return len(set(readings)) >= 3 and "tok/s" in bubble.stats_label.text()

    qtbot.waitUntil(moved, timeout=20_000)
    assert window.chats.session.reply is not None  # still streaming
    assert all("≈" in r for r in readings if r != before) and "≈" in bubble.stats_label.text()
    wait_reply(qtbot, window)
    assert "≈" not in meter.text() and "≈" not in bubble.stats_label.text()
    assert "tok/s" in bubble.stats_label.text()
