"""Opening the user's conversation database for the window, whatever state its folder is in.

The order of preference: the database itself; the database read-only when it cannot be written
(a read-only folder or file: the history is still there to read and search); an upgraded
temporary copy when it is read-only and from an older version; and only when nothing can be
read at all, an empty temporary database so the app still works. Every case but the first
comes with a message for the window's banner.
"""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path

from inglenook import paths
from inglenook.store import db
from inglenook.store.errors import StoreError
from inglenook.store.store import Store

log = logging.getLogger(__name__)


def _temporary_folder() -> Path:
    return Path(tempfile.mkdtemp(prefix="inglenook-"))


def _upgraded_copy(path: Path) -> Store:
    """A copy of a read-only database from an older version, migrated in a temporary folder."""
    copy = _temporary_folder() / path.name
    source = db.connect(path, read_only=True)
    try:
        db.backup(source, copy)
    finally:
        source.close()
    return Store(copy)


def _read_only_message(store: Store) -> str:
    folder = store.path.parent
    why = ("its folder cannot be written" if not os.access(folder, os.W_OK)
           else "the file cannot be written")
    return (f"The conversation database {store.path} is open read-only because {why}: your "
            "conversations can be read and searched, but changes will not be saved.")


def open_store(path: Path | None = None) -> tuple[Store, str | None]:
    """The user's conversation database and a message for a banner, or None when all is well.

    The message covers: a damaged file moved aside (store.recovered_from), a database opened
    read-only (store.read_only: every write raises StoreError), and a temporary database
    whose conversations will not be kept. Never raises StoreError or OSError."""
    try:
        target = path or paths.database_file()
        store = Store(target)
    except StoreError as exc:
        problem = str(exc)
        if exc.reason == "needs-upgrade":
            try:
                copy = _upgraded_copy(target)
            except (StoreError, OSError) as copy_exc:
                log.warning("Could not make an upgraded copy of %s: %s", target, copy_exc)
            else:
                return copy, (f"The conversation database {target} is read-only and was "
                              "written by an older Inglenook, so it cannot be upgraded in "
                              "place. An upgraded copy is shown: changes in this session will "
                              "not be kept.")
    except OSError as exc:  # the data folder itself cannot be made
        problem = f"Could not open the conversation database: {exc.strerror or exc}."
    else:
        if store.read_only:
            return store, _read_only_message(store)
        if store.recovered_from is not None:
            return store, (f"The conversation database was damaged. It was moved aside to "
                           f"{store.recovered_from} and a new one was started.")
        return store, None
    log.warning("Using a temporary conversation database: %s", problem)
    fallback = Store(_temporary_folder() / "inglenook.db")
    return fallback, f"{problem} Conversations in this session will not be kept."
