"""Reading a collection again: after an update that changes how files are read (the reader's
version, schema v7, migrated from v5), on the user's Rebuild, and files read only up to a cap,
listed as read in part for as long as they are indexed so."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from inglenook.knowledge import collections as kc
from inglenook.knowledge import convert, schema, vectors
from inglenook.knowledge.chunking import chunk_pages
from inglenook.knowledge.fts import SqliteFtsIndex
from inglenook.knowledge.indexer import READER_VERSION, Indexer, Progress
from inglenook.store.schema import statements
from tests.unit.knowledge.test_vectors import WordEmbedder
from tests.unit.knowledge.test_vectors import folder as pets_folder

NOTES = "# Owls\n\nThe owl sleeps in the copper lantern.\n"
CODE = "def harbour():\n    return 'tide'\n"


def chunk_ids(index: SqliteFtsIndex) -> set[int]:
    return {row[0] for row in index._conn.execute("SELECT id FROM chunks")}


def readers(index: SqliteFtsIndex, name: str) -> set[int]:
    return {d.reader for d in index.documents(name).values()}


def v5_index(tmp_path: Path, docs: Path) -> Path:
    """A knowledge.db of schema v5 that has read docs/ with the reader of its day: notes.md's
    passages as today's reader makes them, code.py's as it made them no longer."""
    path = tmp_path / "k.db"
    conn = sqlite3.connect(path)
    for step in (schema.V1_SQL, schema.V2_SQL, schema.V3_SQL, schema.V4_SQL, schema.V5_SQL):
        for statement in statements(step):
            conn.execute(statement)
    conn.execute("INSERT INTO collections (id, name, roots, created_at) VALUES (1, 'Docs', ?, 0)",
                 (f'["{docs}"]',))
    for doc_id, name, kind in ((1, "notes.md", "markdown"), (2, "code.py", "code")):
        file = docs / name
        info = file.stat()
        conn.execute("INSERT INTO documents VALUES (?, 1, ?, ?, ?, ?, ?)",
                     (doc_id, str(file), info.st_size, info.st_mtime_ns,
                      hashlib.sha256(file.read_bytes()).hexdigest(), kind))
    (notes,) = chunk_pages([convert.Page(NOTES)])
    conn.execute("INSERT INTO chunks (id, document_id, position, text, heading, line_start, "
                 "line_end) VALUES (1, 1, 0, ?, ?, ?, ?)",
                 (notes.text, notes.heading, notes.line_start, notes.line_end))
    conn.execute("INSERT INTO chunks (id, document_id, position, text, line_start, line_end) "
                 "VALUES (2, 2, 0, 'as an old reader cut it', 1, 2)")
    conn.execute("INSERT INTO chunk_vectors VALUES (1, 0, ?)", (vectors.blob(np.ones(64)),))
    conn.execute("PRAGMA user_version = 5")
    conn.commit()
    conn.close()
    return path


def test_a_v5_index_reads_its_unchanged_files_again_once_keeping_what_did_not_change(
        tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "notes.md").write_text(NOTES)
    (docs / "code.py").write_text(CODE)
    index = SqliteFtsIndex(v5_index(tmp_path, docs))
    assert (tmp_path / "k.db.bak-v5").exists()
    assert readers(index, "Docs") == {0}  # read by a reader older than any with a version
    assert index.notes("Docs") == []
    report = Indexer(index, "Docs").run()
    # Both files are as they were on disk; both are read again, and the one whose passages
    # the new reader makes differently is updated.
    assert (report.added, report.updated, report.unchanged) == (0, 1, 1)
    assert readers(index, "Docs") == {READER_VERSION}
    assert index.search(["Docs"], "harbour tide")[0].chunk.text == CODE.strip()
    assert 1 in chunk_ids(index)  # notes.md's passage kept, and with it its vector
    assert index._conn.execute("SELECT count(*) FROM chunk_vectors").fetchone()[0] == 1
    again = Indexer(index, "Docs").run()
    assert (again.updated, again.unchanged) == (0, 2)
    index.close()


def test_rebuild_reads_every_file_again_and_embeds_its_passages_again(tmp_path: Path) -> None:
    embedder = WordEmbedder()
    index = SqliteFtsIndex(embedder=embedder)
    index.create_collection("Pets", [str(pets_folder(tmp_path))], embed_model=embedder.model)
    first = Indexer(index, "Pets", embedder=embedder).run()
    assert first.added == 3 and first.embedded == 3
    before, calls = chunk_ids(index), embedder.calls
    unchanged = Indexer(index, "Pets", embedder=embedder).run()
    assert unchanged.unchanged == 3 and embedder.calls == calls  # nothing read or embedded
    rebuilt = Indexer(index, "Pets", embedder=embedder, rebuild=True).run()
    assert (rebuilt.updated, rebuilt.unchanged, rebuilt.embedded) == (3, 0, 3)
    assert chunk_ids(index).isdisjoint(before) and embedder.calls > calls
    assert index.vector_count("Pets") == 3
    assert index.search(["Pets"], "feline", 1)[0].path.endswith("cat.md")  # by vector
    index.close()


def test_a_rebuild_cancelled_half_way_is_finished_by_the_next_run(tmp_path: Path) -> None:
    index = SqliteFtsIndex()
    index.create_collection("Pets", [str(pets_folder(tmp_path))])
    Indexer(index, "Pets").run()
    seen: list[Progress] = []

    def after_one() -> bool:
        return any(p.total is not None and p.done == 1 for p in seen)

    cancelled = Indexer(index, "Pets", seen.append, after_one, rebuild=True).run()
    assert cancelled.cancelled and cancelled.updated == 1
    finished = Indexer(index, "Pets").run()
    assert (finished.updated, finished.unchanged) == (2, 1)  # the rest, read from scratch
    assert readers(index, "Pets") == {READER_VERSION}
    index.close()


def test_a_csv_read_in_part_is_indexed_and_listed_for_as_long_as_it_is_so(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(convert, "CSV_MAX_ROWS", 2)
    docs = tmp_path / "docs"
    docs.mkdir()
    table = docs / "birds.csv"
    table.write_text("bird,home\nowl,barn\nwren,hedge\nkite,cliff\n")
    index = SqliteFtsIndex()
    index.create_collection("Birds", [str(docs)])
    report = Indexer(index, "Birds").run()
    note = "only the first 2 rows read (a CSV is indexed up to that)"
    assert report.added == 1 and report.partial == [(str(table), note)]
    assert not report.problems and "1 read only in part" in kc.describe_report(report)
    assert index.search(["Birds"], "wren hedge") and not index.search(["Birds"], "kite cliff")
    again = Indexer(index, "Birds").run()  # not read again: the note stays with it
    assert again.unchanged == 1 and again.partial == [(str(table), note)]
    (summary,) = kc.summaries(index)
    assert summary.partial == ((str(table), note),)
    table.write_text("bird,home\nowl,barn\n")
    assert Indexer(index, "Birds").run().partial == [] and index.notes("Birds") == []
    index.close()


def test_follow_links_is_kept_with_the_collection(tmp_path: Path) -> None:
    index = SqliteFtsIndex()
    index.create_collection("Docs", [str(tmp_path)])
    assert not index.collection("Docs").follow_links  # off unless asked
    index.set_follow_links("docs", True)
    assert index.collection("Docs").follow_links
    index.close()
