"""The schema, as a list of migrations: MIGRATIONS[n - 1] takes a database from v(n-1) to vn.

Rules for adding one (v2, …): append a function, never edit an earlier one; db.migrate() backs
the file up to <name>.bak-v<old> and runs each step in its own transaction with the new
PRAGMA user_version. Add tests/fixtures/store/v<new>.sql (make_fixtures.py) and a test that
opens every older fixture.

Design notes for v1:
- A conversation is a tree of messages (parent_id). Siblings are alternatives (an edited
  prompt, a regenerated reply); `active_seq` picks the one on screen: among siblings, the
  highest active_seq (then the highest id) is the active child. Selecting or adding a message
  gives it the next number, so deleting the active one falls back to the most recently active
  sibling without any pointer to repair. Sibling order for ‹ 2/3 › is creation order (id).
- Soft delete is a timestamp; purging deletes the row and its messages (ON DELETE CASCADE).
- Full-text search uses external-content FTS5 tables kept in step by triggers. A message is
  indexed once it stops streaming: while it streams, each saved batch rewrites only its row.
- The preset of a conversation is a name, not a foreign key: an imported conversation may name
  a preset this machine does not have, and the UI falls back to the default.

v3: a reply's reasoning (what a thinking model wrote before its answer) has its own column, so
the answer alone is copied and sent back to the model; search indexes both columns.

v4: files attached to a message, one row per part in the message's order (attachments.py). A
part keeps what was read when it was attached (the text the model was shown; an image's bytes),
never a path: the file may change or go. Deleting a message deletes its parts (ON DELETE
CASCADE, with the message and with its conversation).

v5: the tool calls a reply made, as cards (tools/cards.py: the call, the user's decision, the
result) in a JSON list on the message. The results go back to the model from the cards, as
`tool` messages after the reply that called them; the model's next reply is that reply's
child. '[]' for every other message.

v6: an image part's cost in tokens, as the projector loaded when it was attached counted it at
the image's size (0: not counted: sent before v6, imported, or by a model that cannot see).
Images cost what their size takes with a projector that tiles or keeps the aspect, so the
context meter's estimate of a chat's history reads it rather than a fixed guess.

v7: a chat has a reply the user has not seen (chat/unread.py): set when a reply finishes while
another chat is on screen, cleared when the chat is opened; kept across a restart.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from inglenook.store import presets
from inglenook.store.records import split_reply

V1_SQL = """
CREATE TABLE conversations (
    id          INTEGER PRIMARY KEY,
    title       TEXT NOT NULL,
    pinned      INTEGER NOT NULL DEFAULT 0,
    preset      TEXT,
    created_at  REAL NOT NULL,
    updated_at  REAL NOT NULL,
    deleted_at  REAL
);
CREATE INDEX conversations_sidebar ON conversations (pinned, updated_at, id)
    WHERE deleted_at IS NULL;
CREATE INDEX conversations_deleted ON conversations (deleted_at)
    WHERE deleted_at IS NOT NULL;

CREATE TABLE messages (
    id               INTEGER PRIMARY KEY,
    conversation_id  INTEGER NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    parent_id        INTEGER REFERENCES messages (id),
    role             TEXT NOT NULL,
    content          TEXT NOT NULL,
    status           TEXT NOT NULL DEFAULT 'complete'
                     CHECK (status IN ('complete', 'streaming', 'interrupted', 'error')),
    created_at       REAL NOT NULL,
    provenance       TEXT NOT NULL DEFAULT '{}',
    active_seq       INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX messages_tree ON messages (conversation_id, parent_id, active_seq, id);
CREATE INDEX messages_parent ON messages (parent_id);
CREATE INDEX messages_streaming ON messages (status) WHERE status = 'streaming';

CREATE VIRTUAL TABLE messages_fts USING fts5 (
    content, content = 'messages', content_rowid = 'id',
    tokenize = 'unicode61 remove_diacritics 2'
);
CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages
WHEN new.status != 'streaming' BEGIN
    INSERT INTO messages_fts (rowid, content) VALUES (new.id, new.content);
END;
CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages
WHEN old.status != 'streaming' BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, content) VALUES ('delete', old.id, old.content);
END;
CREATE TRIGGER messages_fts_update AFTER UPDATE OF content, status ON messages BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, content)
        SELECT 'delete', old.id, old.content WHERE old.status != 'streaming';
    INSERT INTO messages_fts (rowid, content)
        SELECT new.id, new.content WHERE new.status != 'streaming';
END;

CREATE VIRTUAL TABLE conversations_fts USING fts5 (
    title, content = 'conversations', content_rowid = 'id',
    tokenize = 'unicode61 remove_diacritics 2'
);
CREATE TRIGGER conversations_fts_insert AFTER INSERT ON conversations BEGIN
    INSERT INTO conversations_fts (rowid, title) VALUES (new.id, new.title);
END;
CREATE TRIGGER conversations_fts_delete AFTER DELETE ON conversations BEGIN
    INSERT INTO conversations_fts (conversations_fts, rowid, title)
        VALUES ('delete', old.id, old.title);
END;
CREATE TRIGGER conversations_fts_update AFTER UPDATE OF title ON conversations BEGIN
    INSERT INTO conversations_fts (conversations_fts, rowid, title)
        VALUES ('delete', old.id, old.title);
    INSERT INTO conversations_fts (rowid, title) VALUES (new.id, new.title);
END;

CREATE TABLE presets (
    name           TEXT PRIMARY KEY COLLATE NOCASE,
    system_prompt  TEXT NOT NULL,
    sampling       TEXT NOT NULL DEFAULT '{}',
    builtin        INTEGER NOT NULL DEFAULT 0
);
"""


def statements(script: str) -> list[str]:
    """Split a script into statements (triggers hold semicolons), so that a migration runs
    inside our own transaction; executescript() would commit it first."""
    result, buffer = [], ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            result.append(buffer.strip())
            buffer = ""
    if buffer.strip():
        raise ValueError(f"incomplete SQL statement: {buffer.strip()[:60]}")
    return result


def _v1(conn: sqlite3.Connection) -> None:
    for statement in statements(V1_SQL):
        conn.execute(statement)
    # The presets as shipped; changing BUILTIN_PRESETS later needs a migration for stored rows.
    for preset in presets.BUILTIN_PRESETS:
        presets.insert(conn, preset, builtin=True)


def _v2(conn: sqlite3.Connection) -> None:
    """Each conversation keeps its own settings: the system prompt and sampling values the
    user chose for it (JSON, ChatSettings.to_dict()), next to the preset they came from (the
    `preset` column, NULL when the values were edited by hand). NULL settings: the chat was
    made before v2 and uses its preset's values."""
    conn.execute("ALTER TABLE conversations ADD COLUMN settings TEXT")


# v1's message index, over the answer and the reasoning. A message is still indexed only once
# it stops streaming.
V3_MESSAGES_FTS = """
CREATE VIRTUAL TABLE messages_fts USING fts5 (
    content, reasoning, content = 'messages', content_rowid = 'id',
    tokenize = 'unicode61 remove_diacritics 2'
);
CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages
WHEN new.status != 'streaming' BEGIN
    INSERT INTO messages_fts (rowid, content, reasoning)
        VALUES (new.id, new.content, new.reasoning);
END;
CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages
WHEN old.status != 'streaming' BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, content, reasoning)
        VALUES ('delete', old.id, old.content, old.reasoning);
END;
CREATE TRIGGER messages_fts_update AFTER UPDATE OF content, reasoning, status ON messages BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, content, reasoning)
        SELECT 'delete', old.id, old.content, old.reasoning WHERE old.status != 'streaming';
    INSERT INTO messages_fts (rowid, content, reasoning)
        SELECT new.id, new.content, new.reasoning WHERE new.status != 'streaming';
END;
"""


def _v3(conn: sqlite3.Connection) -> None:
    """Reasoning apart from the answer: a column, replies that open with a `<think>` block
    split into it (the only format a reply stored before v3 can be recognised by), and the
    search index rebuilt over both columns."""
    conn.execute("ALTER TABLE messages ADD COLUMN reasoning TEXT NOT NULL DEFAULT ''")
    for trigger in ("insert", "delete", "update"):
        conn.execute(f"DROP TRIGGER messages_fts_{trigger}")
    conn.execute("DROP TABLE messages_fts")
    rows = conn.execute("SELECT id, role, content FROM messages "
                        "WHERE role = 'assistant' AND instr(content, '<think>') > 0").fetchall()
    for msg_id, role, content in rows:
        reasoning, answer = split_reply(role, content)
        if answer != content:
            conn.execute("UPDATE messages SET content = ?, reasoning = ? WHERE id = ?",
                         (answer, reasoning, msg_id))
    for statement in statements(V3_MESSAGES_FTS):
        conn.execute(statement)
    # Not the 'rebuild' command: it would index rows still streaming too, against the rule.
    conn.execute("INSERT INTO messages_fts (rowid, content, reasoning) "
                 "SELECT id, content, reasoning FROM messages WHERE status != 'streaming'")


V4_ATTACHMENTS = """
CREATE TABLE attachments (
    id          INTEGER PRIMARY KEY,
    message_id  INTEGER NOT NULL REFERENCES messages (id) ON DELETE CASCADE,
    position    INTEGER NOT NULL,
    kind        TEXT NOT NULL,
    name        TEXT NOT NULL,
    size        INTEGER NOT NULL DEFAULT 0,
    text        TEXT NOT NULL DEFAULT '',
    mime        TEXT NOT NULL DEFAULT '',
    data        BLOB,
    UNIQUE (message_id, position)
);
"""


def _v4(conn: sqlite3.Connection) -> None:
    """Attachments: a table of message parts (the unique key is the index by message)."""
    for statement in statements(V4_ATTACHMENTS):
        conn.execute(statement)


def _v5(conn: sqlite3.Connection) -> None:
    """Tool-call cards kept with the reply that made the calls."""
    conn.execute("ALTER TABLE messages ADD COLUMN tool_cards TEXT NOT NULL DEFAULT '[]'")


def _v6(conn: sqlite3.Connection) -> None:
    """An image's counted cost in tokens."""
    conn.execute("ALTER TABLE attachments ADD COLUMN tokens INTEGER NOT NULL DEFAULT 0")


def _v7(conn: sqlite3.Connection) -> None:
    """The unread mark of a chat (0 read, 1 a reply not seen yet)."""
    conn.execute("ALTER TABLE conversations ADD COLUMN unread INTEGER NOT NULL DEFAULT 0")


MIGRATIONS: list[Callable[[sqlite3.Connection], None]] = [_v1, _v2, _v3, _v4, _v5, _v6, _v7]
LATEST_VERSION = len(MIGRATIONS)
