"""Vectors in the knowledge index (sqlite-vec in the same knowledge.db): chunks embedded when the
collection has an embedding model, BM25 and vector ranks fused, failures reported and kept
while full text goes on, the schema migrated from v1. The embedder here is a small stand-in
(words hashed into a few dimensions, with synonyms made one): the engine's own is tested in
tests/integration/test_embeddings.py."""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from inglenook.knowledge import schema, vectors
from inglenook.knowledge.fts import SqliteFtsIndex
from inglenook.knowledge.indexer import Indexer, Progress
from inglenook.store.schema import statements

SYNONYMS = {"feline": "cat", "kitten": "cat"}


class WordEmbedder:
    """Each word a fixed direction (synonyms the same one); a text the sum, normalised."""

    def __init__(self, model: str = "/models/words.gguf", fail_after: int = -1) -> None:
        self.model, self.calls, self.fail_after = model, 0, fail_after
        self.texts: list[str] = []

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        if self.fail_after >= 0 and self.calls >= self.fail_after:
            raise RuntimeError("the engine stopped")
        self.calls += 1
        self.texts += texts
        rows = np.zeros((len(texts), 64), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in text.lower().replace(".", " ").split():
                word = SYNONYMS.get(word, word)
                rows[i, hashlib.sha256(word.encode()).digest()[0] % 64] += 1.0
        return rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-9)


def folder(root: Path, files: int = 3) -> Path:
    docs = root / "docs"
    docs.mkdir()
    (docs / "cat.md").write_text("# Pets\n\nThe cat naps on the warm windowsill.\n")
    for n in range(files - 1):
        (docs / f"other{n}.md").write_text(f"# Tides {n}\n\nThe harbour floods at dusk {n}.\n")
    return docs


def collection(tmp_path: Path, embedder: WordEmbedder | None) -> tuple[SqliteFtsIndex, Path]:
    index = SqliteFtsIndex(embedder=embedder)
    assert index.vectors_off == ""  # sqlite-vec loads here (pysqlite3 where Python's cannot)
    docs = folder(tmp_path)
    index.create_collection("Docs", [str(docs)], embed_model="/models/words.gguf")
    return index, docs


def test_chunks_get_vectors_and_a_search_fuses_both_rankings(tmp_path: Path) -> None:
    embedder = WordEmbedder()
    index, docs = collection(tmp_path, embedder)
    seen: list[Progress] = []
    report = Indexer(index, "Docs", seen.append, embedder=embedder).run()
    chunks = index.stats("Docs").chunks
    assert report.embedded == chunks == index.vector_count("Docs") and not report.embed_error
    assert seen[-1] == Progress(chunks, chunks, phase="embedding")
    assert "# Pets" not in embedder.texts[0] and "Pets" in " ".join(embedder.texts)  # heading
    # No word of the question is in the passage: only its vector finds it.
    (hit, *_) = index.search(["Docs"], "feline", 3)
    assert hit.path.endswith("cat.md") and index.search_note == ""
    index.embedder = None
    assert index.search(["Docs"], "feline", 3) == []  # full text alone
    # A file that goes takes its vectors with it; a re-index embeds nothing new.
    (docs / "cat.md").unlink()
    report = Indexer(index, "Docs", embedder=embedder).run()
    assert report.removed == 1 and report.embedded == 0
    assert index.vector_count("Docs") == index.stats("Docs").chunks
    index.set_embed_model("Docs", "/models/other.gguf")  # another model: its vectors go
    assert index.vector_count("Docs") == 0


def test_a_failing_embedder_is_reported_kept_and_caught_up(tmp_path: Path) -> None:
    index, _docs = collection(tmp_path, None)
    report = Indexer(index, "Docs", embedder=WordEmbedder(fail_after=0)).run()
    assert report.added == 3 and "the engine stopped" in report.embed_error
    assert "the engine stopped" in index.collection("Docs").embed_error
    assert index.search(["Docs"], "windowsill", 3)  # full text still answers
    again = Indexer(index, "Docs", embedder=WordEmbedder()).run()
    assert again.embedded == index.stats("Docs").chunks and not again.embed_error
    assert index.collection("Docs").embed_error == ""
    wrong = Indexer(index, "Docs", embedder=WordEmbedder("/models/else.gguf")).run()
    assert "not the collection's words.gguf" in wrong.embed_error
    none = Indexer(index, "Docs").run()
    assert "No embedding model was loaded" in none.embed_error


def test_a_question_that_cannot_be_embedded_is_searched_in_full_text(tmp_path: Path) -> None:
    embedder = WordEmbedder()
    index, _docs = collection(tmp_path, embedder)
    Indexer(index, "Docs", embedder=embedder).run()
    embedder.fail_after = 0
    (hit,) = index.search(["Docs"], "windowsill", 3)
    assert hit.path.endswith("cat.md") and "could not be embedded" in index.search_note


def two_models(tmp_path: Path) -> tuple[SqliteFtsIndex, dict[str, WordEmbedder]]:
    """Cats (words.gguf) and Pets (other.gguf), each indexed with its own model; no word of
    "feline" in either."""
    embedders = {m: WordEmbedder(m) for m in ("/models/words.gguf", "/models/other.gguf")}
    index = SqliteFtsIndex()
    for name, model, text in (("Cats", "/models/words.gguf", "The cat naps on the sill."),
                              ("Pets", "/models/other.gguf", "A kitten sleeps in a basket.")):
        folder = tmp_path / name
        folder.mkdir()
        (folder / f"{name.lower()}.md").write_text(f"# {name}\n\n{text}\n")
        (folder / "tides.md").write_text("# Tides\n\nThe harbour floods at dusk.\n")
        index.create_collection(name, [str(folder)], embed_model=model)
        Indexer(index, name, embedder=embedders[model]).run()
    return index, embedders


def test_collections_of_two_models_are_each_searched_by_their_own(tmp_path: Path) -> None:
    index, embedders = two_models(tmp_path)
    index.embedder = embedders["/models/words.gguf"]  # one model's embedder alone
    hits = index.search(["Cats", "Pets"], "feline", 3)
    assert Path(hits[0].path).name == "cats.md" and "pets.md" not in {Path(h.path).name
                                                                       for h in hits}
    assert index.search_note == ("Pets searched in full text only: no embedder of its model "
                                 "(other.gguf) for this search.")
    index.embedder, index.embedder_for = None, embedders.__getitem__  # the chat's: each model
    for embedder in embedders.values():
        embedder.texts.clear()
    hits = index.search(["Cats", "Pets"], "feline", 3)
    assert {Path(h.path).name for h in hits[:2]} == {"cats.md", "pets.md"}
    assert index.search_note == ""
    assert [e.texts for e in embedders.values()] == [["feline"]] * 2  # once by each model
    index.close()


def test_without_the_extension_vectors_are_off_and_said_so(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vectors, "driver", lambda: (sqlite3, vectors.NOT_LOADABLE))
    index = SqliteFtsIndex(embedder=WordEmbedder())
    assert index.vectors_off == vectors.NOT_LOADABLE
    index.create_collection("Docs", [str(folder(tmp_path))], embed_model="/models/words.gguf")
    report = Indexer(index, "Docs", embedder=WordEmbedder()).run()
    assert report.added == 3 and report.embed_error == vectors.NOT_LOADABLE
    assert index.search(["Docs"], "windowsill", 3)
    assert index.search_note == vectors.NOT_LOADABLE


def test_a_v1_index_is_migrated_with_a_backup(tmp_path: Path) -> None:
    path = tmp_path / "k.db"
    conn = sqlite3.connect(path)
    for statement in statements(schema.V1_SQL):
        conn.execute(statement)
    conn.execute("INSERT INTO collections (name, roots, created_at) VALUES ('Old', '[]', 0)")
    conn.execute("PRAGMA user_version = 1")
    conn.commit()
    conn.close()
    index = SqliteFtsIndex(path)
    old = index.collection("Old")
    assert old.embed_model == "" and index.vector_count("Old") == 0
    assert old.watch and old.backend == "" and old.qdrant_url == ""  # v3's defaults
    assert (tmp_path / "k.db.bak-v1").exists()
    index.close()


TIDES = " ".join(f"The harbour wall number {n} floods at dusk when the tide runs high."
                 for n in range(12))
LONG = f"# Log\n\n{TIDES} The feline naps by the stove. {TIDES}\n"


def long_passage(tmp_path: Path, embedder: WordEmbedder, backend: str = "") -> SqliteFtsIndex:
    """One passage of ~1,600 characters with one sentence about a cat, and a short one."""
    docs = tmp_path / "long"
    docs.mkdir(parents=True)
    (docs / "log.md").write_text(LONG)
    (docs / "short.md").write_text("# Kitchen\n\nThe stove is lit in the morning, and the kettle "
                                   "is put on before anyone is awake.\n")
    index = SqliteFtsIndex(tmp_path / "k.db", embedder)
    index.create_collection("Docs", [str(docs)], embed_model="/models/words.gguf",
                            backend=backend)
    Indexer(index, "Docs", embedder=embedder).run()
    return index


def nearest_window(embedder: WordEmbedder, heading: str, text: str, question: str) -> float:
    rows = embedder(vectors.window_texts(heading, text))
    return float((rows @ embedder([question])[0]).max())


def test_a_passage_is_ranked_by_its_nearest_window(tmp_path: Path) -> None:
    embedder = WordEmbedder()
    index = long_passage(tmp_path, embedder)
    (cid, heading, text), = index._conn.execute(
        "SELECT id, heading, text FROM chunks WHERE text LIKE '%feline%'")
    windows = vectors.window_texts(heading, text)
    assert len(windows) == 8 and all(len(w) <= len(heading) + 1 + 250 for w in windows)
    assert sum("feline" in w for w in windows) == 1 and all(w.startswith("Log\n") for w in windows)
    assert index._conn.execute("SELECT count(*) FROM chunk_vectors WHERE chunk_id = ?",
                               (cid,)).fetchone()[0] == 8
    assert index.vector_count("Docs") == index.stats("Docs").chunks == 2
    # The one sentence about a cat decides: the whole passage's vector is mostly tides.
    question = "kitten naps"
    (dense,) = index.searcher._dense(["Docs"], [index._id("Docs")], question, 5)
    assert dense[0][0] == cid
    assert dense[0][1] == pytest.approx(nearest_window(embedder, heading, text, question),
                                        abs=1e-5)
    whole = float(embedder([f"{heading}\n{text}"])[0] @ embedder([question])[0])
    assert whole < dense[1][1] < dense[0][1]  # whole, it would come after the short one
    (hit, *_) = index.search(["Docs"], question, 5)
    assert hit.chunk_id == cid and hit.chunk.text == text  # the whole passage is given


def test_windows_keep_every_word_in_order_and_cut_long_sentences_at_spaces() -> None:
    from inglenook.knowledge.chunking import windows

    text = LONG + "word " * 200 + "\n" + "x" * 600
    cut = windows(text)
    assert all(0 < len(w) <= 250 for w in cut)
    assert "".join(cut).replace(" ", "") == "".join(text.split())  # all of it, in order
    assert windows("A short note.") == ["A short note."]


def test_a_v4_index_keeps_its_passages_and_embeds_them_again_by_window(tmp_path: Path) -> None:
    path = tmp_path / "k.db"
    conn = sqlite3.connect(path)
    for step in (schema.V1_SQL, schema.V2_SQL, schema.V3_SQL, schema.V4_SQL):
        for statement in statements(step):
            conn.execute(statement)
    conn.execute("INSERT INTO collections (id, name, roots, created_at, embed_model) "
                 "VALUES (1, 'Old', '[]', 0, '/models/words.gguf')")
    conn.execute("INSERT INTO documents VALUES (1, 1, '/old/log.md', 1, 1, 'x', 'markdown')")
    conn.execute("INSERT INTO chunks (id, document_id, position, text, heading, line_start, "
                 "line_end) VALUES (1, 1, 0, ?, 'Log', 3, 3)", (LONG[7:],))
    conn.execute("INSERT INTO chunk_vectors VALUES (1, ?)", (vectors.blob(np.ones(64)),))
    conn.execute("PRAGMA user_version = 4")
    conn.commit()
    conn.close()
    embedder = WordEmbedder()
    index = SqliteFtsIndex(path, embedder)
    assert (tmp_path / "k.db.bak-v4").exists()
    assert index.stats("Old").chunks == 1 and index.vector_count("Old") == 0  # whole: dropped
    assert index.search(["Old"], "feline", 1)[0].chunk_id == 1  # full text kept
    (cid, parts), = index.missing_vectors("Old", 10)
    assert cid == 1 and len(parts) == 8
    index.add_vectors("Old", [cid], vectors.embed(embedder, [(cid, parts)]))
    assert index.vector_count("Old") == 1 and index.missing_vectors("Old", 10) == []
    index.close()
