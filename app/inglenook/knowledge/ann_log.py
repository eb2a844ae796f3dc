"""The database's side of the approximate indexes (ann.py): the collections they belong to,
vector_log (schema v8: every change to chunk_vectors, by trigger) and the vectors as they are
now. Plain SQL on the caller's connection; nothing here needs sqlite-vec."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

from inglenook.knowledge.ann_files import Owner

_IDS = 900  # chunk ids per IN (…) list: under SQLite's 999 host parameters


def owners(conn: Any) -> dict[int, Owner]:
    """The collections whose vectors live in chunk_vectors (backend ''), with a model."""
    return {cid: Owner(cid, float(created), model) for cid, created, model in conn.execute(
        "SELECT id, created_at, embed_model FROM collections "
        "WHERE backend = '' AND embed_model != ''")}


def head(conn: Any) -> int:
    """The seq of the last change logged (0: none yet); AUTOINCREMENT keeps it when the log
    is trimmed."""
    row = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'vector_log'").fetchone()
    return int(row[0]) if row else 0


def oldest(conn: Any) -> int:
    """The first seq still in the log (head + 1 when it is empty)."""
    row = conn.execute("SELECT min(seq) FROM vector_log").fetchone()
    return int(row[0]) if row and row[0] is not None else head(conn) + 1


def changed(conn: Any, after: int, upto: int) -> dict[int, int]:
    """{chunk id: the last seq that changed its vectors} for after < seq <= upto."""
    return {int(cid): int(seq) for cid, seq in conn.execute(
        "SELECT chunk_id, max(seq) FROM vector_log WHERE seq > ? AND seq <= ? "
        "GROUP BY chunk_id", (after, upto))}


def vectors_now(conn: Any, chunk_ids: Sequence[int], collection_ids: Sequence[int]
                ) -> Iterator[tuple[int, int, bytes]]:
    """(collection id, chunk id, float32 blob) of these chunks' windows as they are now, for
    the chunks in these collections."""
    kept = ", ".join("?" * len(collection_ids))
    for start in range(0, len(chunk_ids), _IDS):
        part = list(chunk_ids[start:start + _IDS])
        marks = ", ".join("?" * len(part))
        yield from conn.execute(
            f"SELECT d.collection_id, v.chunk_id, v.embedding FROM chunk_vectors v "
            f"JOIN chunks c ON c.id = v.chunk_id JOIN documents d ON d.id = c.document_id "
            f"WHERE v.chunk_id IN ({marks}) AND d.collection_id IN ({kept})",
            (*part, *collection_ids))


def count(conn: Any, collection_id: int, dimensions: int | None = None) -> int:
    """The collection's vectors (of that many dimensions)."""
    size = "" if dimensions is None else " AND length(v.embedding) = ?"
    args = (collection_id,) if dimensions is None else (collection_id, 4 * dimensions)
    return int(conn.execute(
        "SELECT count(*) FROM chunk_vectors v JOIN chunks c ON c.id = v.chunk_id "
        "JOIN documents d ON d.id = c.document_id WHERE d.collection_id = ?" + size,
        args).fetchone()[0])


@contextlib.contextmanager
def snapshot(conn: Any) -> Iterator[None]:
    """One read transaction (WAL: one consistent view while others write), unless the caller
    is in one already."""
    if conn.in_transaction:
        yield
        return
    conn.execute("BEGIN")
    try:
        yield
    finally:
        conn.execute("COMMIT")
