"""Rough edges from the walkthrough of issue 16 (the window on the fake engine): who wrote an
imported reply, a reply stopped while thinking, the welcome shown once, the Edit menu, what
About says leaves the machine, search results grouped by chat."""

from __future__ import annotations

from pytestqt.qtbot import QtBot

from inglenook.ui.main_window import MainWindow


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
