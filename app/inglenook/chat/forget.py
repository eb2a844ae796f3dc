"""Deleted chats, deleted for good: the rows (store/purge.py) and the image files the engine was
given for them (chat/images.py's cache), off the GUI thread.

The window hides a deleted chat while it offers Undo, and purges it once it no longer does: when
another chat is deleted (Undo reaches the latest only) and when the window closes. At start-up,
a window that has the database to itself purges every chat still marked deleted (left by a
crash, or by a version that never purged); with another window open, that one may still offer
Undo for them, so they wait. KV-cache states need nothing here: the engine forgets a chat's
state when it is deleted (EngineWorker.forget), and its spilled files go with the engine.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from inglenook.chat import images
from inglenook.store import db, purge


@dataclass(frozen=True)
class Purged:
    conversations: int
    image_files: int


def purge_for_good(database: Path, conv_ids: list[int] | None = None,
                   deleted_before: float | None = None, scrub: bool = True,
                   scrub_anyway: bool = False) -> Purged:
    """Remove these deleted conversations (None: every one deleted before `deleted_before`, a
    time.time()) and the cache files of the images no remaining message holds. A chat undeleted
    meanwhile is left alone. `scrub`: then merge the search indexes, when something was purged
    (or `scrub_anyway`: earlier purges of this session left words there). The merge rewrites
    the indexes whole (~0.35 s at 50,000 messages, holding every writer, the GUI thread's
    included), so the window scrubs at quit and at start-up, not at each deletion."""
    conn = db.connect(database)
    try:
        conn.execute(purge.SECURE_DELETE)
        with db.transaction(conn):
            wanted = purge.deleted_ids(conn, deleted_before) if conv_ids is None else conv_ids
            ids, released = purge.purge(conn, wanted)
        if scrub and (ids or scrub_anyway):
            purge.scrub(conn)
    finally:
        conn.close()
    return Purged(len(ids), images.forget(released))


def tidy_at_start(database: Path, deleted_before: float | None) -> Purged:
    """At start-up, off the GUI thread: purge what was deleted before `deleted_before` (the
    start; None: nothing, another window has the database open), then prune the image cache of
    files no message holds."""
    purged = Purged(0, 0) if deleted_before is None else purge_for_good(
        database, None, deleted_before)
    images.prune_cache(database)
    return purged
