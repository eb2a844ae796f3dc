"""Deleting a chat in the window deletes it for good once Undo is no longer offered: Undo brings
it back while it is; closing the window purges it (rows, image bytes, the engine's image file);
a second deletion ends the first one's Undo and purges it; and a chat left deleted by an earlier
session (a crash) is purged when the window starts."""

from __future__ import annotations

import io
import sqlite3
from pathlib import Path

import pytest
from PIL import Image
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from inglenook import paths
from inglenook.chat import images
from inglenook.core.attachments import Attachment
from inglenook.store import Store, purge
from inglenook.ui import tasks
from inglenook.ui.main_window import MainWindow
from tests.gui.conftest import Script, fake_worker, open_window, wait_reply

TIMEOUT_MS = 10_000


def png(color: tuple[int, int, int]) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (40, 30), color).save(out, "PNG")
    return out.getvalue()


def rows(table: str) -> int:
    conn = sqlite3.connect(paths.database_file())
    try:
        return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
    finally:
        conn.close()


def test_a_deleted_chat_with_an_image_can_be_undone_then_is_gone_after_closing(
        qtbot: QtBot, script: Script, tmp_path: Path) -> None:
    script.write(default={"text": "Saw {images} images.", "token_ms": 1}, vision=16)
    window = open_window(qtbot, fake_worker(script, tmp_path / "engine.log"))
    photo = tmp_path / "photo.png"
    photo.write_bytes(png((200, 40, 40)))
    window.composer.attach_files([str(photo)])
    qtbot.waitUntil(lambda: len(window.composer.attachments) == 1, timeout=TIMEOUT_MS)
    window.composer.edit.setPlainText("What is this?")
    with qtbot.waitSignal(window.reply_started):
        qtbot.keyClick(window.composer.edit, Qt.Key.Key_Return)
    wait_reply(qtbot, window)
    request = window.chats.last_request
    assert request is not None
    (ref,) = request.messages[-1].images
    cached, conv_id = Path(ref.path), window.chats.conv_id
    assert cached.is_file() and conv_id is not None

    window.sidebar.delete_requested.emit(conv_id)  # the sidebar's Delete
    assert window.sidebar.order() == [] and "deleted" in window.banner.text()
    window.banner.action_button.click()  # Undo
    assert window.sidebar.order() == [conv_id]
    assert (rows("messages"), rows("attachments")) == (2, 1) and cached.is_file()

    window.sidebar.delete_requested.emit(conv_id)
    window.close()  # Undo is no longer offered: purged before the window is gone
    assert (rows("conversations"), rows("messages"), rows("attachments")) == (0, 0, 0)
    assert not cached.exists()

    again = open_window(qtbot, fake_worker(script, tmp_path / "engine2.log"))
    assert again.sidebar.order() == []
    again.close()
    assert rows("conversations") == 0 and not any(paths.image_cache_dir().iterdir())


def test_a_chat_left_deleted_by_a_crash_is_purged_at_start(
        qtbot: QtBot, script: Script, tmp_path: Path) -> None:
    data = png((10, 10, 200))
    picture = Attachment("p.png", "image", len(data), mime="image/png", data=data)
    with Store() as store:
        conv = store.create_conversation("Left deleted")
        store.add_message(conv, "user", "look", None, attachments=[picture])
        store.delete(conv)  # and the app was killed before it could purge it
    cached = Path(images.image_ref(picture).path)  # the file the engine was given
    assert cached.is_file()
    window = open_window(qtbot, fake_worker(script, tmp_path / "engine.log"))
    qtbot.waitUntil(lambda: rows("conversations") == 0, timeout=TIMEOUT_MS)
    qtbot.waitUntil(lambda: not cached.exists(), timeout=TIMEOUT_MS)
    assert (rows("messages"), rows("attachments")) == (0, 0)
    window.close()


def test_the_next_deletion_ends_the_first_ones_undo_and_purges_it(
        qtbot: QtBot, window: MainWindow, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first one's rows go at once; its words leave the search index when the window
    closes (the merge rewrites the whole index, holding every writer)."""
    scrubbed: list[int] = []
    real = purge.scrub
    monkeypatch.setattr(purge, "scrub", lambda conn: (scrubbed.append(1), real(conn)))
    first = window.store.create_conversation("first")
    window.store.add_message(first, "user", "one quetzalcoatlus", None)
    second = window.store.create_conversation("second")
    window.store.add_message(second, "user", "two", None)
    window.history.refresh()
    window.sidebar.delete_requested.emit(first)
    window.sidebar.delete_requested.emit(second)  # Undo now brings back the second only
    qtbot.waitUntil(lambda: rows("conversations") == 1, timeout=TIMEOUT_MS)
    window.banner.action_button.click()
    assert window.sidebar.order() == [second] and rows("messages") == 1
    assert tasks.join_writers() == [] and scrubbed == []  # the purge ended: no merge then
    database = paths.database_file()
    window.close()
    assert scrubbed == [1]
    raw = b"".join(p.read_bytes() for p in database.parent.glob(database.name + "*"))
    assert b"quetzalcoatlus" not in raw
