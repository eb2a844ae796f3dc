"""Ollama's clients as they talk to it, on a fake engine host (scripted replies): the request
shapes of Zed (crates/ollama: `options.num_ctx` and `keep_alive` with every chat), Continue
(`raw` autocomplete with Ollama's options, `suffix`, `/api/show`'s parameters and template),
Open WebUI (":latest" added to names; the root check; load and unload idioms), through the
official `ollama` client where it can send them and raw HTTP where it cannot."""

from __future__ import annotations

import json
from collections.abc import Iterator

import ollama
import pytest
from gguf import GGMLQuantizationType

from inglenook import paths
from inglenook.engine.client import EngineClient
from tests.gguf_tools import write_gguf
from tests.helpers.api import Served, request, serving

TINY = {"general.architecture": "llama", "general.name": "Tiny Coder", "general.file_type": 7,
        "llama.block_count": 2, "llama.context_length": 2048, "llama.embedding_length": 64,
        "llama.attention.head_count": 2, "llama.attention.head_count_kv": 2,
        "tokenizer.ggml.fim_pre_token_id": 5, "tokenizer.ggml.fim_suf_token_id": 6,
        "tokenizer.ggml.fim_mid_token_id": 7,
        "tokenizer.chat_template": "{% for m in messages %}{{ m.content }}{% endfor %}"}
ASK = [{"role": "user", "content": "hello there"}]



@pytest.fixture
def served(echo_engine: EngineClient) -> Iterator[Served]:
    with serving(echo_engine, ollama=True) as s:
        yield s


@pytest.fixture
def coder() -> str:
    """A second model in the library, not loaded: a coder with fill-in-the-middle tokens."""
    write_gguf(paths.models_dir() / "tiny-coder-Q8_0.gguf", TINY,
               [("token_embd.weight", (4096,), GGMLQuantizationType.F32, None)])
    return "tiny-coder-Q8_0"


def loaded_name(served: Served) -> str:
    return served.server.link.model_name or ""


def lines(raw: bytes) -> list[dict]:
    return [json.loads(line) for line in raw.splitlines() if line.strip()]


def test_the_root_check_says_ollama_is_running(served: Served) -> None:
    got = request(served.port, "GET", "/")
    assert (got.status, got.body) == (200, b"Ollama is running")
    head = request(served.port, "HEAD", "/")
    assert head.status == 200 and head.body == b""


def test_zeds_chat_with_num_ctx_and_keep_alive(served: Served) -> None:
    """Zed sends options.num_ctx (its max_tokens setting) and keep_alive with every chat."""
    model = loaded_name(served)
    n_ctx = served.server.link.model_info("").n_ctx  # type: ignore[union-attr]
    body = {"model": model, "messages": ASK, "stream": True, "keep_alive": "5m",
            "options": {"num_ctx": n_ctx, "temperature": 0.7, "stop": []}, "think": False}
    got = request(served.port, "POST", "/api/chat", body)
    assert got.status == 200, got.body
    parts = lines(got.body)
    assert "".join(p["message"]["content"] for p in parts) == "Echo: hello there"
    assert "x-inglenook-warning" not in got.headers
    bigger = request(served.port, "POST", "/api/chat",
                     {**body, "options": {"num_ctx": n_ctx * 4}})
    assert bigger.status == 200
    assert f"num_ctx {n_ctx * 4}" in bigger.headers["x-inglenook-warning"]


def test_the_options_ollama_clients_send_that_change_nothing_are_accepted(
        served: Served) -> None:
    options = {"num_ctx": 2048, "num_thread": 4, "num_gpu": 0, "num_batch": 512,
               "use_mmap": True, "use_mlock": False, "main_gpu": 0, "low_vram": False,
               "num_keep": 4, "num_predict": -1, "repeat_last_n": 64, "typical_p": 1.0,
               "mirostat": 0, "mirostat_tau": 5.0, "mirostat_eta": 0.1, "tfs_z": 1.0}
    with ollama.Client(host=served.url) as client:
        reply = client.chat(model=loaded_name(served), messages=ASK, options=options,
                            stream=False)
        assert reply.message.content == "Echo: hello there"
        with pytest.raises(ollama.ResponseError, match="tfs_z") as caught:
            client.chat(model=loaded_name(served), messages=ASK, options={"tfs_z": 0.5})
        assert caught.value.status_code == 400


def test_continues_raw_autocomplete_and_suffix(served: Served) -> None:
    """Continue's autocomplete: /api/generate with raw: true and its own options."""
    body = {"model": loaded_name(served), "prompt": "def add(a, b):", "raw": True,
            "stream": True, "keep_alive": 1800,
            "options": {"temperature": 0.01, "num_predict": 256, "stop": ["\n\n"],
                        "num_ctx": 2048, "num_thread": 2}}
    got = request(served.port, "POST", "/api/generate", body)
    assert got.status == 200, got.body
    assert "".join(p["response"] for p in lines(got.body)) == "Echo: def add(a, b):"
    with ollama.Client(host=served.url) as client:
        filled = client.generate(model=loaded_name(served), prompt="a = ", suffix="\nprint(a)")
        assert filled.response == "Echo: a = \nprint(a)"


def test_show_answers_every_listed_model_loaded_or_not(served: Served, coder: str) -> None:
    with ollama.Client(host=served.url) as client:
        listed = {m.model: m for m in client.list().models}
        assert set(listed) == {loaded_name(served), coder}
        for entry in listed.values():
            assert (entry.size or 0) > 0 and len(entry.digest or "") == 64
        shown = client.show(coder)
        assert "num_ctx 2048" in (shown.parameters or "")
        assert ".Suffix" in (shown.template or "")  # Continue's test for fill-in-the-middle
        assert "insert" in (shown.capabilities or [])
        assert (shown.modelinfo or {})["llama.context_length"] == 2048
        assert client.show(f"{coder}:latest").parameters == shown.parameters
        loaded = client.show(loaded_name(served))
        assert "tools" in (loaded.capabilities or [])
        with pytest.raises(ollama.ResponseError) as caught:
            client.show("no-such-model")
        assert caught.value.status_code == 404


def test_open_webuis_latest_tag_names_the_file(served: Served) -> None:
    with ollama.Client(host=served.url) as client:
        reply = client.chat(model=f"{loaded_name(served)}:latest", messages=ASK)
        assert reply.message.content == "Echo: hello there"


def test_load_and_unload_idioms(served: Served, coder: str) -> None:
    """A request with a model and nothing to answer loads it; keep_alive 0 unloads it. It
    never starts a generation."""
    with ollama.Client(host=served.url) as client:
        loaded = client.chat(model=coder, messages=[])
        assert (loaded.done, loaded.done_reason) == (True, "load")
        assert coder in [m.model for m in client.ps().models]
        gone = client.generate(model=coder, keep_alive=0)
        assert (gone.done, gone.done_reason) == (True, "unload")
        assert coder not in [m.model for m in client.ps().models]
        again = client.generate(model=coder)
        assert again.done_reason == "load"
        window = request(served.port, "POST", "/api/generate",
                         {"model": loaded_name(served), "keep_alive": 0})
        assert window.status == 200 and "stays loaded" in window.headers["x-inglenook-warning"]
    assert served.server.board.get().tokens == 0  # nothing was generated


@pytest.mark.parametrize("path", ["/api/create", "/api/copy", "/api/push"])
def test_what_is_not_done_here_answers_in_ollamas_shape(served: Served, path: str) -> None:
    got = request(served.port, "POST", path, {"model": "llama3"})
    assert got.status == 501 and set(got.json()) == {"error"}
    gone = request(served.port, "DELETE", "/api/delete", {"model": "llama3"})
    assert gone.status == 501 and "Library" in gone.json()["error"]
