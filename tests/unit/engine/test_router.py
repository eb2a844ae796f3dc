"""The router's several models, on fake engine hosts (the real protocol, no llama.cpp): which
engine a model name reaches, models loaded just in time, the memory budget (least recently used
first, never one in use), the idle time-out, and what the window can read."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from gguf import GGMLQuantizationType

from inglenook.core.load import LoadParams
from inglenook.core.messages import GenerationRequest, Message
from inglenook.engine import protocol as p
from inglenook.engine.client import EngineClient, EngineError
from inglenook.engine.router import EngineRouter, _estimate
from tests.gguf_tools import write_gguf
from tests.helpers.api import Watch

LLAMA = {"general.architecture": "llama", "general.name": "Tiny", "general.file_type": 10,
         "llama.block_count": 2, "llama.context_length": 2048, "llama.embedding_length": 64,
         "llama.attention.head_count": 2, "llama.attention.head_count_kv": 2,
         "tokenizer.chat_template": "{% for m in messages %}{{ m.content }}{% endfor %}"}


def tiny(path: Path) -> Path:
    return write_gguf(path, LLAMA, [("token_embd.weight", (1 << 16,),
                                     GGMLQuantizationType.F32, None)])


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    return {name: tiny(tmp_path / f"{name}.gguf") for name in ("window", "alpha", "beta")}


def router_of(tmp_path: Path, files: dict[str, Path], budget: int = 0,
              keep_alive_s: float = 300.0) -> EngineRouter:
    script = tmp_path / "script.json"
    if not script.exists():
        script.write_text(json.dumps({"default": {"text": "Echo: {last}", "token_ms": 0}}))
    command = [sys.executable, "-m", "tests.helpers.fake_host", str(script)]
    router = EngineRouter(
        EngineClient(log_path=tmp_path / "engine.log", command=command),
        library=lambda: [(name, str(path)) for name, path in files.items()],
        budget=lambda: budget, keep_alive_s=keep_alive_s)
    router.load(LoadParams(str(files["window"])))
    return router


@pytest.fixture
def router(tmp_path: Path, files: dict[str, Path]) -> Iterator[EngineRouter]:
    r = router_of(tmp_path, files)
    yield r
    r.close()


def ask(router: EngineRouter, group: str, rid: int, text: str = "hi",
        keep_alive: float | None = None) -> str:
    events = list(router.generate(GenerationRequest(rid, (Message("user", text),)), group,
                                  keep_alive))
    assert isinstance(events[-1], p.Finished), events[-1]
    return "".join(e.text for e in events if isinstance(e, p.Delta))


def test_a_name_reaches_the_windows_model_or_a_model_of_the_library(
        router: EngineRouter, files: dict[str, Path]) -> None:
    assert router.resolve("") == router.resolve("gpt-4o") == ""  # unknown: the window's
    assert router.resolve("window") == router.resolve("WINDOW.gguf") == ""
    assert router.resolve("alpha") == str(files["alpha"])
    assert router.names()[0] == "window" and set(router.names()) == {"window", "alpha", "beta"}


def test_a_named_model_is_loaded_in_an_engine_of_its_own(
        router: EngineRouter, files: dict[str, Path]) -> None:
    alpha = str(files["alpha"])
    assert ask(router, alpha, 1) == "Echo: hi"
    engine = router.engine_of(alpha)
    assert engine is not None and engine.pid != router.local.pid and engine.alive
    listed = router.loaded_models()
    assert [(m.name, m.by_window) for m in listed] == [("window", True), ("alpha", False)]
    assert listed[1].memory_bytes == _estimate(LoadParams(alpha)) > 0
    assert ask(router, "", 2) == "Echo: hi"  # the window's model, unchanged
    router.unload_model(alpha)
    assert router.engine_of(alpha) is None and not engine.alive


def test_the_least_recently_used_idle_model_makes_room(
        tmp_path: Path, files: dict[str, Path]) -> None:
    need = _estimate(LoadParams(str(files["alpha"])))
    r = router_of(tmp_path, files, budget=int(need * 2.5))  # the window's (0) and two more
    try:
        alpha, beta = str(files["alpha"]), str(files["beta"])
        ask(r, alpha, 1)
        ask(r, beta, 2)
        assert {m.name for m in r.loaded_models()} == {"window", "alpha", "beta"}
        third = tiny(tmp_path / "gamma.gguf")
        files["gamma"] = third
        ask(r, beta, 3)  # beta used last: alpha goes first
        ask(r, str(third), 4)
        assert {m.name for m in r.loaded_models()} == {"window", "beta", "gamma"}
    finally:
        r.close()


def test_a_model_in_use_is_never_unloaded_to_make_room(
        tmp_path: Path, files: dict[str, Path]) -> None:
    need = _estimate(LoadParams(str(files["alpha"])))
    r = router_of(tmp_path, files, budget=int(need * 1.5))
    try:
        alpha, beta = str(files["alpha"]), str(files["beta"])
        streaming = r.generate(GenerationRequest(1, (Message("user", "hi"),)), alpha)
        assert isinstance(next(streaming), p.Started)  # alpha writes a reply now
        with pytest.raises(EngineError, match="left for models"):
            ask(r, beta, 2)
        list(streaming)
        assert ask(r, beta, 3) == "Echo: hi"  # idle now: alpha made room
        assert r.engine_of(alpha) is None
    finally:
        r.close()


def test_an_idle_model_is_unloaded_after_its_keep_alive(
        tmp_path: Path, files: dict[str, Path]) -> None:
    r = router_of(tmp_path, files)
    loaded: Watch[int] = Watch(1)
    r.on_change = lambda: loaded.update(len(r.loaded_models()))
    try:
        alpha = str(files["alpha"])
        ask(r, alpha, 1, keep_alive=0.5)
        assert r.loaded_models()[1].keep_alive_s == 0.5
        loaded.wait_for(lambda n: n == 1, timeout=20)
        assert r.engine_of(alpha) is None and r.model is not None  # the window's stays
    finally:
        r.close()


def test_the_router_declares_the_windows_engines_capabilities(router: EngineRouter) -> None:
    assert router.can_tune and router.keeps_states and router.can_inspect
    assert router.accepted_sampling is None and router.lanes() == 1
    result = router.tune(-1)
    assert result.n_threads == 2 and result.trials  # the fake host's figures


def test_embeddings_come_from_the_model_named_loaded_just_in_time(
        router: EngineRouter, files: dict[str, Path]) -> None:
    assert router.can_embed
    window = router.embed(["a cat"]).vectors()
    alpha = str(files["alpha"])
    named = router.embed(["a cat"], group=alpha, keep_alive=7)
    assert router.engine_of(alpha) is not None and router.loaded_models()[1].keep_alive_s == 7
    assert named.vectors().tolist() == window.tolist()  # the fake host's: the text's hash
    assert router.loaded_models()[1].busy == 0


def test_the_estimate_of_a_vision_model_counts_its_projector(
        files: dict[str, Path], tmp_path: Path) -> None:
    from inglenook.models.gguf import read_header
    from inglenook.models.projector import projector_info
    from tests.mmproj_tools import write_mmproj

    mmproj = write_mmproj(tmp_path / "mmproj-alpha.gguf", 64)  # LLAMA's n_embd
    projector = projector_info(read_header(mmproj))
    assert projector is not None
    alpha = str(files["alpha"])
    seeing = _estimate(LoadParams(alpha, mmproj_path=str(mmproj), n_slots=1))
    assert seeing == _estimate(LoadParams(alpha, n_slots=1)) + projector.memory_bytes


def test_the_estimate_counts_the_shared_pool_at_the_defaults(files: dict[str, Path]) -> None:
    """Four replies at once share one pool of the context length by default: the router's
    budget counts one context of KV for them, not four (as a KV cache per reply does)."""
    from inglenook.models import fit
    from inglenook.models.gguf import read_header

    alpha = str(files["alpha"])
    one_context = fit.kv_cache_bytes(fit.shape_from_header(read_header(alpha)), 2048, "f16")
    pooled = _estimate(LoadParams(alpha, n_slots=4))
    per_reply = LoadParams(alpha, n_slots=4, kv_per_reply=True, flash_attn=True)
    assert _estimate(per_reply) == pooled + 3 * one_context
