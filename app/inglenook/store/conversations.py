"""Conversations: the sidebar's rows. Functions take a connection; Store wraps transactions.

`updated_at` means "last new message": add_message bumps it (and creation sets it); renaming,
pinning, choosing a preset, editing or deleting messages do not reorder the sidebar.
"""

from __future__ import annotations

import sqlite3
import time

from inglenook.store import db
from inglenook.store.records import (
    ConversationSummary,
    dump_dict,
    load_dict,
    summary_from_row,
    text,
)

_SUMMARY = """
SELECT c.id, c.title, c.pinned, c.created_at, c.updated_at, c.preset,
       (SELECT count(*) FROM messages m WHERE m.conversation_id = c.id)
FROM conversations c
"""
# Served by the partial index conversations_sidebar, walked backwards: no sort, no N+1.
SIDEBAR_QUERY = (_SUMMARY + "WHERE c.deleted_at IS NULL "
                 "ORDER BY c.pinned DESC, c.updated_at DESC, c.id DESC")
_ALL_QUERY = _SUMMARY + "ORDER BY c.pinned DESC, c.updated_at DESC, c.id DESC"


def create(conn: sqlite3.Connection, title: str, preset: str | None) -> int:
    stamp = time.time()
    cursor = conn.execute(
        "INSERT INTO conversations (title, preset, created_at, updated_at) VALUES (?, ?, ?, ?)",
        (title, preset, stamp, stamp))
    return db.inserted_id(cursor)


def list_summaries(conn: sqlite3.Connection, include_deleted: bool) -> list[ConversationSummary]:
    rows = conn.execute(_ALL_QUERY if include_deleted else SIDEBAR_QUERY).fetchall()
    return [summary_from_row(r) for r in rows]


def get(conn: sqlite3.Connection, conv_id: int) -> ConversationSummary:
    row = conn.execute(_SUMMARY + "WHERE c.id = ?", (conv_id,)).fetchone()
    if row is None:
        raise KeyError(f"no conversation {conv_id}")
    return summary_from_row(row)


def require(conn: sqlite3.Connection, conv_id: int) -> None:
    if conn.execute("SELECT 1 FROM conversations WHERE id = ?", (conv_id,)).fetchone() is None:
        raise KeyError(f"no conversation {conv_id}")


def _set(conn: sqlite3.Connection, conv_id: int, column: str, value: object) -> None:
    cursor = conn.execute(f"UPDATE conversations SET {column} = ? WHERE id = ?", (value, conv_id))
    if cursor.rowcount == 0:
        raise KeyError(f"no conversation {conv_id}")


def rename(conn: sqlite3.Connection, conv_id: int, title: str) -> None:
    _set(conn, conv_id, "title", title)


def set_pinned(conn: sqlite3.Connection, conv_id: int, pinned: bool) -> None:
    _set(conn, conv_id, "pinned", int(bool(pinned)))


def set_preset(conn: sqlite3.Connection, conv_id: int, name: str | None) -> None:
    _set(conn, conv_id, "preset", name)


def settings(conn: sqlite3.Connection, conv_id: int) -> tuple[str | None, dict | None]:
    """The chat's preset name and its own settings (None: never saved, use the preset)."""
    row = conn.execute("SELECT preset, settings FROM conversations WHERE id = ?",
                       (conv_id,)).fetchone()
    if row is None:
        raise KeyError(f"no conversation {conv_id}")
    preset, raw = row
    values = None if raw is None else load_dict(raw, "conversation settings")
    return (None if preset is None else text(preset)), values


def set_settings(conn: sqlite3.Connection, conv_id: int, preset: str | None,
                 values: dict) -> None:
    cursor = conn.execute("UPDATE conversations SET preset = ?, settings = ? WHERE id = ?",
                          (preset, dump_dict(values), conv_id))
    if cursor.rowcount == 0:
        raise KeyError(f"no conversation {conv_id}")


def delete(conn: sqlite3.Connection, conv_id: int) -> None:
    """Hide it (undo with undelete) until store/purge.py removes it for good."""
    require(conn, conv_id)
    conn.execute("UPDATE conversations SET deleted_at = ? WHERE id = ? AND deleted_at IS NULL",
                 (time.time(), conv_id))


def undelete(conn: sqlite3.Connection, conv_id: int) -> None:
    _set(conn, conv_id, "deleted_at", None)


def touch(conn: sqlite3.Connection, conv_id: int) -> None:
    conn.execute("UPDATE conversations SET updated_at = ? WHERE id = ?", (time.time(), conv_id))


def set_unread(conn: sqlite3.Connection, conv_id: int, unread: bool) -> None:
    _set(conn, conv_id, "unread", int(unread))


def unread_ids(conn: sqlite3.Connection) -> list[int]:
    """The chats marked unread (chat/unread.py), deleted ones left out."""
    rows = conn.execute("SELECT id FROM conversations WHERE unread = 1 AND deleted_at IS NULL")
    return [int(row[0]) for row in rows]
