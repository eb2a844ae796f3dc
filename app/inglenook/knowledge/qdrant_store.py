"""Vectors of a collection in Qdrant, for collections that outgrow a desktop (qdrant-client).

Only the vectors move: documents, chunks and the full-text index stay in knowledge.db, and so
does the record of which chunks have a point (qdrant_points, schema v4), so that `missing` and
`count` are queries here and never wait on a server. Each collection gets a Qdrant collection of
its own (qdrant_name, unique per collection: several knowledge files may share a server), a
point per window of a chunk (vectors.py), its id the chunk id × MAX_WINDOWS + the window's
number, payload {collection_id, chunk_id, path}, cosine distance, sized by the first batch; a
search groups points by chunk_id, a chunk ranked by its nearest window. SQLite's cascades do
not reach Qdrant: a trigger records each chunk that goes in qdrant_gone, and `tidy` (before
each batch is added) deletes those chunks' points; a search keeps only chunks still recorded,
so a deletion that has not reached the server yet never shows.

qdrant_url '' is Qdrant's local mode in a folder beside the database (paths.py); it locks that
folder, so there is one client per folder and process, shared by every thread's index (local
mode holds its points in memory and warns past 20,000: a first step; big ones want a server).
A URL is a server; its API key, if it needs one, comes from INGLENOOK_QDRANT_API_KEY and is
never stored.
qdrant_client is imported on first use: the app runs without the `qdrant` extra.
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import threading
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import numpy as np

from inglenook.knowledge import vectors
from inglenook.knowledge.chunking import MAX_WINDOWS
from inglenook.knowledge.vectors import VectorStoreError

API_KEY_VARIABLE = "INGLENOOK_QDRANT_API_KEY"
NO_EXTRA = "Qdrant needs the qdrant extra: pip install 'inglenook[qdrant]'."
TIMEOUT_S = 10  # a server that does not answer within this is reported, never waited on
_DETAIL = 200  # characters of a Qdrant error kept in the message
T = TypeVar("T")


def missing_extra() -> str:
    """Why Qdrant cannot be used here, "" when it can."""
    return "" if importlib.util.find_spec("qdrant_client") else NO_EXTRA


def new_name() -> str:
    return f"inglenook-{uuid.uuid4().hex[:16]}"


def checked_backend(backend: str, url: str) -> tuple[str, str]:
    """A new collection's qdrant_url and qdrant_name ("" and "" for the database's own
    backend); ValueError says in one sentence what is wrong."""
    if backend not in ("", "qdrant"):
        raise ValueError(f"{backend!r} is not a vector backend (none, or 'qdrant').")
    url = url.strip()
    if backend != "qdrant":
        if url:
            raise ValueError("A Qdrant URL needs the qdrant backend.")
        return "", ""
    if missing_extra():
        raise ValueError(NO_EXTRA)
    if url and (urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).netloc):
        raise ValueError(f"{url} is not a Qdrant server's URL (http://host:6333).")
    return url, new_name()


@dataclass
class _Shared:
    client: Any
    lock: threading.Lock


_CLIENTS: dict[str, _Shared] = {}
_CLIENTS_LOCK = threading.Lock()


def _client(url: str, local_dir: Path) -> _Shared:
    """The process's client for a server or a local folder, made on first use."""
    key = url or f"local:{local_dir}"
    with _CLIENTS_LOCK:
        if key not in _CLIENTS:
            if missing_extra():
                raise VectorStoreError(NO_EXTRA)
            from qdrant_client import QdrantClient

            if url:
                client = QdrantClient(url=url, api_key=os.environ.get(API_KEY_VARIABLE) or None,
                                      timeout=TIMEOUT_S, check_compatibility=False)
            else:  # shared by threads, each call under the lock below
                local_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
                _check_free(local_dir)
                client = QdrantClient(path=str(local_dir), force_disable_check_same_thread=True)
            _CLIENTS[key] = _Shared(client, threading.Lock())
        return _CLIENTS[key]


def _check_free(local_dir: Path) -> None:
    """Refuse a local folder another program holds, before qdrant-client tries: where it
    fails to lock it, it leaves the lock file open (qdrant-client 1.20)."""
    import portalocker

    lock = local_dir / ".lock"
    if not lock.exists():
        return
    with open(lock, "r+") as held:
        try:
            portalocker.lock(held, portalocker.LockFlags.EXCLUSIVE
                             | portalocker.LockFlags.NON_BLOCKING)
        except portalocker.exceptions.LockException:
            raise VectorStoreError(
                f"Qdrant's folder {local_dir} is in use by another program (Inglenook's window "
                "or a command): local mode is one program at a time, a server can be "
                "shared.") from None
        portalocker.unlock(held)


def close_clients() -> None:
    """Close every client (local mode writes and unlocks its folder); at exit, and in tests."""
    with _CLIENTS_LOCK:
        while _CLIENTS:
            _CLIENTS.popitem()[1].client.close()


atexit.register(close_clients)


def _detail(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= _DETAIL else text[:_DETAIL] + "…"


class QdrantVectorStore:
    """VectorStore in Qdrant for the collections of one knowledge database (its connection)."""

    def __init__(self, conn: Any, local_dir: Path) -> None:
        self._conn, self._local_dir = conn, local_dir

    def _where(self, collection_id: int) -> tuple[str, str]:
        """The collection's server ("" local mode) and its Qdrant collection's name."""
        url, name = self._conn.execute("SELECT qdrant_url, qdrant_name FROM collections "
                                       "WHERE id = ?", (collection_id,)).fetchone()
        if not name:  # a collection made qdrant before v4 named them
            name = new_name()
            self._conn.execute("UPDATE collections SET qdrant_name = ? WHERE id = ?",
                               (name, collection_id))
        return url, name

    def _call(self, url: str, work: Callable[[Any], T]) -> T:
        where = f"at {url}" if url else f"in {self._local_dir}"
        try:
            shared = _client(url, self._local_dir)
            with shared.lock:
                return work(shared.client)
        except VectorStoreError:
            raise
        except Exception as exc:  # the server's, the network's or local mode's own errors
            raise VectorStoreError(f"Qdrant {where} could not be used ({_detail(exc)}).") \
                from exc

    def add(self, collection_id: int, chunk_ids: Sequence[int],
            rows: Sequence[np.ndarray]) -> None:
        from qdrant_client import models

        self.tidy(collection_id)  # first: a chunk id SQLite reused may be among these
        url, name = self._where(collection_id)
        fresh = not self.count(collection_id)  # what it holds is stale (a model change)
        marks = ", ".join("?" * len(chunk_ids))
        paths = dict(self._conn.execute(
            f"SELECT c.id, d.path FROM chunks c JOIN documents d ON d.id = c.document_id "
            f"WHERE c.id IN ({marks})", list(chunk_ids)))
        ids: list[Any] = []
        payloads = []
        for cid, parts in zip(chunk_ids, rows, strict=True):
            ids += [int(cid) * MAX_WINDOWS + part for part in range(len(parts))]
            payloads += [{"collection_id": collection_id, "chunk_id": int(cid),
                          "path": paths.get(cid, "")}] * len(parts)
        flat = np.concatenate([np.asarray(parts, dtype=np.float32) for parts in rows])

        def upsert(client: Any) -> None:
            if fresh and client.collection_exists(name):
                client.delete_collection(name)
            if fresh or not client.collection_exists(name):
                client.create_collection(name, vectors_config=models.VectorParams(
                    size=int(flat.shape[1]), distance=models.Distance.COSINE))
            client.upsert(name, wait=True, points=models.Batch(
                ids=ids, vectors=flat.tolist(), payloads=payloads))

        self._call(url, upsert)
        self._conn.executemany(
            "INSERT OR IGNORE INTO qdrant_points (chunk_id, collection_id) VALUES (?, ?)",
            [(int(cid), collection_id) for cid in chunk_ids])

    def missing(self, collection_id: int, limit: int) -> list[tuple[int, list[str]]]:
        return vectors.missing(self._conn, collection_id, limit, "qdrant_points")

    def count(self, collection_id: int) -> int:
        return vectors.count(self._conn, collection_id, "qdrant_points")

    def forget(self, collection_id: int) -> None:
        """Only the record: the next batch added starts its Qdrant collection afresh."""
        self._conn.execute("DELETE FROM qdrant_points WHERE collection_id = ?", (collection_id,))
        self._conn.execute("DELETE FROM qdrant_gone WHERE collection_id = ?", (collection_id,))

    def tidy(self, collection_id: int) -> None:
        gone: list[Any] = [int(r[0]) for r in self._conn.execute(
            "SELECT chunk_id FROM qdrant_gone WHERE collection_id = ?", (collection_id,))]
        if not gone:
            return
        from qdrant_client import models

        url, name = self._where(collection_id)

        def delete(client: Any) -> None:
            if client.collection_exists(name):
                client.delete(name, wait=True, points_selector=models.FilterSelector(
                    filter=models.Filter(must=[models.FieldCondition(
                        key="chunk_id", match=models.MatchAny(any=gone))])))

        self._call(url, delete)
        self._conn.executemany("DELETE FROM qdrant_gone WHERE collection_id = ? "
                               "AND chunk_id = ?", [(collection_id, cid) for cid in gone])

    def ranking(self, collection_ids: Sequence[int], query: np.ndarray,
                limit: int) -> list[tuple[int, float]]:
        found: list[tuple[int, float]] = []
        vector = np.asarray(query, dtype=np.float32).tolist()
        for cid in collection_ids:
            if not self.count(cid):
                continue  # nothing there yet: no call, and no collection to miss
            url, name = self._where(cid)

            def nearest(client: Any, name: str = name) -> list[Any]:
                return list(client.query_points_groups(name, query=vector, limit=limit,
                                                       group_by="chunk_id", group_size=1,
                                                       with_payload=False).groups)

            found += [(int(g.id), 1.0 - float(g.hits[0].score))
                      for g in self._call(url, nearest)]
        if not found:
            return []
        marks = ", ".join("?" * len(found))
        kept = {r[0] for r in self._conn.execute(
            f"SELECT chunk_id FROM qdrant_points WHERE chunk_id IN ({marks})",
            [cid for cid, _ in found])}
        return sorted((p for p in found if p[0] in kept), key=lambda p: p[1])[:limit]

    def after_add(self, collection_id: int) -> None:
        """Nothing: Qdrant indexes its points itself (its own HNSW)."""

    def close(self) -> None:
        """Nothing: the clients are the process's (close_clients)."""

    def check(self, url: str) -> None:
        """Raise VectorStoreError unless Qdrant answers at `url` ("" local mode)."""
        self._call(url, lambda client: client.get_collections())

    def drop(self, url: str, name: str) -> str:
        """Delete a removed collection's Qdrant collection; "" done, else why not (its name
        is said, to delete it by hand)."""
        if not name:
            return ""
        try:
            self._call(url, lambda client: client.delete_collection(name))
        except VectorStoreError as exc:
            return f"{exc} Its vectors stay there, in the Qdrant collection {name}."
        return ""
