"""Embeddings on the real engine: the bundled chat model in llama.cpp's embedding mode (mean
pooling, said so), a copy whose header names a pooling (an embedding model), texts cut or
refused past the context, and the chat lanes untouched; then through the API with the official
openai and ollama clients. The vectors' quality is never asserted: the model is tiny."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import ollama
import openai
import pytest

from inglenook.core.load import LoadParams
from inglenook.core.messages import Message
from inglenook.core.sampling import SamplingParams
from inglenook.engine.client import EmbedRefused, EngineClient
from inglenook.engine.host.embedding import CHAT_MODEL_NOTE
from tests.gguf_tools import GGUFValueType, Typed, rewrite_metadata
from tests.helpers.api import serving
from tests.integration.conftest import ask

LONG = "word " * 300  # more tokens than the 256 of the context


@pytest.fixture(scope="module")
def engine(bundled_model: Path, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[EngineClient]:
    client = EngineClient(log_path=tmp_path_factory.mktemp("logs") / "engine.log")
    client.load(LoadParams(str(bundled_model), n_ctx=256, n_slots=1))
    yield client
    client.close()


def test_a_chat_model_embeds_with_mean_pooling_and_says_so(engine: EngineClient) -> None:
    greedy = SamplingParams(temperature=0.0, seed=1, max_tokens=6)
    before, _ = ask(engine, (Message("user", "Hi"),), 1, greedy)
    made = engine.embed(["a cat", "a dog", "a cat", LONG])
    rows = made.vectors()
    assert rows.shape == (4, made.dimensions) and made.dimensions == 576
    assert np.allclose(np.linalg.norm(rows, axis=1), 1.0, atol=1e-5)
    assert np.allclose(rows[0], rows[2], atol=1e-5) and not np.allclose(rows[0], rows[1])
    assert made.truncated == (3,) and made.tokens[3] == 256
    assert (made.pooling, made.embedding_model, made.note) == ("mean", False, CHAT_MODEL_NOTE)
    assert ask(engine, (Message("user", "Hi"),), 2, greedy)[0] == before  # its own context
    tokens = engine.embed([[1, 2, 3]])
    assert tokens.tokens == (3,)
    with pytest.raises(EmbedRefused, match="256"):
        engine.embed([LONG], truncate=False)
    with pytest.raises(EmbedRefused, match="token id"):
        engine.embed([[10**7]])


def test_a_pooling_in_the_header_makes_an_embedding_model(
        bundled_model: Path, tmp_path: Path) -> None:
    copy = rewrite_metadata(bundled_model, tmp_path / "embedder.gguf",
                            {"llama.pooling_type": Typed(GGUFValueType.UINT32, 2)})
    client = EngineClient(log_path=tmp_path / "engine.log")
    try:
        client.load(LoadParams(str(copy), n_ctx=256, n_slots=1))
        made = client.embed(["a cat"])
        assert (made.pooling, made.embedding_model, made.note) == ("cls", True, "")
        with serving(client, ollama=True) as served:
            with openai.OpenAI(base_url=served.base_url, api_key="x", max_retries=0) as api:
                raw = api.embeddings.with_raw_response.create(model="", input=["a cat"])
                assert "x-inglenook-warning" not in raw.headers  # it is one
                assert raw.parse().data[0].embedding == pytest.approx(
                    made.vectors()[0].tolist(), abs=1e-5)
            with ollama.Client(host=served.url) as olla:
                (row,) = olla.embed(model="embedder", input="a cat").embeddings
                assert row == pytest.approx(made.vectors()[0].tolist(), abs=1e-5)
    finally:
        client.close()


def test_a_collection_with_the_bundled_model_as_embedder(
        bundled_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from inglenook.cli import main

    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "owls.md").write_text("# Owls\n\nThe barn owl nests in the old mill.\n")
    (folder / "tides.md").write_text("# Tides\n\nThe harbour floods at dusk.\n")
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF not really")
    assert main(["knowledge", "add", "Bad", str(folder), "--embed-model", str(broken)]) == 0
    captured = capsys.readouterr()
    assert "Bad: 2 added" in captured.out and "could not be loaded" in captured.err
    assert main(["knowledge", "add", "Notes", str(folder), "--embed-model",
                 str(bundled_model)]) == 0
    captured = capsys.readouterr()
    assert "2 passages embedded" in captured.out and "not an embedding model" in captured.err
    assert main(["knowledge", "list"]) == 0
    listed = capsys.readouterr().out
    assert "vectors: 2 from" in listed and "vectors failed: The embedding model" in listed
    # A search with these vectors: bench/knowledge_bench.py's quick form (in make test).
