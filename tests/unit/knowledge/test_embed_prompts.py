"""Embedding models that expect prefixes get them: passages as passages, questions as questions,
chosen by the model's name; vectors made before (without) are made again in the model's style."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from inglenook import paths
from inglenook.knowledge import embed_prompts, schema, vectors
from inglenook.knowledge.embed_prompts import style_for, style_of
from inglenook.knowledge.fts import SqliteFtsIndex
from inglenook.knowledge.indexer import Indexer
from inglenook.store.schema import statements
from tests.gguf_tools import write_gguf
from tests.unit.knowledge.test_vectors import WordEmbedder, folder

# The style of each embedding model Discover recommends, by its recommended files.
EXPECTED = {"all-MiniLM-L6-v2": "", "BGE small EN v1.5": "bge", "nomic-embed-text v1.5": "nomic",
            "EmbeddingGemma 300M": "embeddinggemma", "Qwen3 Embedding 0.6B": "qwen3-embedding"}


def test_every_recommended_embedding_model_gets_its_style() -> None:
    catalog = json.loads((paths.resources_dir() / "catalog.json").read_text())
    entries = [e for e in catalog["models"] if "embedding" in e.get("tags", ())]
    assert {e["name"] for e in entries} == set(EXPECTED)
    for entry in entries:
        for file in entry["recommended"]:
            assert style_for([file], "") == EXPECTED[entry["name"]], file


def test_chat_models_and_unknown_ones_get_none() -> None:
    assert style_for(["Qwen3-4B-Instruct-2507", "Qwen3"], "qwen3") == ""
    assert style_for(["gemma-3-1b-it"], "gemma3") == ""
    assert style_for(["bge-m3"], "bert") == ""  # reads questions as they are
    assert style_for(["Some Embedder"], "nomic-bert") == "nomic"  # known by architecture


def nomic_file(tmp_path: Path) -> str:
    return str(write_gguf(tmp_path / "model-q8.gguf", {
        "general.architecture": "nomic-bert", "general.name": "nomic-embed-text-v1.5",
        "nomic-bert.pooling_type": 1}))


def test_the_style_is_read_from_the_file(tmp_path: Path) -> None:
    assert style_of(nomic_file(tmp_path)) == "nomic"
    assert style_of(str(tmp_path / "missing.gguf")) is None  # its load says what is wrong
    assert style_for(["snowflake-arctic-embed-l-v2.0"], "xlm-roberta") == "arctic-v2"
    assert embed_prompts.document_texts("arctic-v2", ["a"]) == ["a"]  # passages as they are


def test_a_header_that_cannot_be_read_keeps_the_vectors_style(tmp_path: Path) -> None:
    """A model file being copied (a header cut short) must not re-embed a collection without
    its prefixes; the failure is not remembered either."""
    model = nomic_file(tmp_path)
    embedder = WordEmbedder(model)
    index = SqliteFtsIndex(embedder=embedder)
    index.create_collection("Docs", [str(folder(tmp_path))], embed_model=model)
    Indexer(index, "Docs", embedder=embedder).run()
    whole = Path(model).read_bytes()
    Path(model).write_bytes(whole[:20])
    assert style_of(model) is None
    (Path(model).parent / "docs" / "new.md").write_text("# New\n\nThe kitten sleeps.\n")
    embedder.texts.clear()
    Indexer(index, "Docs", embedder=embedder).run()
    assert index.collection("Docs").embed_prompts == "nomic"
    assert embedder.texts and all(t.startswith("search_document: ") for t in embedder.texts)
    assert index.vector_count("Docs") == index.stats("Docs").chunks
    Path(model).write_bytes(whole)
    assert style_of(model) == "nomic"
    index.close()


def test_passages_and_questions_are_embedded_with_their_prefixes(tmp_path: Path) -> None:
    model = nomic_file(tmp_path)
    embedder = WordEmbedder(model)
    index = SqliteFtsIndex(embedder=embedder)
    index.create_collection("Docs", [str(folder(tmp_path))], embed_model=model)
    Indexer(index, "Docs", embedder=embedder).run()
    assert embedder.texts and all(t.startswith("search_document: ") for t in embedder.texts)
    assert index.collection("Docs").embed_prompts == "nomic"
    embedder.texts.clear()
    (hit, *_) = index.search(["Docs"], "feline", 3)
    assert embedder.texts == ["search_query: feline"] and hit.path.endswith("cat.md")
    index.close()


def test_vectors_made_without_the_prefixes_are_made_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = nomic_file(tmp_path)
    embedder = WordEmbedder(model)
    index = SqliteFtsIndex(embedder=embedder)
    index.create_collection("Docs", [str(folder(tmp_path))], embed_model=model)
    with monkeypatch.context() as old:  # as an index made before prefixes
        old.setattr(embed_prompts, "style_of", lambda _model: "")
        Indexer(index, "Docs", embedder=embedder).run()
    chunks = index.stats("Docs").chunks
    assert index.vector_count("Docs") == chunks and index.collection("Docs").embed_prompts == ""
    embedder.texts.clear()
    index.search(["Docs"], "feline", 3)
    assert embedder.texts == ["feline"]  # compared with vectors made without prefixes
    embedder.texts.clear()
    report = Indexer(index, "Docs", embedder=embedder).run()
    assert report.embedded == chunks == index.vector_count("Docs")
    assert all(t.startswith("search_document: ") for t in embedder.texts)
    index.close()


def test_a_v5_index_keeps_its_vectors_as_made_without_prefixes(tmp_path: Path) -> None:
    path = tmp_path / "k.db"
    conn = sqlite3.connect(path)
    for step in (schema.V1_SQL, schema.V2_SQL, schema.V3_SQL, schema.V4_SQL, schema.V5_SQL):
        for statement in statements(step):
            conn.execute(statement)
    conn.execute("INSERT INTO collections (id, name, roots, created_at, embed_model) "
                 "VALUES (1, 'Old', '[]', 0, '/models/words.gguf')")
    conn.execute("INSERT INTO documents VALUES (1, 1, '/old/a.md', 1, 1, 'x', 'markdown')")
    conn.execute("INSERT INTO chunks (id, document_id, position, text, heading, line_start, "
                 "line_end) VALUES (1, 1, 0, 'The cat naps.', '', 1, 1)")
    conn.execute("INSERT INTO chunk_vectors VALUES (1, 0, ?)", (vectors.blob(np.ones(64)),))
    conn.execute("PRAGMA user_version = 5")
    conn.commit()
    conn.close()
    index = SqliteFtsIndex(path)
    assert (tmp_path / "k.db.bak-v5").exists()
    assert index.collection("Old").embed_prompts == "" and index.vector_count("Old") == 1
    index.close()
