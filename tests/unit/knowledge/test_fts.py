"""The FTS5 index: documents in and out, BM25 search, collections, the schema's version."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from inglenook import paths
from inglenook.knowledge import schema
from inglenook.knowledge.fts import KnowledgeError, SqliteFtsIndex
from inglenook.knowledge.index import Chunk, Document, KnowledgeIndex, fuse
from inglenook.knowledge.search import OVERFETCH, fts_query


def doc(path: str, sha: str = "x") -> Document:
    return Document(path, 10, 1, sha, "text")


@pytest.fixture
def index() -> SqliteFtsIndex:
    made = SqliteFtsIndex()
    made.create_collection("Notes", ["/notes"])
    return made


def test_the_index_lives_in_its_own_file_under_the_data_dir(index: SqliteFtsIndex) -> None:
    assert index.path == paths.knowledge_database_file()
    assert index.path.parent == paths.data_dir() and index.path != paths.database_file()
    conn = sqlite3.connect(index.path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == schema.LATEST_VERSION


def test_it_is_a_knowledge_index(index: SqliteFtsIndex) -> None:
    implementation: KnowledgeIndex = index  # mypy checks the Protocol here
    assert implementation.search(["Notes"], "anything") == []


def test_search_ranks_the_passage_with_the_rare_words_first(index: SqliteFtsIndex) -> None:
    index.add_document("Notes", doc("/notes/a.md"), [
        Chunk("The weather was fine and the garden was green.", 1, 1),
        Chunk("The lighthouse keeper's cat is called Marmalade.", 3, 4, heading="Cats")])
    index.add_document("Notes", doc("/notes/b.md"), [Chunk("A garden of weather.", 1, 2)])
    hits = index.search(["Notes"], "What is the name of the lighthouse keeper's cat?")
    assert hits[0].path == "/notes/a.md"
    assert hits[0].chunk.text.endswith("Marmalade.")
    assert hits[0].citation == "/notes/a.md, lines 3–4"
    assert index.stats("Notes").documents == 2 and index.stats("Notes").chunks == 3


def test_replacing_and_removing_a_document_updates_the_full_text_index(
        index: SqliteFtsIndex) -> None:
    index.add_document("Notes", doc("/notes/a.md"), [Chunk("zebra crossing", 1, 1)])
    index.add_document("Notes", doc("/notes/a.md", "y"), [Chunk("giraffe neck", 1, 1)])
    assert index.search(["Notes"], "zebra") == []
    assert [h.chunk.text for h in index.search(["Notes"], "giraffe")] == ["giraffe neck"]
    index.remove_document("Notes", "/notes/a.md")
    assert index.search(["Notes"], "giraffe") == []
    assert index.stats("Notes").chunks == 0


def test_a_search_stays_in_the_collections_asked(index: SqliteFtsIndex) -> None:
    index.create_collection("Work", ["/work"])
    index.add_document("Work", doc("/work/w.txt"), [Chunk("quarterly budget", 1, 1)])
    assert index.search(["Notes"], "budget") == []
    assert len(index.search(["Notes", "Work"], "budget")) == 1


def test_a_collection_outranked_by_another_still_gets_its_own_best_matches(
        index: SqliteFtsIndex) -> None:
    """More matches of another collection rank first than are scored before the filter."""
    index.create_collection("Work", ["/work"])
    strong = [Chunk("budget budget budget", i, i) for i in range(OVERFETCH * 5 + 1)]
    index.add_document("Work", doc("/work/w.txt"), strong)
    index.add_document("Notes", doc("/notes/n.txt"), [Chunk("the budget of a garden in June, "
                                                            "with many other words", 1, 1)])
    (hit,) = index.search(["Notes"], "budget", limit=5)
    assert hit.path == "/notes/n.txt"
    assert len(index.search(["Notes", "Work"], "budget", limit=5)) == 5


def test_fts5_syntax_in_a_question_is_only_words() -> None:
    assert fts_query('NEAR(a b) OR "x" * title:secret') == \
        '"near" OR "b" OR "x" OR "title" OR "secret"'
    assert fts_query("the keeper's cat") == '"keeper\'s" OR "cat"'
    assert fts_query("the of and ?") is None


def test_a_query_made_of_syntax_searches_without_error(index: SqliteFtsIndex) -> None:
    index.add_document("Notes", doc("/notes/a.md"), [Chunk("near the door", 1, 1)])
    assert len(index.search(["Notes"], 'NEAR( "door" ^ -*')) == 1


def test_collections_have_unique_names_ignoring_case(index: SqliteFtsIndex) -> None:
    with pytest.raises(KnowledgeError, match="already"):
        index.create_collection("notes", ["/x"])
    assert index.collection("NOTES").name == "Notes"
    index.remove_collection("Notes")
    with pytest.raises(KnowledgeError, match="no collection"):
        index.collection("Notes")


def test_removing_a_collection_removes_its_chunks_from_the_index(
        index: SqliteFtsIndex) -> None:
    index.add_document("Notes", doc("/notes/a.md"), [Chunk("walrus", 1, 1)])
    index.remove_collection("Notes")
    index.create_collection("Notes", ["/notes"])
    assert index.search(["Notes"], "walrus") == []


def test_rebuild_keeps_what_is_found_and_mends_only_a_damaged_index(
        index: SqliteFtsIndex) -> None:
    index.add_document("Notes", doc("/notes/a.md"), [Chunk("otter holt", 1, 1)])
    assert index.rebuild_full_text() is False  # whole: not rewritten
    assert len(index.search(["Notes"], "otter")) == 1
    # The chunk's text changed behind the index's back (a damaged file, an old bug).
    index._conn.execute("DROP TRIGGER chunks_fts_delete")
    index._conn.execute("DELETE FROM chunks")
    index._conn.execute("INSERT INTO chunks (id, document_id, position, text, line_start, "
                        "line_end) SELECT 1, id, 0, 'badger sett', 1, 1 FROM documents")
    assert index.rebuild_full_text() is True
    assert index.search(["Notes"], "otter") == []
    assert len(index.search(["Notes"], "badger")) == 1


def test_a_file_from_a_newer_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "k.db"
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {schema.LATEST_VERSION + 1}")
    conn.close()
    with pytest.raises(KnowledgeError, match="newer version"):
        SqliteFtsIndex(path)


def test_the_index_reopens_with_what_it_held(index: SqliteFtsIndex) -> None:
    index.add_document("Notes", doc("/notes/a.md"), [Chunk("badger sett", 2, 5, page=3)])
    index.close()
    again = SqliteFtsIndex()
    hit = again.search(["Notes"], "badger")[0]
    assert hit.chunk.location == "page 3, lines 2–5"


def test_fusion_prefers_ids_ranked_well_by_both_and_keeps_a_wide_margin() -> None:
    assert fuse([[(1, 9.0), (2, 8.0), (3, 1.0)], [(4, 0.9), (2, 0.8), (5, 0.1)]], 1) == [2]
    assert fuse([[(5, 3.0)]], limit=3) == [5]
    assert fuse([[], [(6, 0.2), (7, 0.1)]], limit=3) == [6, 7]
    # One far ahead in the first (a rare name matched), third in the second: it stays first,
    # where reciprocal rank fusion would put 2 (second, then first) ahead of it.
    bm25 = [(1, 12.0), (2, 3.0), (3, 2.9), (4, 2.8)]
    vectors = [(2, 0.62), (4, 0.61), (1, 0.60), (3, 0.55)]
    assert fuse([bm25, vectors], limit=1) == [1]


def test_words_found_almost_everywhere_are_left_out_of_a_long_question(
        index: SqliteFtsIndex) -> None:
    chunks = [Chunk(f"garden note {n}", n, n) for n in range(40)]
    index.add_document("Notes", doc("/notes/garden.md"), chunks)
    index.add_document("Notes", doc("/notes/owl.md"), [Chunk("garden owl pellet", 1, 1)])
    assert index.searcher._without_common(["garden", "note", "owl", "pellet", "moss"]) == \
        ["moss", "owl", "pellet"]  # the three rarest; "garden" and "note" are everywhere
    assert index.search(["Notes"], "garden note owl pellet moss")[0].path == "/notes/owl.md"
    assert index.searcher._without_common(["garden", "note"]) == ["garden", "note"]
