"""The Responses API's stored responses: each one's conversation as input items (the turns
before it, its input, its output), the response as it was sent, per principal, kept in the
profile (one SQLite file, paths.api_responses_file) so a restart forgets nothing.

A stored response serves `previous_response_id` (its conversation comes back before the next
input) and the SDK's `responses.retrieve`, `responses.delete` and `responses.input_items.list`.
Each principal (a token, or the clients without one; see replying.principal_of) has its own
shelf, bounded by count and by characters, its least recently used going first: one client's
responses never push out another's, and one principal never sees another's. The principals
themselves are bounded (MAX_PRINCIPALS, the shelf used least recently going whole), as
`--isolate-clients` makes one per client. Nothing here is readable by anyone but the user: the
file is made private like every file of the profile.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path
from typing import Any

from inglenook import paths

MAX_RESPONSES = 512  # per principal
MAX_CHARS = 16_000_000  # per principal: ~32 MB of text
MAX_PRINCIPALS = 16  # shelves kept; a token's is used often, so it stays

Items = list[dict[str, Any]]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    principal TEXT NOT NULL,
    id TEXT NOT NULL,
    used INTEGER NOT NULL,      -- when last read or written: a counter, larger is later
    chars INTEGER NOT NULL,
    items TEXT NOT NULL,        -- the conversation's input items, output last
    inputs INTEGER NOT NULL,    -- how many of them were input (the rest is the output)
    body TEXT NOT NULL,         -- the response object as it was sent
    PRIMARY KEY (principal, id)
);
"""


class ResponseStore:
    def __init__(self, path: Path | None = None, max_responses: int | None = None,
                 max_chars: int | None = None, max_principals: int | None = None) -> None:
        """`path`: the profile's file unless given; ":memory:" keeps nothing past the run."""
        self._max_responses = max_responses or MAX_RESPONSES
        self._max_chars = max_chars or MAX_CHARS
        self._max_principals = max_principals or MAX_PRINCIPALS
        where = str(path) if path is not None else str(paths.api_responses_file())
        self._db = sqlite3.connect(where, check_same_thread=False, isolation_level=None)
        if where != ":memory:":
            paths.private(Path(where), 0o600)
        self._db.executescript(_SCHEMA)
        self._lock = threading.Lock()
        found = self._db.execute("SELECT MAX(used) FROM responses").fetchone()[0]
        self._clock = int(found or 0)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _tick(self) -> int:
        self._clock += 1
        return self._clock

    def put(self, principal: str, response_id: str, items: Items, inputs: int,
            body: dict[str, Any]) -> None:
        """Keep a response (its conversation without the request's instructions: they are
        never carried over) for this principal only."""
        text = json.dumps(items, ensure_ascii=False)
        sent = json.dumps(body, ensure_ascii=False)
        with self._lock, self._db:
            self._db.execute("INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?, ?, ?, ?)",
                             (principal, response_id, self._tick(), len(text) + len(sent),
                              text, inputs, sent))
            self._bound(principal)

    def _bound(self, principal: str) -> None:
        db = self._db
        while True:
            count, chars = db.execute("SELECT COUNT(*), COALESCE(SUM(chars), 0) FROM responses "
                                      "WHERE principal = ?", (principal,)).fetchone()
            if count <= 1 or (count <= self._max_responses and chars <= self._max_chars):
                break
            db.execute("DELETE FROM responses WHERE principal = ? AND id = (SELECT id FROM "
                       "responses WHERE principal = ? ORDER BY used LIMIT 1)",
                       (principal, principal))
        shelves = db.execute("SELECT principal FROM responses GROUP BY principal "
                             "ORDER BY MAX(used) DESC").fetchall()
        for (gone,) in shelves[self._max_principals:]:
            db.execute("DELETE FROM responses WHERE principal = ?", (gone,))

    def _row(self, principal: str, response_id: str) -> tuple[str, int, str] | None:
        with self._lock, self._db:
            row = self._db.execute("SELECT items, inputs, body FROM responses WHERE "
                                   "principal = ? AND id = ?", (principal, response_id)
                                   ).fetchone()
            if row is not None:
                self._db.execute("UPDATE responses SET used = ? WHERE principal = ? AND id = ?",
                                 (self._tick(), principal, response_id))
            return row

    def get(self, principal: str, response_id: str) -> Items | None:
        """The conversation up to and with this response, as input items; None when it is
        not kept (never stored, forgotten, deleted, or another principal's)."""
        row = self._row(principal, response_id)
        return json.loads(row[0]) if row is not None else None

    def response(self, principal: str, response_id: str) -> dict[str, Any] | None:
        row = self._row(principal, response_id)
        return json.loads(row[2]) if row is not None else None

    def inputs(self, principal: str, response_id: str) -> Items | None:
        """The input items that made the response (those of the responses before it first)."""
        row = self._row(principal, response_id)
        return json.loads(row[0])[:row[1]] if row is not None else None

    def delete(self, principal: str, response_id: str) -> bool:
        with self._lock, self._db:
            return self._db.execute("DELETE FROM responses WHERE principal = ? AND id = ?",
                                    (principal, response_id)).rowcount > 0

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0])
