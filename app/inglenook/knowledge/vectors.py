"""Dense vectors beside the full-text index, in the same knowledge.db, ranked by sqlite-vec.

Each chunk of a collection that has an embedding model gets a unit vector (float32, the format
sqlite-vec reads) for each of its windows (chunking.windows: a sentence or two, under the
chunk's heading) in `chunk_vectors`, a plain table whose rows go with their chunk (ON DELETE
CASCADE): the file stays whole and searchable in full text even where the extension cannot be
loaded. A search ranks a chunk by its nearest window (cosine distance, sqlite-vec's
`vec_distance_cosine`), and search.py fuses that ranking with BM25's; the whole chunk is what the
model is given (small-to-big retrieval). A chunk's windows are stored together (`part` is the
window's number), so a chunk with part 0 has them all. Which chunks are ranked comes from an
approximate index of each collection's windows (ann.py: usearch's HNSW, derived from this
table, kept in step with it and rebuilt from it), their distances from this table, exactly;
where there is no such index (usearch missing, or one being built) the collection's windows
are all compared (`ranking`: an exact scan, 2.5 s for 500,000 windows; sqlite-vec 0.1's vec0
tables scan too, and would need the extension for every delete).

sqlite-vec is a loadable extension. Python's sqlite3 can load it unless it was built without
that (pyenv and some Linux distributions build it so): then pysqlite3 (a build of SQLite that
can) opens the database instead, where it is installed; else vectors are off and `reason` says
why, and search is full-text only.

A collection may keep its vectors in Qdrant instead (qdrant_store.py): both are a VectorStore,
and fts.py picks one per collection by its backend.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from inglenook.knowledge import ann, embed_prompts
from inglenook.knowledge.chunking import windows

log = logging.getLogger(__name__)

NOT_LOADABLE = ("This Python's sqlite3 cannot load extensions, so sqlite-vec cannot be used: "
                "search is full-text only.")


class Embedder(Protocol):
    """What makes vectors for a collection: `model` names it (the file's path), so vectors of
    another model are never compared with its own."""

    model: str

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        """One unit vector per text, (len(texts), dimensions) float32; raises on failure."""
        ...


class VectorStoreError(Exception):
    """A store that cannot be reached or refused a call; str() is one sentence for the user.
    Full text never depends on it."""


class VectorStore(Protocol):
    """Where the vectors of some collections live, keyed by chunk id and window. Calls that
    change the database run inside the caller's transaction."""

    def add(self, collection_id: int, chunk_ids: Sequence[int],
            rows: Sequence[np.ndarray]) -> None:
        """Each chunk's windows' vectors: rows[i] is (windows of chunk_ids[i], dimensions)."""

    def missing(self, collection_id: int, limit: int) -> list[tuple[int, list[str]]]:
        """Chunks without vectors yet: (id, its windows' texts to embed), at most `limit`."""

    def count(self, collection_id: int) -> int: ...

    def forget(self, collection_id: int) -> None:
        """Drop all its vectors (its embedding model changed, or it is being removed)."""

    def tidy(self, collection_id: int) -> None:
        """Delete what stays behind of chunks that went (nothing where a cascade does it)."""

    def ranking(self, collection_ids: Sequence[int], query: np.ndarray,
                limit: int) -> list[tuple[int, float]]:
        """(chunk id, cosine distance of its nearest window) of these collections, nearest
        first."""

    def after_add(self, collection_id: int) -> None:
        """Vectors were added and committed: bring what is derived from them up to date (at an
        indexing run's pace: it may build an index)."""

    def close(self) -> None:
        """The index that uses it closes: keep what is derived from its vectors."""


def window_texts(heading: str, text: str) -> list[str]:
    """What is embedded for a chunk: each window under the chunk's heading."""
    return [f"{heading}\n{window}" if heading else window for window in windows(text)]


def embed(embedder: Embedder, batch: Sequence[tuple[int, list[str]]],
          style: str = "") -> list[np.ndarray]:
    """The vectors of `missing`'s chunks, one array per chunk, in one call of the embedder,
    each window as a passage in the model's prefix style (embed_prompts.py)."""
    texts = [text for _, window in batch for text in window]
    rows = embedder(embed_prompts.document_texts(style, texts))
    if len(rows) != len(texts):
        raise ValueError(f"{len(rows)} vectors came back for {len(texts)} texts")
    bounds = np.cumsum([len(window) for _, window in batch])[:-1]
    return list(np.split(np.asarray(rows), bounds))


def driver() -> tuple[Any, str]:
    """The sqlite3 module to open the knowledge database with, and why vectors are off ("" when
    they can be on)."""
    if hasattr(sqlite3.Connection, "enable_load_extension"):
        return sqlite3, ""
    try:
        from pysqlite3 import dbapi2  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return sqlite3, NOT_LOADABLE
    return dbapi2, ""


def load(conn: Any) -> str:
    """Load sqlite-vec into a connection; "" when done, else why not (in words)."""
    try:
        import sqlite_vec
    except ImportError:
        return "sqlite-vec is not installed: search is full-text only."
    try:
        conn.enable_load_extension(True)
        try:
            conn.load_extension(sqlite_vec.loadable_path())
        finally:
            conn.enable_load_extension(False)
        conn.execute("SELECT vec_version()").fetchone()
    except Exception as exc:  # the driver's own error class, or an AttributeError
        return f"sqlite-vec could not be loaded ({exc}): search is full-text only."
    return ""


def blob(vector: np.ndarray) -> bytes:
    return np.asarray(vector, dtype="<f4").tobytes()


def store(conn: Any, chunk_ids: Sequence[int], rows: Sequence[np.ndarray]) -> None:
    conn.executemany(
        "INSERT OR REPLACE INTO chunk_vectors (chunk_id, part, embedding) VALUES (?, ?, ?)",
        [(cid, part, blob(row)) for cid, parts in zip(chunk_ids, rows, strict=True)
         for part, row in enumerate(parts)])


# A chunk has vectors when it has part 0 (qdrant_points: a row): all are added at once.
_HAS_VECTORS = {"chunk_vectors": "v.chunk_id = c.id AND v.part = 0",
                "qdrant_points": "v.chunk_id = c.id"}


def missing(conn: Any, collection_id: int, limit: int,
            table: str = "chunk_vectors") -> list[tuple[int, list[str]]]:
    """Chunks of a collection without vectors in `table` yet: (id, its windows' texts to
    embed), at most `limit`."""
    return [(cid, window_texts(heading, text)) for cid, heading, text in
            conn.execute("SELECT c.id, c.heading, c.text FROM chunks c "
                         "JOIN documents d ON d.id = c.document_id "
                         f"LEFT JOIN {table} v ON {_HAS_VECTORS[table]} "
                         "WHERE d.collection_id = ? AND v.chunk_id IS NULL "
                         "ORDER BY c.id LIMIT ?", (collection_id, limit))]


def count(conn: Any, collection_id: int, table: str = "chunk_vectors") -> int:
    """The chunks with vectors."""
    return int(conn.execute(f"SELECT count(*) FROM {table} v JOIN chunks c ON "
                            f"{_HAS_VECTORS[table]} JOIN documents d ON d.id = c.document_id "
                            "WHERE d.collection_id = ?", (collection_id,)).fetchone()[0])


def forget(conn: Any, collection_id: int) -> None:
    """Drop a collection's vectors (its embedding model changed)."""
    conn.execute("DELETE FROM chunk_vectors WHERE chunk_id IN (SELECT c.id FROM chunks c "
                 "JOIN documents d ON d.id = c.document_id WHERE d.collection_id = ?)",
                 (collection_id,))


def ranking(conn: Any, collection_ids: Sequence[int], query: np.ndarray,
            limit: int) -> list[tuple[int, float]]:
    """(chunk id, cosine distance of its nearest window) of these collections, nearest to the
    query vector first."""
    if not collection_ids:
        return []
    marks = ", ".join("?" * len(collection_ids))
    rows = conn.execute(
        f"SELECT v.chunk_id, min(vec_distance_cosine(v.embedding, ?)) AS distance "
        f"FROM chunk_vectors v JOIN chunks c ON c.id = v.chunk_id "
        f"JOIN documents d ON d.id = c.document_id WHERE d.collection_id IN ({marks}) "
        f"AND length(v.embedding) = ? GROUP BY v.chunk_id HAVING distance IS NOT NULL "
        f"ORDER BY distance, v.chunk_id LIMIT ?",
        (blob(query), *collection_ids, 4 * len(query), limit)).fetchall()
    return [(int(cid), float(distance)) for cid, distance in rows]


def rescored(conn: Any, chunk_ids: Sequence[int], query: np.ndarray,
             limit: int) -> list[tuple[int, float]]:
    """`ranking` over these chunks alone: the same exact distances, for the candidates an
    approximate index gave."""
    found: list[tuple[int, float]] = []
    for start in range(0, len(chunk_ids), 900):  # under SQLite's 999 host parameters
        part = list(chunk_ids[start:start + 900])
        marks = ", ".join("?" * len(part))
        found += [(int(cid), float(distance)) for cid, distance in conn.execute(
            f"SELECT chunk_id, min(vec_distance_cosine(embedding, ?)) AS distance "
            f"FROM chunk_vectors WHERE chunk_id IN ({marks}) AND length(embedding) = ? "
            f"GROUP BY chunk_id HAVING distance IS NOT NULL",
            (blob(query), *part, 4 * len(query)))]
    return sorted(found, key=lambda pair: (pair[1], pair[0]))[:limit]


# Candidates an approximate index gives per chunk wanted (at least CANDIDATES_MIN), rescored
# exactly: with all-MiniLM-L6-v2's vectors of 9,464 windows of real text, 99.8% of the exact
# 80 nearest were among 160 candidates, 99.95% of the 10 nearest among 100 (99.2% among 20).
RESCORED = 2
CANDIDATES_MIN = 100


class SqliteVectorStore:
    """VectorStore in the knowledge database itself (the functions above), searched through
    the approximate indexes of `database` (ann.py) where usearch is installed. `driver`: the
    sqlite3 module that opened it."""

    def __init__(self, conn: Any, database: Path | None = None, driver: Any = sqlite3) -> None:
        self._conn, self._database, self._driver = conn, database, driver
        self._added = False

    @property
    def _indexes(self) -> ann.VectorIndexes | None:
        if self._database is None or ann.missing_library():
            return None
        return ann.for_database(self._database, self._driver)

    def add(self, collection_id: int, chunk_ids: Sequence[int],
            rows: Sequence[np.ndarray]) -> None:
        store(self._conn, chunk_ids, rows)

    def missing(self, collection_id: int, limit: int) -> list[tuple[int, list[str]]]:
        return missing(self._conn, collection_id, limit)

    def count(self, collection_id: int) -> int:
        return count(self._conn, collection_id)

    def forget(self, collection_id: int) -> None:
        forget(self._conn, collection_id)

    def tidy(self, collection_id: int) -> None:
        """Nothing: a chunk's vector goes with it (ON DELETE CASCADE)."""

    def ranking(self, collection_ids: Sequence[int], query: np.ndarray,
                limit: int) -> list[tuple[int, float]]:
        indexes = self._indexes
        if indexes is None:
            return ranking(self._conn, collection_ids, query, limit)
        try:
            candidates, exact = indexes.nearest(self._conn, collection_ids, query,
                                                max(RESCORED * limit, CANDIDATES_MIN))
        except (RuntimeError, ValueError, MemoryError):  # usearch's: a cache, never needed
            log.warning("The vector index failed: every vector is compared", exc_info=True)
            candidates, exact = [], list(collection_ids)
        found = rescored(self._conn, candidates, query, limit)
        if exact:  # no index yet (being built): these are compared with every window
            found += ranking(self._conn, exact, query, limit)
            found.sort(key=lambda pair: (pair[1], pair[0]))
        return found[:limit]

    def after_add(self, collection_id: int) -> None:
        """Add the batch to the collection's approximate index now (an indexing run pays for
        it, not the next search) and save it now and then."""
        if (indexes := self._indexes) is not None:
            self._added = True
            try:
                indexes.ready(self._conn, [collection_id], wait=True)
                indexes.save(self._conn, [collection_id], at_least=ann.SAVE_EVERY)
            except (RuntimeError, ValueError, MemoryError):  # the vectors are stored: the
                log.warning("The vector index was not updated", exc_info=True)  # log has them

    def close(self) -> None:
        """Save the indexes this one added to (the end of an indexing run), if it changed
        enough of them (ann.SAVE_AT_CLOSE: else the log keeps the rest)."""
        if (indexes := self._indexes) is not None and self._added:
            indexes.save(self._conn, at_least=ann.SAVE_AT_CLOSE)

    def drop(self, collection_id: int) -> None:
        """A collection was deleted: its approximate index goes too."""
        if (indexes := self._indexes) is not None:
            indexes.drop(collection_id)


def merged_ranking(groups: Sequence[tuple[VectorStore, Sequence[int]]], query: np.ndarray,
                   limit: int) -> tuple[list[tuple[int, float]] | None, str]:
    """The chunks nearest to the query over the stores' collections, (id, cosine similarity)
    (cosine distances compare across stores), and why a store could not answer ("" all did).
    None when none did: the search is then full text alone."""
    found: list[tuple[int, float]] = []
    answered, note = False, ""
    for store, collection_ids in groups:
        try:
            found += store.ranking(collection_ids, query, limit)
            answered = True
        except VectorStoreError as exc:  # a server down: its collections in full text
            note = f"{exc} Its collections were searched in full text only."
    found.sort(key=lambda pair: pair[1])
    return ([(cid, 1.0 - distance) for cid, distance in found[:limit]] if answered
            else None), note
