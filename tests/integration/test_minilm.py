"""A real embedding model (all-MiniLM-L6-v2, converted from its PyPI wheel by
tests/embedding_gguf.py) through Inglenook's own path: the engine host's embedding context,
the API's /v1/embeddings and the library. Its vectors are llama-cpp-python's own for the same
file, its pooling is the header's (MEAN), and they mean something: each sentence's nearest
neighbour is its paraphrase, which vectors of noise cannot do."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import openai
import pytest
from llama_cpp import Llama

from inglenook import paths
from inglenook.core.load import LoadParams
from inglenook.engine.client import EngineClient
from inglenook.models.gguf import read_header
from inglenook.models.library import installed_models
from tests.helpers.api import serving

PAIRS = [
    ("A man is playing a guitar.", "Someone plays an acoustic guitar."),
    ("The cat sleeps on the sofa.", "A kitten is napping on the couch."),
    ("Stock markets fell sharply today.", "Shares dropped steeply on Wall Street."),
    ("It is raining heavily in London.", "Heavy rain is falling over London."),
    ("She is cooking pasta for dinner.", "He prepares spaghetti for the evening meal."),
]
SENTENCES = [s for pair in PAIRS for s in pair]


def test_minilm_vectors_are_llama_cpps_and_find_paraphrases(
        minilm_model: Path, tmp_path: Path) -> None:
    header = read_header(minilm_model)
    assert (header.architecture, header.metadata["bert.pooling_type"]) == ("bert", 1)  # MEAN
    client = EngineClient(log_path=tmp_path / "engine.log")
    try:
        client.load(LoadParams(str(minilm_model), n_ctx=512, n_slots=1))
        made = client.embed(SENTENCES)
        assert (made.pooling, made.embedding_model, made.note) == ("mean", True, "")
        rows = made.vectors()
        assert rows.shape == (10, 384)
        with serving(client) as served, openai.OpenAI(
                base_url=served.base_url, api_key="x", max_retries=0) as api:
            raw = api.embeddings.with_raw_response.create(model="", input=SENTENCES[:2])
            assert "x-inglenook-warning" not in raw.headers
            served_rows = np.array([d.embedding for d in raw.parse().data])
            # Another batch (2 texts, not 10): the same vectors but for float rounding.
            assert np.einsum("ij,ij->i", served_rows, rows[:2]).min() > 0.9999
    finally:
        client.close()

    reference = Llama(str(minilm_model), embedding=True, n_ctx=512, verbose=False)
    try:
        theirs = np.array(reference.embed(SENTENCES), dtype=np.float32)
    finally:
        reference.close()
    theirs /= np.linalg.norm(theirs, axis=1, keepdims=True)
    assert np.einsum("ij,ij->i", rows, theirs).min() > 0.999

    similarity = rows @ rows.T
    np.fill_diagonal(similarity, -1.0)
    paraphrase = [i ^ 1 for i in range(len(SENTENCES))]  # 0↔1, 2↔3, ...
    assert similarity.argmax(axis=1).tolist() == paraphrase


def test_the_library_lists_minilm_as_an_embedding_model(minilm_model: Path) -> None:
    (paths.models_dir() / minilm_model.name).symlink_to(minilm_model)
    (entry,) = [e for e in installed_models() if e.source == "local"]
    assert (entry.name, entry.embedding) == ("all-MiniLM-L6-v2-f16", True)


def test_a_collection_embedded_by_minilm_finds_by_meaning(
        minilm_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The command line's embedder loads it at its own 512-token context (it was refused at
    2,048, beyond what it was trained on), and the search finds what shares no word with the
    question."""
    from inglenook.cli import main

    folder = tmp_path / "notes"
    folder.mkdir()
    notes = {"owls": "The barn owl nests in the old mill.", "tides": "The harbour floods at dusk.",
             "bread": "Sourdough needs a starter and a hot oven.",
             "trains": "The night train to Vienna leaves at ten."}
    for name, text in notes.items():
        (folder / f"{name}.md").write_text(f"# {name.title()}\n\n{text}\n")
    assert main(["knowledge", "add", "Notes", str(folder), "--no-watch", "--embed-model",
                 str(minilm_model)]) == 0
    captured = capsys.readouterr()
    assert "4 passages embedded" in captured.out and not captured.err
    assert main(["knowledge", "search", "Notes", "-n", "1", "where", "do", "birds", "live"]) == 0
    found = capsys.readouterr().out
    assert found.startswith(f"[1] {folder / 'owls.md'}"), found
