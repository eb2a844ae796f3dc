"""Deleted chats deleted for good (chat/forget.py, store/purge.py): their rows, their images'
cache files (not those another chat still holds), and their words, which are neither left in
the database's free pages nor in the search index."""

from __future__ import annotations

import base64
import sqlite3
import time
from pathlib import Path

from inglenook import paths
from inglenook.chat import forget, images
from inglenook.core.attachments import Attachment
from inglenook.server.schemas import parse_chat
from inglenook.store import Store
from tests.unit.core.test_images import png_bytes

SECRET = "Xylophonist quokka zeppelin 7319"


def image(color: tuple[int, int, int]) -> Attachment:
    data = png_bytes((8, 8), "RGB", color)
    return Attachment("photo.png", "image", len(data), mime="image/png", data=data)


def counts(database: Path) -> tuple[int, int, int]:
    conn = sqlite3.connect(database)
    try:
        return tuple(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
                     for table in ("conversations", "messages", "attachments"))  # type: ignore[return-value]
    finally:
        conn.close()


def file_bytes(database: Path) -> bytes:
    return b"".join(p.read_bytes() for p in (database, database.with_name(database.name + "-wal"))
                    if p.exists())


def test_a_purged_chat_leaves_no_rows_no_words_and_no_image_files() -> None:
    mine, shared = image((200, 10, 10)), image((10, 200, 10))
    with Store() as store:
        database = store.path
        gone = store.create_conversation("Quokka plans")
        question = store.add_message(gone, "user", f"{SECRET} " * 40, None,
                                     attachments=[mine, shared])
        store.add_message(gone, "assistant", f"Noted: {SECRET}", question)
        kept = store.create_conversation("Other")
        store.add_message(kept, "user", "the same picture", None, attachments=[shared])
        mine_file = Path(images.image_ref(mine).path)
        shared_file = Path(images.image_ref(shared).path)
        store.delete(gone)
        undone = store.create_conversation("Brought back")
        store.delete(undone)
        store.undelete(undone)  # Undo before the purge: left alone
        assert forget.purge_for_good(database, [gone, undone]) == forget.Purged(1, 1)
        assert [c.id for c in store.conversations(include_deleted=True)] == [undone, kept]
        assert store.search("quokka") == []
    assert counts(database) == (2, 1, 1)
    assert not mine_file.exists() and shared_file.exists()  # the other chat still shows it
    raw = file_bytes(database)
    # Neither the text (free pages are zeroed) nor the index's words (merged) are left.
    for word in (SECRET, "xylophonist", "quokka", "zeppelin"):
        assert word.encode() not in raw, word
    assert mine.data not in raw and shared.data in raw


def test_at_start_only_chats_deleted_before_it_are_purged() -> None:
    with Store() as store:
        database = store.path
        old = store.create_conversation("old")
        store.add_message(old, "user", "hello", None, attachments=[image((1, 2, 3))])
        store.delete(old)
        started = time.time()
        now = store.create_conversation("deleted after the start: Undo may be offered")
        store.delete(now)
        store._conn.execute("UPDATE conversations SET deleted_at = ? WHERE id = ?",
                            (started + 60, now))
    assert forget.tidy_at_start(database, None) == forget.Purged(0, 0)  # not alone: none
    assert counts(database)[0] == 2
    assert forget.tidy_at_start(database, started).conversations == 1
    with Store() as store:
        assert [c.id for c in store.conversations(include_deleted=True)] == [now]
    assert not any(paths.image_cache_dir().iterdir())


def test_a_purge_leaves_the_image_an_api_request_is_sending() -> None:
    """The API server's images have no message to hold them: a chat purged while a request
    sends the same picture must not take the request's file (the engine reads it later)."""
    photo = image((90, 30, 160))
    with Store() as store:
        database = store.path
        gone = store.create_conversation("Photo")
        store.add_message(gone, "user", "look", None, attachments=[photo])
        chat_file = Path(images.image_ref(photo).path)
        call = parse_chat({"model": "", "messages": [{"role": "user", "content": [
            {"type": "image_url", "image_url": {
                "url": "data:image/png;base64," + base64.b64encode(photo.data).decode()}}]}]})
        (sent,) = call.messages[0].images
        store.delete(gone)
        assert forget.purge_for_good(database, [gone]) == forget.Purged(1, 1)
    assert not chat_file.exists()  # the chat's own: at once, whatever its age
    assert Path(sent.path).read_bytes() == photo.data
