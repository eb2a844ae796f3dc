"""The command line's embedding engine is loaded at a context the model was trained for."""

from __future__ import annotations

from pathlib import Path

from inglenook.engine.embedder import EMBED_CONTEXT, embed_context
from tests.gguf_tools import write_gguf


def test_the_embedding_context_is_at_most_the_trained_one(tmp_path: Path) -> None:
    bert = write_gguf(tmp_path / "bert.gguf", {"general.architecture": "bert",
                                               "bert.context_length": 512})
    llama = write_gguf(tmp_path / "chat.gguf", {"general.architecture": "llama",
                                                "llama.context_length": 8192})
    unknown = write_gguf(tmp_path / "unknown.gguf", {"general.architecture": "llama"})
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF not really")
    assert embed_context(str(bert)) == 512
    assert embed_context(str(llama)) == EMBED_CONTEXT == 2048
    # No length, or no header: the load says what is wrong, at the usual context.
    assert embed_context(str(unknown)) == embed_context(str(broken)) == EMBED_CONTEXT
    assert embed_context(str(tmp_path / "missing.gguf")) == EMBED_CONTEXT
