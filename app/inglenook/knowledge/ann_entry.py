"""One collection's approximate index in memory (usearch's HNSW graph over its windows'
vectors, keyed by chunk id), and building one from the database's vectors as they are. ann.py
keeps a process's indexes in step with the database and on disk."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from inglenook.knowledge.ann_files import Owner
from inglenook.knowledge.ann_log import head, snapshot

DTYPE = "i8"  # a quarter of float32's memory; the candidates are rescored exactly
CONNECTIVITY = 16  # usearch's default M
# Half usearch's default (128): half the time to add a vector, and on vectors shaped like
# MiniLM's the same candidates (bench/knowledge_vector_bench.py: 99.7% of the exact top 80).
EXPANSION_ADD = 64
EXPANSION_SEARCH = 64  # usearch's default; a search asking more windows looks that far
FANOUT = 4  # nearest windows asked per candidate chunk at first (a chunk has ~5)
_ROWS = 4096  # vectors read and added at a time while building


@dataclass
class Entry:
    """A collection's index in memory; `index` None until it has a vector (the first one
    fixes its dimensions)."""

    owner: Owner
    seq: int  # the log's entries up to this one are in it
    index: Any = None
    unsaved: int = 0  # vectors added or removed since it was read, built or saved
    checked: bool = False  # its count was found equal to the database's

    @property
    def size(self) -> int:
        return 0 if self.index is None else len(self.index)

    @property
    def dimensions(self) -> int | None:
        return None if self.index is None else int(self.index.ndim)

    def add(self, chunk_ids: Sequence[int], blobs: Sequence[bytes], threads: int = 0) -> None:
        """`threads`: 0 all cores."""
        from usearch.index import Index

        if not blobs:
            return
        if self.index is None:
            self.index = Index(ndim=len(blobs[0]) // 4, metric="cos", dtype=DTYPE,
                               connectivity=CONNECTIVITY, expansion_add=EXPANSION_ADD,
                               multi=True)
        width = 4 * int(self.index.ndim)
        keep = [n for n, blob in enumerate(blobs) if len(blob) == width]  # never another size
        if keep:
            rows = np.frombuffer(b"".join(blobs[n] for n in keep), dtype="<f4")
            self.index.add(np.asarray([chunk_ids[n] for n in keep], dtype=np.uint64),
                           rows.reshape(len(keep), -1), threads=threads)
            self.unsaved += len(keep)

    def remove(self, chunk_ids: Sequence[int]) -> None:
        if self.index is not None and len(self.index) and chunk_ids:
            keys = np.asarray(chunk_ids, dtype=np.uint64)
            self.unsaved += int(np.sum(self.index.remove(keys[self.index.contains(keys)])))

    def apply(self, changes: dict[int, int], now: dict[int, list[bytes]], upto: int) -> None:
        """The log's changes after self.seq (chunk id → its last seq), given the vectors of
        the changed chunks that are in this collection now."""
        todo = [cid for cid, seq in changes.items() if seq > self.seq]
        self.remove(todo)
        self.add([cid for cid in todo for _ in now.get(cid, ())],
                 [blob for cid in todo for blob in now.get(cid, ())])
        self.seq = max(self.seq, upto)

    def nearest(self, query: np.ndarray, chunks: int) -> list[int]:
        """The ids of the `chunks` chunks with the nearest windows (fewer when it has fewer),
        nearest first."""
        if self.index is None or not len(self.index) or len(query) != self.index.ndim:
            return []
        vector = np.asarray(query, dtype=np.float32)
        windows = min(FANOUT * chunks, len(self.index))
        while True:
            self.index.expansion_search = max(EXPANSION_SEARCH, windows)
            found = dict.fromkeys(int(k) for k in self.index.search(vector, windows).keys)
            if len(found) >= chunks or windows >= len(self.index):
                return list(found)[:chunks]
            windows = min(4 * windows, len(self.index))  # a few chunks' windows all nearest


def build(conn: Any, owner: Owner, stop: threading.Event, threads: int = 0) -> Entry | None:
    """The collection's index from chunk_vectors as they are (None: stopped). Its seq is the
    log's head, read in the same snapshot."""
    with snapshot(conn):
        entry = Entry(owner, head(conn), checked=True)  # made from the database itself
        rows = conn.execute(
            "SELECT v.chunk_id, v.embedding FROM chunk_vectors v "
            "JOIN chunks c ON c.id = v.chunk_id JOIN documents d ON d.id = c.document_id "
            "WHERE d.collection_id = ? ORDER BY v.chunk_id", (owner.collection_id,))
        while batch := rows.fetchmany(_ROWS):
            if stop.is_set():
                return None
            entry.add([int(cid) for cid, _ in batch], [blob for _, blob in batch], threads)
    return entry
