"""Approximate nearest neighbours over a knowledge database's vectors (usearch's HNSW), so that
a search by meaning visits a few thousand of a collection's vectors instead of reading every
one (100,000 passages are 500,000 windows: the exact scan took 2.5 s).

SQLite's chunk_vectors stays the truth; what is here is derived from it, checked against it,
and rebuilt from it when it cannot be shown to agree:

- One usearch index per collection (the collection filter is which indexes are searched), its
  windows' vectors keyed by their chunk's id (`multi`: a chunk has a vector per window), held
  as 8-bit integers. The nearest windows name candidate chunks, more than wanted; vectors.py
  computes their distances exactly from chunk_vectors, so that only which chunks are
  candidates is approximate, never their order or scores.
- vector_log (schema v8) records every change to chunk_vectors by trigger, whatever code or
  process made it: a batch embedded, a document replaced or removed (its vectors go by
  cascade), a collection forgotten or deleted, its model or backend changed. An index knows the
  last seq it reflects; before a search it applies the entries after that: a chunk named is
  removed, and its vectors as they are now are added back (applying an entry twice does no
  harm, so reading vectors newer than the seq is safe).
- Saved beside the database (ann_files.py), read under a file lock (off the lock below: a
  search waits READ_WAIT_S for it, then is exact this time) only when its manifest matches
  the collection, and used only once its count, with the log applied, equals the database's
  (once per process). Whoever indexes saves: every SAVE_EVERY vectors changed, and
  at the end of a run that changed SAVE_AT_CLOSE or more (a file edited in a watched folder
  does not rewrite a 270 MB index: its few vectors wait in the log, which whoever reads the
  file applies). The log is then trimmed to what every saved file, and this process's
  builds under way, have applied, and a process whose index is older than the trimmed log
  reads the file again.
- One set in memory per process and database, shared by every thread's SqliteFtsIndex (the
  window searches on one thread while it indexes on another), used under one lock.
- A collection without a usable index (a database from before v8, a file deleted or damaged)
  is searched exactly (vectors.ranking) while its index is built from chunk_vectors, off the
  lock: inline up to SYNC_BUILD vectors, else on a thread of its own, which a search does not
  wait for and an indexing run does.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import importlib.util
import logging
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from inglenook import paths
from inglenook.knowledge.ann_entry import EXPANSION_ADD, Entry, build
from inglenook.knowledge.ann_files import Files
from inglenook.knowledge.ann_log import changed, count, head, oldest, owners, snapshot, vectors_now

log = logging.getLogger(__name__)

SYNC_BUILD = 5_000  # vectors a collection may have for its index to be built inline
SAVE_EVERY = 20_000  # vectors changed in an index before an indexing run saves it again
SAVE_AT_CLOSE = 1_000  # vectors changed for the end of a run to save it
# How long a search waits for the files' lock (another process saving a 270 MB index takes
# seconds) before it searches that collection exactly this time; an indexing run, which needs
# the index, waits ann_files.LOCK_TIMEOUT_S.
READ_WAIT_S = 1.0
CLOSE_WAIT_S = 5.0  # for builds to stop at exit (at their next batch), then left behind


@functools.cache
def missing_library() -> str:
    """Why the approximate index cannot be used here ("" it can)."""
    return "" if importlib.util.find_spec("usearch") else "usearch is not installed"


# ---- the process's indexes of a database ----------------------------------------------------

class VectorIndexes:
    """The indexes of one knowledge database in this process (`for_database`). `driver`: the
    sqlite3 module the database is opened with (one SQLite library per file and process)."""

    def __init__(self, database: Path, driver: Any) -> None:
        self.database, self.driver = database, driver
        self.files = Files(paths.knowledge_vector_index_dir(database))
        self.lock = threading.RLock()
        self.entries: dict[int, Entry] = {}
        self._building: dict[int, threading.Event] = {}  # set when done
        # Of the builds under way, a seq their snapshot is no older than: the log after it
        # is kept for them (save).
        self._since: dict[int, int] = {}
        self._stop = threading.Event()

    def nearest(self, conn: Any, collection_ids: Sequence[int], query: np.ndarray,
                chunks: int) -> tuple[list[int], list[int]]:
        """The candidate chunks of the collections whose index is ready (`chunks` from each),
        and the collections to be searched exactly (their index is not there yet)."""
        exact = self.ready(conn, collection_ids)
        found: list[int] = []
        with self.lock:
            for collection_id in collection_ids:
                entry = self.entries.get(collection_id)
                if collection_id in exact or entry is None:  # gone since: another thread
                    exact.append(collection_id)
                else:
                    found += entry.nearest(query, chunks)
        return found, sorted(set(exact))

    def ready(self, conn: Any, collection_ids: Sequence[int], wait: bool = False) -> list[int]:
        """Bring these collections' indexes in step with the database; the collections whose
        index is not ready (being built, or its file locked). `wait`: read or build them
        first (an indexing run)."""
        with self.lock:
            todo = self._sync(conn, collection_ids, start=False)
        if not todo:
            return []
        busy: set[int] = set()
        if unread := [cid for cid, vectors in todo.items() if vectors is not None]:
            busy = self._read(conn, unread, None if wait else READ_WAIT_S)
            with self.lock:
                todo = self._sync(conn, collection_ids)
        for collection_id, vectors in todo.items():
            if (vectors is None or collection_id in busy) and not wait:
                continue  # being built; its file is being written (exact this time)
            self._build(collection_id, background=not wait and (vectors or 0) > SYNC_BUILD)
        with self.lock:
            return list(self._sync(conn, collection_ids, start=False))

    def _sync(self, conn: Any, collection_ids: Sequence[int],
              start: bool = True) -> dict[int, int | None]:
        """Check these collections' indexes and apply the log to them, under the lock;
        {collection id: its vectors (None: being built; 0: not counted)} of those without
        an index (their files are read by `ready`, off the lock)."""
        todo: dict[int, int | None] = {}
        with snapshot(conn):
            found = owners(conn)
            for cid in list(self.entries):  # deleted, another model or backend, a reused id
                if found.get(cid) != self.entries[cid].owner:
                    del self.entries[cid]
            wanted = [cid for cid in collection_ids if cid in found]
            upto, first = head(conn), oldest(conn)
            for cid in wanted:
                entry = self.entries.get(cid)
                if entry is not None and entry.seq < first - 1:  # the log it needs was trimmed
                    del self.entries[cid]
            current = [self.entries[cid] for cid in wanted if cid in self.entries]
            if current and min(e.seq for e in current) < upto:
                self._apply(conn, current, upto)
            for entry in current:
                if not entry.checked:  # once per process: a file may not hold what it says
                    cid = entry.owner.collection_id
                    # All its vectors first (an index of ids: 28 ms at 500,000, where those
                    # of its size read every vector: 430 ms); they differ after a model
                    # change alone, while the old vectors are being replaced.
                    entry.checked = entry.size == count(conn, cid) or \
                        entry.size == count(conn, cid, entry.dimensions)
                    if not entry.checked:
                        del self.entries[cid]
            for cid in wanted:
                if cid not in self.entries:
                    todo[cid] = None if cid in self._building else \
                        count(conn, cid) if start else 0
        return todo

    def _read(self, conn: Any, collection_ids: Sequence[int], timeout: float | None
              ) -> set[int]:
        """Read these collections' saved indexes, off the lock (a large file takes a second,
        and another process may hold the files' lock for seconds: the other threads' searches
        do not wait), then put them in under it (checked by the next _sync); the collections
        not read because the files' lock was not had in `timeout` seconds (None: the
        default)."""
        found = owners(conn)
        wanted = [found[cid] for cid in collection_ids if cid in found]
        loaded: list[Entry] = []
        try:
            with self.files.locked(timeout):
                for owner in wanted:
                    if (saved := self.files.load(owner)) is not None:
                        if saved.index is not None:  # not in usearch's file
                            saved.index.expansion_add = EXPANSION_ADD
                        loaded.append(Entry(owner, saved.seq, saved.index))
        except TimeoutError:
            return {owner.collection_id for owner in wanted}
        except OSError:  # no folder: built
            pass
        with self.lock:
            for entry in loaded:  # unless another thread read or built one meanwhile
                cid = entry.owner.collection_id
                if cid not in self.entries and cid not in self._building:
                    self.entries[cid] = entry
        return set()

    @staticmethod
    def _apply(conn: Any, current: Sequence[Entry], upto: int) -> None:
        changes = changed(conn, min(e.seq for e in current), upto)
        now: dict[int, dict[int, list[bytes]]] = {}
        for collection_id, cid, blob in vectors_now(conn, list(changes),
                                                    [e.owner.collection_id for e in current]):
            now.setdefault(collection_id, {}).setdefault(cid, []).append(blob)
        for entry in current:
            entry.apply(changes, now.get(entry.owner.collection_id, {}), upto)

    def _build(self, collection_id: int, background: bool) -> None:
        """Build the collection's index (on a thread of its own when `background`), or wait
        for the build under way (unless `background`). Never under the lock."""
        with self.lock:
            done = self._building.get(collection_id)
            mine = done is None
            if mine:
                done = self._building[collection_id] = threading.Event()
        assert done is not None
        if not mine:
            if not background:
                done.wait()
        elif background:  # one core: the other stays with the chat model's reply
            threading.Thread(target=self._build_now, args=(collection_id, done, 1), daemon=True,
                             name=f"knowledge-vector-index-{collection_id}").start()
        else:
            self._build_now(collection_id, done, 0)

    def _build_now(self, collection_id: int, done: threading.Event, threads: int) -> None:
        """Build it with a connection of its own (on `threads` cores, 0 all), then bring it up
        to date and save it."""
        from inglenook.store.db import connect

        try:
            conn = connect(self.database, driver=self.driver)
            try:
                # Read before build's snapshot, so no newer: a save that trims the log after
                # this sees it, and one that read the files before it trims to no later than
                # the head then, which the snapshot is no older than.
                since = head(conn)
                with self.lock:
                    self._since[collection_id] = since
                owner = owners(conn).get(collection_id)
                entry = build(conn, owner, self._stop, threads) if owner is not None else None
                if entry is not None and not self._stop.is_set():  # else the process exits
                    with self.lock:
                        self.entries[collection_id] = entry
                        self._sync(conn, [collection_id], start=False)  # changed meanwhile
                    self.save(conn, [collection_id])
            finally:
                conn.close()
        except Exception:  # the database went, the disk is full: searches stay exact
            log.warning("The vector index of collection %d was not built", collection_id,
                        exc_info=True)
        finally:
            with self.lock:
                self._building.pop(collection_id, None)
                self._since.pop(collection_id, None)
            done.set()

    def save(self, conn: Any, collection_ids: Sequence[int] | None = None,
             at_least: int = 1) -> None:
        """Save the indexes that changed by `at_least` vectors (all: None), delete the files
        of collections that went, and trim the log to what every saved file, and every index
        of this process without one, has applied. Outside the caller's transaction."""
        def changed() -> list[Entry]:
            return [e for cid, e in self.entries.items()
                    if (collection_ids is None or cid in collection_ids)
                    and e.unsaved >= at_least]

        with self.lock:
            if not changed():
                return
        try:
            # The files' lock first, off the lock: while another process saves, this
            # process's searches go on. (Never the other way round: no deadlock.)
            with self.files.locked(), self.lock:
                for entry in changed():
                    self.files.save(entry.owner, entry.seq, entry.index)
                    entry.unsaved = 0
                live = owners(conn)
                kept: dict[int, int] = {}
                for cid, seq in self.files.saved().items():
                    if cid in live:
                        kept[cid] = seq
                    else:
                        self.files.delete(cid)
                # What this process needs too: each build under way (minutes on one core for
                # a large collection: trimmed past its snapshot, it would be thrown away when
                # done, and a collection indexed meanwhile might never get one), and an index
                # in memory with vectors and no file (a save that failed). An index with a
                # file is no older than it, or another process saved a newer one, which it
                # reads again; one with no vector is built again at no cost. Other processes'
                # indexes and builds cannot be seen here: an index older than the trimmed log
                # reads its file again; a build is thrown away when done (its next search
                # starts another).
                needed = [*kept.values(), *self._since.values(),
                          *(e.seq for cid, e in self.entries.items()
                            if cid not in kept and live.get(cid) == e.owner and e.size)]
        except (OSError, TimeoutError):
            return  # not saved: caught up or built again next time
        if kept:
            from inglenook.store.db import transaction

            with contextlib.suppress(self.driver.Error), transaction(conn):  # else next time
                conn.execute("DELETE FROM vector_log WHERE seq <= ?", (min(needed),))

    def drop(self, collection_id: int) -> None:
        """Delete a deleted collection's files now (the window does it on its GUI thread:
        no lock is waited for). Its index in memory goes at the next search: its owner is
        gone; a file a run in flight saves meanwhile goes at the next save."""
        with contextlib.suppress(OSError):
            self.files.delete(collection_id)

    def close(self) -> None:
        """Stop the builds under way (their work is lost) and wait for them, CLOSE_WAIT_S at
        most: one may be waiting for the files' lock (LOCK_TIMEOUT_S), or in a batch. Their
        threads are daemons: one left behind ends with the process (a file it was writing
        is a .partial, never taken)."""
        self._stop.set()
        with self.lock:
            running = list(self._building.values())
        deadline = time.monotonic() + CLOSE_WAIT_S
        for done in running:
            done.wait(max(0.0, deadline - time.monotonic()))


_OPEN: dict[Path, VectorIndexes] = {}
_OPEN_LOCK = threading.Lock()


def for_database(database: Path, driver: Any) -> VectorIndexes:
    """This process's indexes of the database at `database`."""
    key = database.resolve()
    with _OPEN_LOCK:
        if key not in _OPEN:
            _OPEN[key] = VectorIndexes(key, driver)
        return _OPEN[key]


def close_all() -> None:
    """Forget every database's indexes (at exit: builds stop; tests: between them)."""
    with _OPEN_LOCK:
        while _OPEN:
            _OPEN.popitem()[1].close()


atexit.register(close_all)
