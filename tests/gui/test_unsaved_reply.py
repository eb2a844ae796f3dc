"""A reply that ends while the store refuses it (the disk is full) is kept, the banner says it is
not saved yet, and it is written once the store takes it: on the window's beat, or when the
window closes. The store's write fails on purpose here (tests/unit/chat/test_session_unsaved.py
fills a real disk)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from inglenook import paths
from inglenook.store import Store, StoreError
from inglenook.ui.main_window import MainWindow
from tests.gui.conftest import Script, chat, fake_worker, open_window


class FullDisk:
    """The store's message writes fail while `full`."""

    def __init__(self, win: MainWindow, monkeypatch: pytest.MonkeyPatch) -> None:
        self.full = True
        real = win.store.update_message

        def update_message(*args: object, **kwargs: object) -> None:
            if self.full:
                raise StoreError("The disk is full: the last change could not be saved.",
                                 "full")
            real(*args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(win.store, "update_message", update_message)


def last_reply(conv: int) -> tuple[str, str]:
    with Store(paths.database_file()) as store:
        last = store.active_path(conv)[-1]
        return last.content, last.status


def test_a_reply_ended_on_a_full_disk_is_saved_when_the_window_closes(
        qtbot: QtBot, script: Script, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    win = open_window(qtbot, fake_worker(script, tmp_path / "engine.log"))
    disk = FullDisk(win, monkeypatch)
    chat(qtbot, win, "Hello there")
    assert win.banner.text().startswith("The reply in «Hello there» is not saved yet: The disk "
                                        "is full")
    conv = win.chats.session.conv_id
    assert conv is not None and win.chats.session.unsaved is not None
    disk.full = False  # room again, and the user quits before the next try
    win.close()
    assert last_reply(conv) == ("Echo: Hello there", "complete")


def test_a_reply_ended_on_a_full_disk_is_saved_once_there_is_room(
        qtbot: QtBot, script: Script, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    win = open_window(qtbot, fake_worker(script, tmp_path / "engine.log"))
    try:
        disk = FullDisk(win, monkeypatch)
        chat(qtbot, win, "Hello there")
        assert "is not saved yet" in win.banner.text()
        disk.full = False
        qtbot.waitUntil(lambda: "is saved now" in win.banner.text(), timeout=30_000)
        assert win.banner.text() == "The reply in «Hello there» is saved now."
        conv = win.chats.session.conv_id
        assert conv is not None and win.chats.session.unsaved is None
        assert last_reply(conv) == ("Echo: Hello there", "complete")
        assert win.chat.bubbles[-1].text == "Echo: Hello there"
    finally:
        win.close()
