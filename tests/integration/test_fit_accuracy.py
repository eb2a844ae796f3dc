"""The fit planner's figure for a load (ModelInfo.memory_bytes, models/fit.py) against what the
engine process really holds at work: its resident memory after a prompt that fills most of the
context, as the status bar shows it (MemoryReport.rss_bytes). Within 10 % (issue 36)."""

from __future__ import annotations

from pathlib import Path

import pytest

from inglenook.core.load import LoadParams
from inglenook.core.messages import GenerationRequest, RawPrompt
from inglenook.engine.client import EngineClient
from tests.integration.conftest import GREEDY

N_CTX = 2048


def planned_over_resident(model: Path, tmp_path: Path, **options: object) -> float:
    client = EngineClient(log_path=tmp_path / "engine.log")
    try:
        info = client.load(LoadParams(str(model), n_ctx=N_CTX, **options))  # type: ignore[arg-type]
        prompt = RawPrompt("Once upon a time " * (N_CTX // 4 - 60))  # ~90 % of the context
        list(client.generate(GenerationRequest(1, (), GREEDY.replace(max_tokens=4), raw=prompt)))
        report = client.memory_report()
        assert report.kv_used_bytes > 0.8 * report.kv_bytes / max(1, info.n_slots)
        return info.memory_bytes / report.rss_bytes
    finally:
        client.close()


@pytest.mark.parametrize("options", [
    {"n_slots": 1},  # no flash attention: the attention scores of a full batch
    {"n_slots": 1, "flash_attn": True},
    {"n_slots": 2, "kv_pool": N_CTX},  # a pool (flash attention on)
], ids=["scores", "flash", "pool"])
def test_the_planned_memory_is_what_the_engine_holds_at_work(
        bundled_model: Path, tmp_path: Path, options: dict[str, object]) -> None:
    assert 0.9 <= planned_over_resident(bundled_model, tmp_path, **options) <= 1.1


@pytest.mark.long  # another architecture and a 262k vocabulary: bench/kv_bench reports it
def test_the_planned_memory_holds_for_gemma(gemma_model: Path, tmp_path: Path) -> None:
    assert 0.9 <= planned_over_resident(gemma_model, tmp_path, n_slots=1,
                                        flash_attn=True) <= 1.1
