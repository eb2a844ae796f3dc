"""The compatibility check against the real engine: copies of the bundled model whose
architecture or pre-tokenizer name is unknown are called "won't load" and llama.cpp does refuse
them; a name stored only as the tail of a longer string in libllama ("qwen2") is called known
and llama.cpp does load it."""

from __future__ import annotations

from pathlib import Path

import pytest

from inglenook.core.load import LoadParams
from inglenook.engine.client import EngineClient, EngineError
from inglenook.models import compat
from inglenook.models.gguf import read_header
from tests.gguf_tools import rewrite_metadata


@pytest.mark.parametrize("changes", [
    {"general.architecture": "zeta9"},
    {"tokenizer.ggml.pre": "zeta9-bpe"},
], ids=["architecture", "pre-tokenizer"])
def test_what_the_check_calls_unloadable_does_not_load(
        engine: EngineClient, bundled_model: Path, tmp_path: Path,
        changes: dict[str, object]) -> None:
    copy = rewrite_metadata(bundled_model, tmp_path / "renamed.gguf", changes)
    verdict = compat.check(read_header(copy))
    assert verdict.wont_load, verdict
    assert "zeta9" in verdict.summary
    with pytest.raises(EngineError):
        engine.load(LoadParams(str(copy), n_ctx=512))
    assert engine.alive
    engine.load(LoadParams(str(bundled_model), n_ctx=4096))


def test_a_tail_merged_name_is_known_and_loads(
        engine: EngineClient, bundled_model: Path, tmp_path: Path) -> None:
    lib = compat.bundled_engine()
    assert lib is not None
    data = lib.path.read_bytes()
    if b"\0qwen2\0" in data:
        pytest.skip("this build stores qwen2 as a string of its own")
    copy = rewrite_metadata(bundled_model, tmp_path / "qwen2-pre.gguf",
                            {"tokenizer.ggml.pre": "qwen2"})
    assert compat.check(read_header(copy)).status == "ok"
    info = engine.load(LoadParams(str(copy), n_ctx=512))
    assert info.n_ctx == 512
    engine.load(LoadParams(str(bundled_model), n_ctx=4096))
