"""Rough edges from the walkthrough of issue 16 (the window on the fake engine): who wrote an
imported reply, a reply stopped while thinking, the welcome shown once, the Edit menu, what
About says leaves the machine, search results grouped by chat."""

from __future__ import annotations

from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from inglenook.ui.main_window import MainWindow
from tests.gui.conftest import Script, start_reply
from tests.gui.test_reasoning_window import window_with
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
