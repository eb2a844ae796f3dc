"""The knowledge index on SQLite FTS5 (BM25), in its own database file (paths.py).

Its collections, their documents and passages (chunks, and the chunks' full-text index), and
the vectors of a collection that has an embedding model, kept in its backend's store: this file
(vectors.SqliteVectorStore) or Qdrant (qdrant_store.py). The schema and its migrations are
schema.py's; searching is search.py's (SqliteFtsIndex.search hands it on).
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from inglenook import paths
from inglenook.knowledge import qdrant_store, schema, vectors
from inglenook.knowledge.index import Chunk, Collection, Document, Hit, IndexStats
from inglenook.knowledge.search import Searcher
from inglenook.knowledge.vectors import Embedder, VectorStore
from inglenook.store.db import backup, connect, transaction

# What a database call may raise: Python's sqlite3's errors, or pysqlite3's where vectors.py
# opens the file with it (its classes are its own).
DATABASE_ERRORS: tuple[type[Exception], ...] = (sqlite3.Error, vectors.driver()[0].Error)


_OPENING = threading.Lock()

class KnowledgeError(Exception):
    """A collection that does not exist or already does, a database that cannot be opened;
    str() is one sentence for the user."""


class SqliteFtsIndex:
    """KnowledgeIndex on SQLite FTS5 (and vectors, see above), and the collections it holds.
    One per thread. `vectors_off` says why vectors cannot be used here ("" they can)."""

    def __init__(self, path: Path | None = None, embedder: Embedder | None = None,
                 qdrant_dir: Path | None = None) -> None:
        """`qdrant_dir`: Qdrant's local mode folder (paths.py's by default)."""
        self.path = path or paths.knowledge_database_file()
        self.qdrant_dir = qdrant_dir or paths.knowledge_qdrant_dir()
        self.embedder = embedder
        # An embedder for each other model the searched collections use (the chat's: the
        # router loads each beside the chat model), None: only `embedder`'s collections have
        # their vectors searched.
        self.embedder_for: Callable[[str], Embedder] | None = None
        self.search_note = ""  # why the last search used no vectors, when it could have
        module, self.vectors_off = vectors.driver()
        self._errors = DATABASE_ERRORS
        try:
            with _OPENING:  # one migration at a time: the window opens it on two threads
                self._conn = connect(self.path, driver=module)
                if not self.vectors_off:
                    self.vectors_off = vectors.load(self._conn)
                self._migrate()
            # How many chunks hold each word: a view of the index itself, nothing stored.
            self._conn.execute("CREATE VIRTUAL TABLE temp.chunks_vocab "
                               "USING fts5vocab(main, chunks_fts, 'row')")
        except self._errors as exc:
            raise KnowledgeError(f"The knowledge index {self.path} cannot be opened ({exc}). "
                                 "It can be deleted and rebuilt from the folders.") from exc
        self._sqlite_vectors = vectors.SqliteVectorStore(self._conn, self.path, module)
        self._qdrant = qdrant_store.QdrantVectorStore(self._conn, self.qdrant_dir)
        self.searcher = Searcher(self, self._conn)

    def close(self) -> None:
        try:
            self._sqlite_vectors.close()  # an indexing run's approximate indexes are saved
        except self._errors:
            pass  # saved at the next run; the log keeps what they lack
        finally:
            self._conn.close()

    def _migrate(self) -> None:
        version = self._conn.execute("PRAGMA user_version").fetchone()[0]
        if version > schema.LATEST_VERSION:
            raise KnowledgeError(f"The knowledge index {self.path} was written by a newer "
                                 f"version of Inglenook (schema v{version}).")
        if version and version < schema.LATEST_VERSION:
            backup(self._conn, self.path.with_name(f"{self.path.name}.bak-v{version}"),
                   vectors.driver()[0])
        for target in range(version + 1, schema.LATEST_VERSION + 1):
            with transaction(self._conn):
                # Another thread or process may have migrated it since: the window lists the
                # collections on one thread while it makes one on another, on a fresh file.
                if self._conn.execute("PRAGMA user_version").fetchone()[0] >= target:
                    continue
                schema.MIGRATIONS[target - 1](self._conn)
                self._conn.execute(f"PRAGMA user_version = {target}")

    # ---- collections ----------------------------------------------------------------------

    def create_collection(self, name: str, roots: Sequence[str], follow_links: bool = False,
                          embed_model: str = "", backend: str = "",
                          qdrant_url: str = "") -> Collection:
        name = " ".join(name.split())
        if not name:
            raise KnowledgeError("A collection needs a name.")
        qdrant_url, qdrant_name = self._checked_backend(backend, qdrant_url)
        try:
            with transaction(self._conn):
                self._conn.execute(
                    "INSERT INTO collections (name, roots, follow_links, created_at, "
                    "embed_model, backend, qdrant_url, qdrant_name) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (name, json.dumps(list(roots)), int(follow_links), time.time(),
                     embed_model, backend, qdrant_url, qdrant_name))
        except self._errors as exc:
            if "UNIQUE" not in str(exc):
                raise
            raise KnowledgeError(f"There is already a collection named {name!r}.") from exc
        return self.collection(name)

    @staticmethod
    def _checked_backend(backend: str, qdrant_url: str) -> tuple[str, str]:
        try:
            return qdrant_store.checked_backend(backend, qdrant_url)
        except ValueError as exc:
            raise KnowledgeError(str(exc)) from None

    def check_backend(self, backend: str, qdrant_url: str = "") -> None:
        """That vectors can live there: a well-formed URL, the qdrant extra, and Qdrant
        answering (a server lists its collections, local mode's folder is free); KnowledgeError
        says why not. May wait on a server (qdrant_store.TIMEOUT_S): off the GUI thread."""
        self._checked_backend(backend, qdrant_url)
        if backend == "qdrant":
            try:
                self._qdrant.check(qdrant_url.strip())
            except vectors.VectorStoreError as exc:
                raise KnowledgeError(str(exc)) from None

    def set_backend(self, name: str, backend: str, qdrant_url: str = "") -> None:
        """Move a collection's vectors to another backend (or server): those it had are
        forgotten, and the next indexing run embeds its passages again."""
        old = self.collection(name)
        if (old.backend, old.qdrant_url) == (backend, qdrant_url.strip()):
            return
        qdrant_url, qdrant_name = self._checked_backend(backend, qdrant_url)
        cid = self._id(old.name)
        with transaction(self._conn):
            self.vector_store(old).forget(cid)
            self._conn.execute("UPDATE collections SET backend = ?, qdrant_url = ?, "
                               "qdrant_name = ? WHERE id = ?",
                               (backend, qdrant_url, qdrant_name, cid))
        if old.backend == "qdrant":
            self._qdrant.drop(old.qdrant_url, old.qdrant_name)  # best effort: none use it

    def set_roots(self, name: str, roots: Sequence[str]) -> None:
        with transaction(self._conn):
            self._conn.execute("UPDATE collections SET roots = ? WHERE id = ?",
                               (json.dumps(list(roots)), self._id(name)))

    def collections(self) -> list[Collection]:
        rows = self._conn.execute("SELECT name, roots, follow_links, indexed_at, embed_model, "
                                  "embed_error, watch, backend, qdrant_url, qdrant_name, "
                                  "embed_prompts "
                                  "FROM collections ORDER BY name").fetchall()
        return [Collection(n, tuple(json.loads(r)), bool(f), at, m, e, bool(w), b, q, qn, ep)
                for n, r, f, at, m, e, w, b, q, qn, ep in rows]

    def set_follow_links(self, name: str, follow: bool) -> None:
        with transaction(self._conn):
            self._conn.execute("UPDATE collections SET follow_links = ? WHERE id = ?",
                               (int(follow), self._id(name)))

    def set_watch(self, name: str, watch: bool) -> None:
        with transaction(self._conn):
            self._conn.execute("UPDATE collections SET watch = ? WHERE id = ?",
                               (int(watch), self._id(name)))

    # ---- vectors --------------------------------------------------------------------------

    def vector_store(self, collection: Collection) -> VectorStore:
        """Where this collection's vectors are kept: the index's file, or Qdrant."""
        return self._qdrant if collection.backend == "qdrant" else self._sqlite_vectors

    def vectors_unavailable(self, name: str) -> str:
        """Why this collection's vectors cannot be made or searched here ("" they can)."""
        if self.collection(name).backend == "qdrant":
            return qdrant_store.missing_extra()
        return self.vectors_off

    def set_embed_model(self, name: str, model: str) -> None:
        """Name the collection's embedding model ("" none); its vectors of another go."""
        cid = self._id(name)
        with transaction(self._conn):
            if (collection := self.collection(name)).embed_model != model:
                self.vector_store(collection).forget(cid)
            self._conn.execute("UPDATE collections SET embed_model = ?, embed_error = '' "
                               "WHERE id = ?", (model, cid))

    def set_embed_prompts(self, name: str, style: str) -> None:
        """Record the prefix style its vectors are made with; vectors of another style go."""
        cid = self._id(name)
        with transaction(self._conn):
            if (collection := self.collection(name)).embed_prompts != style:
                self.vector_store(collection).forget(cid)
            self._conn.execute("UPDATE collections SET embed_prompts = ? WHERE id = ?",
                               (style, cid))

    def set_embed_error(self, name: str, error: str) -> None:
        with transaction(self._conn):
            self._conn.execute("UPDATE collections SET embed_error = ? WHERE id = ?",
                               (error, self._id(name)))

    def missing_vectors(self, name: str, limit: int) -> list[tuple[int, list[str]]]:
        """Chunks still without vectors: (id, its windows' texts to embed)."""
        return self.vector_store(self.collection(name)).missing(self._id(name), limit)

    def add_vectors(self, name: str, chunk_ids: Sequence[int],
                    rows: Sequence[np.ndarray]) -> None:
        """rows[i]: the vectors of chunk_ids[i]'s windows. Raises VectorStoreError where the
        store cannot take them (Qdrant down)."""
        store = self.vector_store(self.collection(name))
        with transaction(self._conn):
            store.add(self._id(name), chunk_ids, rows)
        store.after_add(self._id(name))

    def tidy_vectors(self, name: str) -> None:
        """Delete the vectors of passages that went, where their store does not do it itself
        (Qdrant); raises VectorStoreError."""
        with transaction(self._conn):
            self.vector_store(self.collection(name)).tidy(self._id(name))

    def vector_count(self, name: str) -> int:
        return self.vector_store(self.collection(name)).count(self._id(name))

    def collection(self, name: str) -> Collection:
        for found in self.collections():
            if found.name.casefold() == name.casefold():
                return found
        raise KnowledgeError(f"There is no collection named {name!r}.")

    def remove_collection(self, name: str, drop: bool = True) -> str:
        """Forget a collection; "" done, else why its vectors in Qdrant stayed there. With
        drop False, its Qdrant collection is left for `drop_vectors` (which may wait on a
        server: the window calls it off the GUI thread)."""
        collection, cid = self.collection(name), self._id(name)
        with transaction(self._conn):
            self._conn.execute("DELETE FROM collections WHERE id = ?", (cid,))
            self._conn.execute("DELETE FROM qdrant_gone WHERE collection_id = ?", (cid,))
        self._sqlite_vectors.drop(cid)
        return self.drop_vectors(collection) if drop else ""

    def drop_vectors(self, collection: Collection) -> str:
        """Delete a removed collection's Qdrant collection: "" done (or none), else why not."""
        if collection.backend != "qdrant":
            return ""
        return self._qdrant.drop(collection.qdrant_url, collection.qdrant_name)

    def collection_id(self, name: str) -> int:
        return self._id(name)

    def _id(self, name: str) -> int:
        row = self._conn.execute("SELECT id FROM collections WHERE name = ?",
                                 (name,)).fetchone()
        if row is None:
            raise KnowledgeError(f"There is no collection named {name!r}.")
        return int(row[0])

    def set_problems(self, name: str, problems: Sequence[tuple[str, str]]) -> None:
        """The files of the last scan that were not indexed: (path, reason); and when."""
        cid = self._id(name)
        with transaction(self._conn):
            self._conn.execute("DELETE FROM problems WHERE collection_id = ?", (cid,))
            self._conn.executemany(
                "INSERT INTO problems (collection_id, path, reason) VALUES (?, ?, ?)",
                [(cid, path, reason) for path, reason in problems])
            self._conn.execute("UPDATE collections SET indexed_at = ? WHERE id = ?",
                               (time.time(), cid))

    def problems(self, name: str) -> list[tuple[str, str]]:
        return [(p, r) for p, r in self._conn.execute(
            "SELECT path, reason FROM problems WHERE collection_id = ? ORDER BY path",
            (self._id(name),))]

    # ---- KnowledgeIndex -------------------------------------------------------------------

    def add_document(self, collection: str, document: Document,
                     chunks: Sequence[Chunk]) -> None:
        cid = self._id(collection)
        with transaction(self._conn):
            self._conn.execute("DELETE FROM documents WHERE collection_id = ? AND path = ?",
                               (cid, document.path))
            cur = self._conn.execute(
                "INSERT INTO documents (collection_id, path, size, mtime_ns, sha256, kind, "
                "reader, note) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (cid, document.path, document.size, document.mtime_ns, document.sha256,
                 document.kind, document.reader, document.note))
            doc_id = cur.lastrowid
            self._conn.executemany(
                "INSERT INTO chunks (document_id, position, text, heading, line_start, "
                "line_end, page) VALUES (?, ?, ?, ?, ?, ?, ?)",
                [(doc_id, n, c.text, c.heading, c.line_start, c.line_end, c.page)
                 for n, c in enumerate(chunks)])

    def touch_document(self, collection: str, document: Document) -> None:
        """Same passages, a new record of the file (saved again unchanged, or read again by a
        newer reader that made the same passages): its passages and their vectors stay."""
        with transaction(self._conn):
            self._conn.execute(
                "UPDATE documents SET size = ?, mtime_ns = ?, sha256 = ?, reader = ?, note = ? "
                "WHERE collection_id = ? AND path = ?",
                (document.size, document.mtime_ns, document.sha256, document.reader,
                 document.note, self._id(collection), document.path))

    def document_chunks(self, collection: str, path: str) -> list[Chunk]:
        """The passages of a document as stored, in order."""
        return [Chunk(text, start, end, page, heading) for text, heading, start, end, page in
                self._conn.execute(
                    "SELECT c.text, c.heading, c.line_start, c.line_end, c.page FROM chunks c "
                    "JOIN documents d ON d.id = c.document_id WHERE d.collection_id = ? "
                    "AND d.path = ? ORDER BY c.position", (self._id(collection), path))]

    def notes(self, name: str) -> list[tuple[str, str]]:
        """The documents indexed only in part: (path, what was not read)."""
        return [(p, n) for p, n in self._conn.execute(
            "SELECT path, note FROM documents WHERE collection_id = ? AND note != '' "
            "ORDER BY path", (self._id(name),))]

    def forget_readings(self, name: str) -> None:
        """Make every document of the collection look read by no reader: the next indexing
        run reads them all again from scratch (and replaces their passages and vectors), and
        a run cancelled half-way leaves the rest to the run after it."""
        with transaction(self._conn):
            self._conn.execute("UPDATE documents SET reader = -1 WHERE collection_id = ?",
                               (self._id(name),))

    def remove_document(self, collection: str, path: str) -> None:
        with transaction(self._conn):
            self._conn.execute("DELETE FROM documents WHERE collection_id = ? AND path = ?",
                               (self._id(collection), path))

    def documents(self, collection: str) -> dict[str, Document]:
        rows = self._conn.execute(
            "SELECT path, size, mtime_ns, sha256, kind, reader, note FROM documents "
            "WHERE collection_id = ?", (self._id(collection),))
        return {row[0]: Document(*row) for row in rows}

    def search(self, collections: Sequence[str], query: str, limit: int = 5) -> list[Hit]:
        """BM25, fused with the vectors' ranking of each embedding model the collections use
        (where there is an embedder of it): search.Searcher."""
        hits = self.searcher.search(collections, query, limit)
        self.search_note = self.searcher.note
        return hits
    def stats(self, collection: str) -> IndexStats:
        docs, chunks, chars = self._conn.execute(
            "SELECT count(DISTINCT d.id), count(c.id), coalesce(sum(length(c.text)), 0) "
            "FROM documents d LEFT JOIN chunks c ON c.document_id = d.id "
            "WHERE d.collection_id = ?", (self._id(collection),)).fetchone()
        return IndexStats(docs, chunks, chars)

    def rebuild_full_text(self) -> bool:
        """Rebuild the full-text index from the chunks when it disagrees with them (FTS5's
        integrity check), whether it was rebuilt. It is one table for every collection: a
        rebuild rewrites all of them, holding the write lock, so a collection's Rebuild
        (indexer.py) does it only for a damaged table; its own rows are rewritten anyway, as
        its files are read again."""
        try:
            self._conn.execute("INSERT INTO chunks_fts (chunks_fts, rank) "
                               "VALUES ('integrity-check', 1)")
            return False
        except self._errors:  # "malformed": the index and the chunks disagree
            with transaction(self._conn):
                self._conn.execute("INSERT INTO chunks_fts (chunks_fts) VALUES ('rebuild')")
            return True
