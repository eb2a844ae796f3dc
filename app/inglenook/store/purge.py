"""Deleting conversations for good: their rows, the words the search index kept of them, and the
images no other message holds (which the caller removes from the image cache).

Deleting a chat in the window only hides it (deleted_at) while Undo is offered; once Undo is no
longer offered, the chat is purged here. The database is opened with `secure_delete` on
(Store and purge both), so the freed pages are overwritten with zeros rather than left in the
file for anyone who reads it; the full-text indexes are merged afterwards (FTS5 keeps a deleted
row's words in its older segments until they are merged; SQLite 3.44's `secure-delete` option
would avoid that, but older SQLite could then no longer write the table), and the WAL is
checkpointed and truncated so that no earlier copy of the pages stays beside the database.
What this cannot reach: exports the user made, backups a migration left (`.bak-v<n>`), and copies
the file system or an SSD keeps of overwritten blocks.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterable

from inglenook.store import db

SECURE_DELETE = "PRAGMA secure_delete = ON"


def deleted_ids(conn: sqlite3.Connection, before: float | None = None) -> list[int]:
    """Conversations hidden by a delete (before `before`, a time.time(), when given)."""
    if before is None:
        rows = conn.execute("SELECT id FROM conversations WHERE deleted_at IS NOT NULL")
    else:
        rows = conn.execute("SELECT id FROM conversations WHERE deleted_at <= ?", (before,))
    return [row[0] for row in rows]


def purge(conn: sqlite3.Connection, conv_ids: Iterable[int]) -> tuple[list[int], list[str]]:
    """Remove these conversations if they are deleted (a chat brought back by Undo meanwhile is
    left alone), with their messages and attachments (ON DELETE CASCADE). Returns the ids
    removed and the sha256 of each image they held that no remaining message holds. Call it
    inside a transaction, on a connection with SECURE_DELETE."""
    wanted = json.dumps(sorted({int(i) for i in conv_ids}))
    ids = [row[0] for row in conn.execute(
        "SELECT id FROM conversations WHERE deleted_at IS NOT NULL "
        "AND id IN (SELECT value FROM json_each(?))", (wanted,))]
    if not ids:
        return [], []
    chosen = json.dumps(ids)
    # One image at a time (a chat of photos is large): is it held by a message that stays?
    released: set[str] = set()
    rows = conn.execute(
        "SELECT a.id FROM attachments a JOIN messages m ON m.id = a.message_id "
        "WHERE a.kind = 'image' AND a.data IS NOT NULL "
        "AND m.conversation_id IN (SELECT value FROM json_each(?))", (chosen,)).fetchall()
    for (attachment_id,) in rows:
        (data,) = conn.execute("SELECT data FROM attachments WHERE id = ?",
                               (attachment_id,)).fetchone()
        data = bytes(data)
        kept = conn.execute(
            "SELECT 1 FROM attachments a JOIN messages m ON m.id = a.message_id "
            "WHERE a.kind = 'image' AND length(a.data) = ? AND a.data = ? "
            "AND m.conversation_id NOT IN (SELECT value FROM json_each(?)) LIMIT 1",
            (len(data), data, chosen)).fetchone()
        if kept is None:
            released.add(hashlib.sha256(data).hexdigest())
    conn.execute("DELETE FROM conversations WHERE id IN (SELECT value FROM json_each(?))",
                 (chosen,))
    return ids, sorted(released)


def scrub(conn: sqlite3.Connection) -> None:
    """After a purge, outside a transaction: merge the search indexes (each into one segment,
    without the deleted rows' words) and truncate the WAL. The merge rewrites the index
    (~0.1 s per 10,000 messages) holding the write lock: chat/forget.py says when."""
    for table in ("messages_fts", "conversations_fts"):
        with db.transaction(conn):
            conn.execute(f"INSERT INTO {table} ({table}) VALUES ('optimize')")
    # A reader in the middle of a read blocks the truncation (the row's first value is 1, no
    # error); SQLite checkpoints and removes the WAL when the last connection closes anyway.
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
