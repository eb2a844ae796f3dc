"""The knowledge database's schema, as migrations (the rules of store/schema.py hold here):
MIGRATIONS[n - 1] takes the file from v(n-1) to vn; never edit a step, append one.

v1:
- A collection is a name and its roots (folders and files, absolute paths, JSON list), with
  whether symbolic links out of them are followed.
- A document is one file of a collection; what it was when read (size, mtime, hash) decides
  whether a re-index reads it again. Its chunks go with it (ON DELETE CASCADE).
- chunks_fts is an external-content FTS5 table over the chunks, kept in step by triggers.
  Dense vectors, when they come, get their own table keyed by chunk id (sqlite-vec's vec0 in
  this same file), filled beside the FTS rows; nothing here needs to change for them.
- problems: every file of the last scan that was not indexed, with the reason in words.

v2:
- A collection may name an embedding model (a GGUF's path; '' none) and keeps the last
  failure to embed its chunks, in words ('' none), so that it is shown, never lost.
- chunk_vectors: one unit vector per chunk (float32 blob, sqlite-vec's format) of a collection
  with an embedding model, going with its chunk (knowledge/vectors.py).

v3:
- A collection is watched for changes or not (watch, 1 by default), and says where its
  vectors live: backend '' keeps them in this file, 'qdrant' in Qdrant (qdrant_url '' its
  local mode under the data dir, else a server's URL). Documents, chunks and full-text stay
  here whatever the backend.

v4:
- qdrant_name: the name of a Qdrant collection's own collection on its server (made unique
  when it is created: several knowledge files may share one server, and SQLite reuses ids).
- qdrant_points: the chunks that have a point in Qdrant, going with their chunk, so which are
  missing stays a query here and a search never returns a point whose chunk is gone.
- qdrant_gone: points to delete from Qdrant (their chunk went; a trigger records each), kept
  until the server has deleted them, so a server that was down loses nothing but time.

v5:
- A chunk has a vector per window (a sentence or two, chunking.windows) instead of one for the
  whole chunk: chunk_vectors is keyed by (chunk_id, part). The vectors of v4 stand for whole
  chunks and are dropped, in SQLite and (by forgetting which chunks have points, so the next
  batch starts the Qdrant collection afresh) in Qdrant; the next indexing run embeds them
  again. Documents, chunks and the full-text index are kept as they are.

v6:
- embed_prompts: the prefix style its vectors were made with (knowledge/embed_prompts.py; ''
  none, as every vector before v6 was made). A style that differs from its model's now makes
  the next indexing run embed its passages again.

v7:
- A document records the version of the reader that made its passages (reader; indexer.py's
  READER_VERSION, bumped whenever converting or chunking changes): one read by an older reader
  is read again by the next indexing run even when the file is unchanged. Those before get 0.
- And what of it was left unread ('' none): a PDF or CSV read only up to its cap is indexed as
  far as it was read and listed with this note for as long as it stays indexed.

v8:
- vector_log: every change to chunk_vectors (a row added, replaced or deleted, by a batch
  embedded, a cascade from a chunk that went, a collection forgotten), recorded by triggers as
  (seq, chunk id), seq never reused (AUTOINCREMENT). The approximate indexes derived from the
  vectors (knowledge/ann.py) apply it to stay in step with the database whichever process
  wrote it, and delete what every saved index has applied. Existing vectors are not logged:
  an index that does not exist yet is built from chunk_vectors itself.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from inglenook.store.schema import statements

V1_SQL = """
CREATE TABLE collections (
    id            INTEGER PRIMARY KEY,
    name          TEXT NOT NULL UNIQUE COLLATE NOCASE,
    roots         TEXT NOT NULL DEFAULT '[]',
    follow_links  INTEGER NOT NULL DEFAULT 0,
    created_at    REAL NOT NULL,
    indexed_at    REAL
);

CREATE TABLE documents (
    id             INTEGER PRIMARY KEY,
    collection_id  INTEGER NOT NULL REFERENCES collections (id) ON DELETE CASCADE,
    path           TEXT NOT NULL,
    size           INTEGER NOT NULL,
    mtime_ns       INTEGER NOT NULL,
    sha256         TEXT NOT NULL,
    kind           TEXT NOT NULL,
    UNIQUE (collection_id, path)
);

CREATE TABLE chunks (
    id           INTEGER PRIMARY KEY,
    document_id  INTEGER NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
    position     INTEGER NOT NULL,
    text         TEXT NOT NULL,
    heading      TEXT NOT NULL DEFAULT '',
    line_start   INTEGER NOT NULL,
    line_end     INTEGER NOT NULL,
    page         INTEGER
);
CREATE INDEX chunks_document ON chunks (document_id, position);

CREATE VIRTUAL TABLE chunks_fts USING fts5 (
    text, heading, content = 'chunks', content_rowid = 'id',
    tokenize = 'unicode61 remove_diacritics 2'
);
CREATE TRIGGER chunks_fts_insert AFTER INSERT ON chunks BEGIN
    INSERT INTO chunks_fts (rowid, text, heading) VALUES (new.id, new.text, new.heading);
END;
CREATE TRIGGER chunks_fts_delete AFTER DELETE ON chunks BEGIN
    INSERT INTO chunks_fts (chunks_fts, rowid, text, heading)
        VALUES ('delete', old.id, old.text, old.heading);
END;

CREATE TABLE problems (
    id             INTEGER PRIMARY KEY,
    collection_id  INTEGER NOT NULL REFERENCES collections (id) ON DELETE CASCADE,
    path           TEXT NOT NULL,
    reason         TEXT NOT NULL
);
CREATE INDEX problems_collection ON problems (collection_id);
"""


def _v1(conn: sqlite3.Connection) -> None:
    for statement in statements(V1_SQL):
        conn.execute(statement)


V2_SQL = """
ALTER TABLE collections ADD COLUMN embed_model TEXT NOT NULL DEFAULT '';
ALTER TABLE collections ADD COLUMN embed_error TEXT NOT NULL DEFAULT '';
CREATE TABLE chunk_vectors (
    chunk_id   INTEGER PRIMARY KEY REFERENCES chunks (id) ON DELETE CASCADE,
    embedding  BLOB NOT NULL
);
"""


def _v2(conn: sqlite3.Connection) -> None:
    for statement in statements(V2_SQL):
        conn.execute(statement)


V3_SQL = """
ALTER TABLE collections ADD COLUMN watch INTEGER NOT NULL DEFAULT 1;
ALTER TABLE collections ADD COLUMN backend TEXT NOT NULL DEFAULT '';
ALTER TABLE collections ADD COLUMN qdrant_url TEXT NOT NULL DEFAULT '';
"""


def _v3(conn: sqlite3.Connection) -> None:
    for statement in statements(V3_SQL):
        conn.execute(statement)


V4_SQL = """
ALTER TABLE collections ADD COLUMN qdrant_name TEXT NOT NULL DEFAULT '';
CREATE TABLE qdrant_points (
    chunk_id       INTEGER PRIMARY KEY REFERENCES chunks (id) ON DELETE CASCADE,
    collection_id  INTEGER NOT NULL
);
CREATE INDEX qdrant_points_collection ON qdrant_points (collection_id);
CREATE TABLE qdrant_gone (
    collection_id  INTEGER NOT NULL,
    chunk_id       INTEGER NOT NULL,
    PRIMARY KEY (collection_id, chunk_id)
);
CREATE TRIGGER qdrant_points_delete AFTER DELETE ON qdrant_points BEGIN
    INSERT OR IGNORE INTO qdrant_gone (collection_id, chunk_id)
        VALUES (old.collection_id, old.chunk_id);
END;
"""


def _v4(conn: sqlite3.Connection) -> None:
    for statement in statements(V4_SQL):
        conn.execute(statement)


V5_SQL = """
DROP TABLE chunk_vectors;
CREATE TABLE chunk_vectors (
    chunk_id   INTEGER NOT NULL REFERENCES chunks (id) ON DELETE CASCADE,
    part       INTEGER NOT NULL,
    embedding  BLOB NOT NULL,
    PRIMARY KEY (chunk_id, part)
);
DELETE FROM qdrant_points;
DELETE FROM qdrant_gone;
"""


def _v5(conn: sqlite3.Connection) -> None:
    for statement in statements(V5_SQL):
        conn.execute(statement)


V6_SQL = """
ALTER TABLE collections ADD COLUMN embed_prompts TEXT NOT NULL DEFAULT '';
"""


def _v6(conn: sqlite3.Connection) -> None:
    for statement in statements(V6_SQL):
        conn.execute(statement)


V7_SQL = """
ALTER TABLE documents ADD COLUMN reader INTEGER NOT NULL DEFAULT 0;
ALTER TABLE documents ADD COLUMN note TEXT NOT NULL DEFAULT '';
CREATE INDEX documents_noted ON documents (collection_id) WHERE note != '';
"""


def _v7(conn: sqlite3.Connection) -> None:
    for statement in statements(V7_SQL):
        conn.execute(statement)


V8_SQL = """
CREATE TABLE vector_log (
    seq       INTEGER PRIMARY KEY AUTOINCREMENT,
    chunk_id  INTEGER NOT NULL
);
CREATE TRIGGER chunk_vectors_log_insert AFTER INSERT ON chunk_vectors BEGIN
    INSERT INTO vector_log (chunk_id) VALUES (new.chunk_id);
END;
CREATE TRIGGER chunk_vectors_log_update AFTER UPDATE ON chunk_vectors BEGIN
    INSERT INTO vector_log (chunk_id) VALUES (old.chunk_id);
    INSERT INTO vector_log (chunk_id) VALUES (new.chunk_id);
END;
CREATE TRIGGER chunk_vectors_log_delete AFTER DELETE ON chunk_vectors BEGIN
    INSERT INTO vector_log (chunk_id) VALUES (old.chunk_id);
END;
"""


def _v8(conn: sqlite3.Connection) -> None:
    for statement in statements(V8_SQL):
        conn.execute(statement)


MIGRATIONS: list[Callable[[sqlite3.Connection], None]] = [_v1, _v2, _v3, _v4, _v5, _v6, _v7,
                                                          _v8]
LATEST_VERSION = len(MIGRATIONS)
