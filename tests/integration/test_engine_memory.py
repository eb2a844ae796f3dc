"""Memory you can see, on the real bundled model at the default load: the engine's report
(protocol.MemoryReport) is llama.cpp's own buffers and the process's resident memory, and
agrees with what the system measures of the engine process."""

from __future__ import annotations

from pathlib import Path

import psutil

from inglenook.core.load import LoadParams
from inglenook.core.messages import GenerationRequest, Message
from inglenook.engine import protocol as p
from inglenook.engine.client import EngineClient
from tests.integration.conftest import GREEDY


def test_the_engines_memory_report_agrees_with_the_process(bundled_model: Path,
                                                           tmp_path: Path) -> None:
    client = EngineClient(log_path=tmp_path / "engine.log")
    try:
        info = client.load(LoadParams(str(bundled_model)))
        assert client.pid is not None
        events = list(client.generate(GenerationRequest(
            1, (Message("user", "What is the capital of France?"),),
            GREEDY.replace(max_tokens=16), "chat:a")))
        stats = next(e.stats for e in events if isinstance(e, p.ReplyStats))
        report = client.memory_report()
        measured = psutil.Process(client.pid).memory_info().rss
    finally:
        client.close()
    # The status bar's figure is the process's resident memory: within 10 % of the system's.
    assert abs(report.rss_bytes - measured) <= measured * 0.1
    # The weights as llama.cpp mapped them: the file's tensors.
    assert 0.9 * bundled_model.stat().st_size <= report.weights_bytes <= (
        bundled_model.stat().st_size)
    # The KV cells of every slot, which the fit planner counts exactly for a dense model; those
    # holding the conversation now are its share.
    assert report.kv_bytes == info.kv_bytes
    # The default load's slots share one pool (with a KV cache per reply: a context each).
    assert info.kv_pool == info.n_ctx and info.n_slots > 1
    cells = info.kv_pool
    assert report.kv_used_bytes == report.kv_bytes * stats.context_used // cells or (
        report.kv_used_bytes == report.kv_bytes * (stats.context_used - 1) // cells)
    assert report.compute_bytes > 0
    # What llama.cpp allocated and the resident memory tell the same story: the weights and
    # the KV cells (zeroed when allocated) are resident, the compute buffers partly.
    assert report.weights_bytes + report.kv_bytes < report.rss_bytes < (
        report.weights_bytes + report.kv_bytes + report.compute_bytes + (128 << 20))
