"""The message tree of a conversation: adding, streaming updates, branches, deleting.

Among the children of one parent (or the roots of a conversation), the one with the highest
active_seq (then the highest id) is the active child; the active path follows active children
from the active root to a leaf. See schema.py.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence

from inglenook.core.attachments import IMAGE_TOKENS, Attachment
from inglenook.core.provenance import Provenance
from inglenook.store import conversations, db
from inglenook.store.records import (
    ATTACHMENT_COLUMNS,
    STATUSES,
    StoredMessage,
    attachment_from_row,
    dump_cards,
    dump_dict,
    message_from_row,
)
from inglenook.tools.cards import ToolCard

# An image, for estimates in characters (~4 to a token): its counted tokens (v6), else a guess.
IMAGE_CHARS = f"(CASE WHEN a.tokens > 0 THEN a.tokens ELSE {IMAGE_TOKENS} END) * 4"
_MAX_DEPTH = 1_000_000  # a guard against loops in hand-edited data, far beyond any real chat

_COLUMNS = """
m.id, m.conversation_id, m.parent_id, m.role, m.content, m.reasoning, m.status, m.created_at,
m.provenance, m.tool_cards,
(SELECT count(*) FROM messages s
 WHERE s.conversation_id = m.conversation_id AND s.parent_id IS m.parent_id AND s.id <= m.id),
(SELECT count(*) FROM messages s
 WHERE s.conversation_id = m.conversation_id AND s.parent_id IS m.parent_id)
"""

_ACTIVE_PATH = f"""
WITH RECURSIVE path (id, depth) AS (
    SELECT (SELECT id FROM messages WHERE conversation_id = :conv AND parent_id IS NULL
            ORDER BY active_seq DESC, id DESC LIMIT 1), 0
    UNION ALL
    SELECT (SELECT c.id FROM messages c WHERE c.conversation_id = :conv AND c.parent_id = path.id
            ORDER BY c.active_seq DESC, c.id DESC LIMIT 1), path.depth + 1
    FROM path WHERE path.id IS NOT NULL AND path.depth < {_MAX_DEPTH}
)
SELECT {_COLUMNS} FROM path JOIN messages m ON m.id = path.id ORDER BY path.depth
"""

# The outline of the active path below :start (from the active root when :start is NULL): for each
# message what the transcript needs before reading it (role, sizes, whether it called tools).
_OUTLINE = f"""
WITH RECURSIVE path (id, depth) AS (
    SELECT (SELECT id FROM messages WHERE conversation_id = :conv AND parent_id IS :start
            ORDER BY active_seq DESC, id DESC LIMIT 1), 0
    UNION ALL
    SELECT (SELECT c.id FROM messages c WHERE c.conversation_id = :conv AND c.parent_id = path.id
            ORDER BY c.active_seq DESC, c.id DESC LIMIT 1), path.depth + 1
    FROM path WHERE path.id IS NOT NULL AND path.depth < {_MAX_DEPTH}
)
SELECT m.id, m.role, coalesce(length(m.content), 0), coalesce(length(m.reasoning), 0),
       coalesce(length(m.content) - length(replace(m.content, char(10), '')), 0),
       coalesce(length(m.tool_cards), 0) > 2,
       CASE WHEN m.role = 'assistant' AND instr(m.provenance, '"knowledge"')
                 AND json_valid(m.provenance)
            THEN coalesce(json_array_length(m.provenance, '$.knowledge.sources'), 0)
            ELSE (SELECT count(*) FROM attachments a WHERE a.message_id = m.id) END,
       (SELECT coalesce(sum(length(a.name) + length(a.text)
                             + CASE a.kind WHEN 'image' THEN {IMAGE_CHARS} ELSE 0 END), 0)
        FROM attachments a WHERE a.message_id = m.id),
       (SELECT count(*) FROM attachments a WHERE a.message_id = m.id AND a.kind = 'image')
FROM path JOIN messages m ON m.id = path.id ORDER BY path.depth
"""

# The message and those of its ancestors that are not the active child of their parent.
_HIDDEN_ANCESTORS = """
WITH RECURSIVE up (id, parent_id, conversation_id) AS (
    SELECT id, parent_id, conversation_id FROM messages WHERE id = ?
    UNION
    SELECT m.id, m.parent_id, m.conversation_id FROM messages m JOIN up ON m.id = up.parent_id
)
SELECT up.id FROM up
WHERE up.id != (SELECT s.id FROM messages s
                WHERE s.conversation_id = up.conversation_id AND s.parent_id IS up.parent_id
                ORDER BY s.active_seq DESC, s.id DESC LIMIT 1)
"""

_NEXT_SEQ = """
SELECT coalesce(max(active_seq), 0) + 1 FROM messages
WHERE conversation_id = ? AND parent_id IS ?
"""

_SUBTREE = """
WITH RECURSIVE sub (id) AS (
    SELECT id FROM messages WHERE id = ?
    UNION
    SELECT m.id FROM messages m JOIN sub ON m.parent_id = sub.id
)
SELECT id FROM sub
"""


def _check_status(status: str) -> None:
    if status not in STATUSES:
        raise ValueError(f"status must be one of {', '.join(STATUSES)}, not {status!r}")


def _parent_conversation(conn: sqlite3.Connection, msg_id: int) -> tuple[int, int | None]:
    row = conn.execute("SELECT conversation_id, parent_id FROM messages WHERE id = ?",
                       (msg_id,)).fetchone()
    if row is None:
        raise KeyError(f"no message {msg_id}")
    return row[0], row[1]


def _make_visible(conn: sqlite3.Connection, msg_id: int) -> None:
    """Make the message and all its ancestors the active child of their parent."""
    for (hidden_id,) in conn.execute(_HIDDEN_ANCESTORS, (msg_id,)).fetchall():
        conv_id, parent_id = _parent_conversation(conn, hidden_id)
        seq = conn.execute(_NEXT_SEQ, (conv_id, parent_id)).fetchone()[0]
        conn.execute("UPDATE messages SET active_seq = ? WHERE id = ?", (seq, hidden_id))


def add(conn: sqlite3.Connection, conv_id: int, role: str, content: str, parent_id: int | None,
        status: str, provenance: dict | Provenance | None, reasoning: str = "",
        attachments: Sequence[Attachment] = (), tool_cards: Sequence[ToolCard] = ()) -> int:
    _check_status(status)
    conversations.require(conn, conv_id)
    if parent_id is not None:
        parent_conv, _ = _parent_conversation(conn, parent_id)
        if parent_conv != conv_id:
            raise ValueError(f"message {parent_id} belongs to another conversation")
        _make_visible(conn, parent_id)
    seq = conn.execute(_NEXT_SEQ, (conv_id, parent_id)).fetchone()[0]
    cursor = conn.execute(
        "INSERT INTO messages (conversation_id, parent_id, role, content, reasoning, status, "
        "created_at, provenance, active_seq, tool_cards) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (conv_id, parent_id, role, content, reasoning, status, time.time(),
         dump_dict(provenance or {}), seq, dump_cards(tool_cards)))
    msg_id = db.inserted_id(cursor)
    add_attachments(conn, msg_id, attachments)
    conversations.touch(conn, conv_id)
    return msg_id


def add_attachments(conn: sqlite3.Connection, msg_id: int,
                    attachments: Sequence[Attachment]) -> None:
    conn.executemany(
        f"INSERT INTO attachments (message_id, position, {ATTACHMENT_COLUMNS}) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [(msg_id, n, a.kind, a.name, a.size, a.text, a.mime, a.data or None,
          a.image_tokens if a.kind == "image" else 0)
         for n, a in enumerate(attachments)])


def image_blobs(conn: sqlite3.Connection) -> Iterator[bytes]:
    """The bytes of every stored image, one at a time (the cache of files made from them is
    pruned against these)."""
    for (data,) in conn.execute("SELECT data FROM attachments WHERE kind = 'image' "
                                "AND data IS NOT NULL"):
        yield bytes(data)


def attachments_of(conn: sqlite3.Connection,
                   msg_ids: Sequence[int] | None) -> dict[int, tuple[Attachment, ...]]:
    """The attachments of these messages (None: of all), by message id: one query, however
    many ids."""
    found: dict[int, list[Attachment]] = defaultdict(list)
    where = "" if msg_ids is None else "WHERE message_id IN (SELECT value FROM json_each(?)) "
    rows = conn.execute(f"SELECT message_id, {ATTACHMENT_COLUMNS} FROM attachments {where}"
                        "ORDER BY message_id, position",
                        () if msg_ids is None else (json.dumps(list(msg_ids)),))
    for row in rows:
        found[row[0]].append(attachment_from_row(row[1:]))
    return {msg_id: tuple(parts) for msg_id, parts in found.items()}


def _with_attachments(conn: sqlite3.Connection, rows: list[tuple]) -> list[StoredMessage]:
    stored = [message_from_row(r) for r in rows]
    found = attachments_of(conn, [m.id for m in stored]) if stored else {}
    return [dataclasses.replace(m, attachments=found[m.id]) if m.id in found else m
            for m in stored]


def update(conn: sqlite3.Connection, msg_id: int, content: str, status: str | None,
           provenance: dict | Provenance | None, reasoning: str | None = None,
           tool_cards: Sequence[ToolCard] | None = None) -> None:
    """Replace the content; status, provenance, reasoning and cards only when given (provenance
    and cards are replaced as a whole, not merged)."""
    if status is not None:
        _check_status(status)
    cursor = conn.execute(
        "UPDATE messages SET content = ?, reasoning = coalesce(?, reasoning), "
        "status = coalesce(?, status), provenance = coalesce(?, provenance), "
        "tool_cards = coalesce(?, tool_cards) WHERE id = ?",
        (content, reasoning, status, None if provenance is None else dump_dict(provenance),
         None if tool_cards is None else dump_cards(tool_cards), msg_id))
    if cursor.rowcount == 0:
        raise KeyError(f"no message {msg_id}")


def active_path(conn: sqlite3.Connection, conv_id: int) -> list[StoredMessage]:
    rows = conn.execute(_ACTIVE_PATH, {"conv": conv_id}).fetchall()
    if not rows:
        conversations.require(conn, conv_id)
    return _with_attachments(conn, rows)


def outline(conn: sqlite3.Connection, conv_id: int, below: int | None = None) -> list[tuple]:
    """(id, role, characters of the answer and of the reasoning, newlines, called tools,
    attachments and their characters) of each message of the active path, from the active
    root, or only below message `below`."""
    rows = conn.execute(_OUTLINE, {"conv": conv_id, "start": below}).fetchall()
    if not rows and below is None:
        conversations.require(conn, conv_id)
    return rows


def by_ids(conn: sqlite3.Connection, msg_ids: Sequence[int]) -> list[StoredMessage]:
    """These messages, in the order given (those that no longer exist are left out)."""
    rows = conn.execute(f"SELECT {_COLUMNS} FROM messages m "
                        "WHERE m.id IN (SELECT value FROM json_each(?))",
                        (json.dumps(list(msg_ids)),)).fetchall()
    found = {m.id: m for m in _with_attachments(conn, rows)}
    return [found[i] for i in msg_ids if i in found]


def siblings(conn: sqlite3.Connection, msg_id: int) -> list[StoredMessage]:
    """The message and its alternatives (same parent), in ‹ 1/n › order."""
    conv_id, parent_id = _parent_conversation(conn, msg_id)
    rows = conn.execute(f"SELECT {_COLUMNS} FROM messages m "
                        "WHERE m.conversation_id = ? AND m.parent_id IS ? ORDER BY m.id",
                        (conv_id, parent_id)).fetchall()
    return _with_attachments(conn, rows)


def select(conn: sqlite3.Connection, msg_id: int) -> int:
    """Show this message's branch; returns its conversation id."""
    conv_id, _ = _parent_conversation(conn, msg_id)
    _make_visible(conn, msg_id)
    return conv_id


def delete_from(conn: sqlite3.Connection, msg_id: int) -> None:
    """Delete the message and everything below it, in one statement: the parent_id foreign
    key is checked at its end, when the whole subtree is gone."""
    _parent_conversation(conn, msg_id)
    conn.execute(f"DELETE FROM messages WHERE id IN ({_SUBTREE})", (msg_id,))


def mark_interrupted(conn: sqlite3.Connection) -> int:
    """Replies left streaming by a killed app: keep what was saved, say it was cut short."""
    return conn.execute(
        "UPDATE messages SET status = 'interrupted' WHERE status = 'streaming'").rowcount
