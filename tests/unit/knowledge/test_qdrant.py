"""Vectors in Qdrant (qdrant_store.py), in its real local mode under tmp_path: points follow
their chunks through re-indexing and removal, a search fuses them with BM25, a server that
cannot be reached leaves full text working and says so. The embedder is test_vectors.py's."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from inglenook import paths
from inglenook.cli import main
from inglenook.knowledge import indexer, qdrant_store, schema
from inglenook.knowledge.chunking import MAX_WINDOWS
from inglenook.knowledge.fts import KnowledgeError, SqliteFtsIndex
from inglenook.knowledge.index import Chunk
from inglenook.knowledge.indexer import Indexer
from inglenook.store.schema import statements
from tests.unit.knowledge.test_vectors import WordEmbedder, folder, long_passage

DOWN = "http://127.0.0.1:1"  # nothing listens on port 1: refused at once


@pytest.fixture(autouse=True)
def clients() -> Iterator[None]:
    """Each test's local-mode folder is unlocked and written when it ends."""
    yield
    qdrant_store.close_clients()


def qdrant(tmp_path: Path, embedder: WordEmbedder | None = None,
           url: str = "") -> tuple[SqliteFtsIndex, Path]:
    index = SqliteFtsIndex(embedder=embedder)
    docs = folder(tmp_path)
    index.create_collection("Docs", [str(docs)], embed_model="/models/words.gguf",
                            backend="qdrant", qdrant_url=url)
    return index, docs


def client(index: SqliteFtsIndex) -> Any:
    return qdrant_store._client("", index.qdrant_dir).client


def point_ids(index: SqliteFtsIndex, name: str = "Docs") -> set[int]:
    """The chunks that have points (a point per window: these notes have one each)."""
    found, _ = client(index).scroll(index.collection(name).qdrant_name, limit=1000)
    chunks = [int(p.payload["chunk_id"]) for p in found]
    assert [int(p.id) for p in found] == [c * MAX_WINDOWS for c in chunks]
    return set(chunks)


def chunk_ids(index: SqliteFtsIndex) -> set[int]:
    return {r[0] for r in index._conn.execute("SELECT id FROM chunks")}


def test_vectors_in_local_qdrant_are_searched_with_bm25(tmp_path: Path) -> None:
    embedder = WordEmbedder()
    index, _docs = qdrant(tmp_path, embedder)
    assert index.qdrant_dir == paths.knowledge_qdrant_dir()
    report = Indexer(index, "Docs", embedder=embedder).run()
    assert report.embedded == 3 and not report.embed_error
    assert index.vector_count("Docs") == 3 and point_ids(index) == chunk_ids(index)
    assert index._conn.execute("SELECT count(*) FROM chunk_vectors").fetchone()[0] == 0
    (hit, *_) = index.search(["Docs"], "feline", 3)  # no word of it is in the passage
    assert hit.path.endswith("cat.md") and index.search_note == ""
    # Another thread's index shares the process's client (local mode locks its folder).
    other: list[str] = []
    thread = threading.Thread(target=lambda: other.extend(
        h.path for h in SqliteFtsIndex(embedder=embedder).search(["Docs"], "kitten", 1)))
    thread.start()
    thread.join(timeout=10)
    assert len(other) == 1 and other[0].endswith("cat.md")


def test_a_search_over_both_backends_merges_their_vectors(tmp_path: Path) -> None:
    embedder = WordEmbedder()
    index, _docs = qdrant(tmp_path, embedder)
    pets = tmp_path / "pets"
    pets.mkdir()
    (pets / "kitten.md").write_text("A feline sleeps in the sun.\n")
    index.create_collection("Pets", [str(pets)], embed_model="/models/words.gguf")
    for name in ("Docs", "Pets"):
        Indexer(index, name, embedder=embedder).run()
    hits = index.search(["Docs", "Pets"], "cat", 2)
    assert {h.collection for h in hits} == {"Docs", "Pets"} and index.search_note == ""


def test_reindexing_and_removing_files_keeps_points_and_chunks_in_step(tmp_path: Path) -> None:
    embedder = WordEmbedder()
    index, docs = qdrant(tmp_path, embedder)
    Indexer(index, "Docs", embedder=embedder).run()
    last, old = index._conn.execute("SELECT d.path, c.id FROM chunks c JOIN documents d "
                                    "ON d.id = c.document_id ORDER BY c.id DESC").fetchone()
    # Replaced, not embedded yet: SQLite gives the new chunk the old one's id, and the old
    # point (still in Qdrant until the next batch) is never a hit for it.
    index.add_document("Docs", index.documents("Docs")[last], [Chunk("a dog by the door", 1, 1)])
    assert old in chunk_ids(index) and old in point_ids(index)
    nearest = index._qdrant.ranking([index._id("Docs")], embedder(["dog door"])[0], 10)
    assert {cid for cid, _ in nearest} == chunk_ids(index) - {old}
    Path(last).write_text("# Dogs\n\nThe dog sleeps by the door.\n")
    report = Indexer(index, "Docs", embedder=embedder).run()
    assert report.updated == 1 and report.embedded == 1
    assert index.vector_count("Docs") == 3 and point_ids(index) == chunk_ids(index)
    assert not index._conn.execute("SELECT * FROM qdrant_gone").fetchall()
    (docs / "other0.md").unlink()
    report = Indexer(index, "Docs", embedder=embedder).run()
    assert report.removed == 1 and point_ids(index) == chunk_ids(index)
    assert index.vector_count("Docs") == 2
    name = index.collection("Docs").qdrant_name
    assert index.remove_collection("Docs") == ""
    assert not client(index).collection_exists(name)


def test_a_partial_embedding_leaves_the_rest_missing_and_is_caught_up(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(indexer, "EMBED_BATCH", 1)
    index, _docs = qdrant(tmp_path)
    report = Indexer(index, "Docs", embedder=WordEmbedder(fail_after=1)).run()
    assert report.embedded == 1 and "the engine stopped" in report.embed_error
    assert index.vector_count("Docs") == 1 and len(point_ids(index)) == 1
    assert len(index.missing_vectors("Docs", 10)) == 2
    again = Indexer(index, "Docs", embedder=WordEmbedder()).run()
    assert again.embedded == 2 and index.missing_vectors("Docs", 10) == []
    index.set_embed_model("Docs", "/models/other.gguf")  # another model: its vectors go
    assert index.vector_count("Docs") == 0 and len(index.missing_vectors("Docs", 10)) == 3
    Indexer(index, "Docs", embedder=WordEmbedder("/models/other.gguf")).run()
    assert point_ids(index) == chunk_ids(index)  # the old model's points went with the reset


def test_a_server_that_cannot_be_reached_leaves_full_text_working(tmp_path: Path) -> None:
    embedder = WordEmbedder()
    index, _docs = qdrant(tmp_path, embedder, url=DOWN)
    report = Indexer(index, "Docs", embedder=embedder).run()
    assert report.added == 3 and f"Qdrant at {DOWN} could not be used" in report.embed_error
    assert DOWN in index.collection("Docs").embed_error and index.vector_count("Docs") == 0
    (hit,) = index.search(["Docs"], "windowsill", 3)
    assert hit.path.endswith("cat.md")
    # Indexed while it answered (local mode here), searched once it no longer does.
    index.set_backend("Docs", "qdrant")
    Indexer(index, "Docs", embedder=embedder).run()
    assert index.vector_count("Docs") == 3
    index._conn.execute("UPDATE collections SET qdrant_url = ?", (DOWN,))
    (hit,) = index.search(["Docs"], "windowsill", 3)
    assert hit.path.endswith("cat.md")
    assert index.search_note.startswith(f"Qdrant at {DOWN} could not be used (")
    assert index.search_note.endswith("Its collections were searched in full text only.")
    assert "in the Qdrant collection inglenook-" in index.remove_collection("Docs")


def test_a_local_folder_another_program_holds_is_said_so(tmp_path: Path) -> None:
    from qdrant_client import QdrantClient

    embedder = WordEmbedder()
    index, _docs = qdrant(tmp_path, embedder)
    Indexer(index, "Docs", embedder=embedder).run()
    qdrant_store.close_clients()
    holder = QdrantClient(path=str(index.qdrant_dir))  # as another process would
    try:
        (hit,) = index.search(["Docs"], "windowsill", 3)
        assert hit.path.endswith("cat.md") and "is in use by another program" in index.search_note
        report = Indexer(index, "Docs", embedder=embedder).run()
        assert report.embed_error == ""  # nothing to embed: no call was made
        index.set_embed_model("Docs", "/models/words2.gguf")
        report = Indexer(index, "Docs", embedder=WordEmbedder("/models/words2.gguf")).run()
        assert "is in use by another program" in report.embed_error and report.added == 0
    finally:
        holder.close()


def test_bad_backends_and_a_missing_extra_are_refused_in_one_sentence(
        monkeypatch: pytest.MonkeyPatch) -> None:
    index = SqliteFtsIndex()
    with pytest.raises(KnowledgeError, match="not a Qdrant server's URL"):
        index.create_collection("A", [], backend="qdrant", qdrant_url="localhost:6333")
    with pytest.raises(KnowledgeError, match="not a vector backend"):
        index.create_collection("A", [], backend="faiss")
    monkeypatch.setattr(qdrant_store, "missing_extra", lambda: qdrant_store.NO_EXTRA)
    with pytest.raises(KnowledgeError, match=r"pip install 'inglenook\[qdrant\]'"):
        index.create_collection("A", [], backend="qdrant")
    assert index.collections() == []


def test_a_v3_index_is_migrated_to_v4_with_a_backup(tmp_path: Path) -> None:
    path = tmp_path / "k.db"
    conn = sqlite3.connect(path)
    for step in (schema.V1_SQL, schema.V2_SQL, schema.V3_SQL):
        for statement in statements(step):
            conn.execute(statement)
    conn.execute("INSERT INTO collections (name, roots, created_at, backend) "
                 "VALUES ('Old', '[]', 0, 'qdrant')")
    conn.execute("PRAGMA user_version = 3")
    conn.commit()
    conn.close()
    index = SqliteFtsIndex(path)
    assert index.collection("Old").qdrant_name == "" and index.vector_count("Old") == 0
    assert index._qdrant._where(index._id("Old"))[1].startswith("inglenook-")  # named on use
    assert (tmp_path / "k.db.bak-v3").exists()
    index.close()


def test_the_cli_makes_and_lists_a_qdrant_collection(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    docs = folder(tmp_path)
    assert main(["knowledge", "add", "Docs", str(docs), "--qdrant-url", DOWN]) == 2
    assert "--qdrant-url needs --backend qdrant." in capsys.readouterr().err
    assert main(["knowledge", "add", "Docs", str(docs), "--backend", "qdrant"]) == 0
    assert main(["knowledge", "add", "Sql", str(docs)]) == 0
    capsys.readouterr()
    assert main(["knowledge", "list"]) == 0
    out = capsys.readouterr().out
    assert "  backend: Qdrant (local mode), collection inglenook-" in out
    assert "  backend: SQLite (this database)" in out
    # Moving to a server that does not answer is refused, and nothing changes.
    assert main(["knowledge", "add", "Docs", str(docs), "--backend", "qdrant",
                 "--qdrant-url", DOWN]) == 1
    assert f"Qdrant at {DOWN} could not be used" in capsys.readouterr().err
    assert main(["knowledge", "list"]) == 0
    assert "  backend: Qdrant (local mode), collection inglenook-" in capsys.readouterr().out
    assert main(["knowledge", "add", "Docs", str(docs), "--backend", "sqlite"]) == 0
    capsys.readouterr()
    assert main(["knowledge", "list"]) == 0
    assert capsys.readouterr().out.count("  backend: SQLite (this database)") == 2


def test_vectors_move_only_to_a_place_that_answers(tmp_path: Path) -> None:
    from inglenook.knowledge.collections import move_vectors

    embedder = WordEmbedder()
    index = SqliteFtsIndex(embedder=embedder)
    index.create_collection("Docs", [str(folder(tmp_path))], embed_model="/models/words.gguf")
    Indexer(index, "Docs", embedder=embedder).run()
    with pytest.raises(KnowledgeError, match=f"Qdrant at {DOWN} could not be used"):
        move_vectors(index, "Docs", "qdrant", DOWN)
    assert index.collection("Docs").backend == "" and index.vector_count("Docs") == 3
    moved = move_vectors(index, "Docs", "qdrant")
    assert (moved.backend, moved.qdrant_url) == ("qdrant", "") and index.vector_count("Docs") == 0
    Indexer(index, "Docs", embedder=embedder).run()
    assert point_ids(index) == chunk_ids(index)


def test_qdrant_ranks_a_passage_by_its_nearest_window_as_sqlite_does(tmp_path: Path) -> None:
    embedder = WordEmbedder()
    here = long_passage(tmp_path / "sqlite", embedder)
    there = long_passage(tmp_path / "qdrant", embedder, backend="qdrant")
    found, _ = client(there).scroll(there.collection("Docs").qdrant_name, limit=1000)
    assert len(found) == 8 + 1  # a point per window
    for question in ("kitten naps", "harbour floods", "kettle"):
        (ours,) = here.searcher._dense(["Docs"], [here._id("Docs")], question, 5)
        (theirs,) = there.searcher._dense(["Docs"], [there._id("Docs")], question, 5)
        assert [c for c, _ in theirs] == [c for c, _ in ours]
        assert [s for _, s in theirs] == pytest.approx([s for _, s in ours], abs=1e-5)
    # A passage that goes takes all its windows' points with it.
    (Path(tmp_path / "qdrant" / "long" / "log.md")).unlink()
    Indexer(there, "Docs", embedder=embedder).run()
    found, _ = client(there).scroll(there.collection("Docs").qdrant_name, limit=1000)
    assert len(found) == 1
