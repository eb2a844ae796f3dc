"""Remote engines without a server: addresses, model lists, the request body each kind of
server gets, and reading a streamed reply (text, reasoning, usage, errors, a cut-off stream)."""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from PIL import Image

from inglenook.core.images import ImageRefused
from inglenook.core.messages import GenerationRequest, ImageRef, Message
from inglenook.core.sampling import SamplingParams
from inglenook.engine import protocol as p
from inglenook.engine.remote_api import Endpoint, normalize_base_url, parse_models
from inglenook.engine.remote_dialects import (
    STANDARD,
    chat_body,
    detect_server,
    unsendable,
    unsent_settings,
)
from inglenook.engine.remote_stream import KEPT, ReplyStream

SAMPLING = SamplingParams(temperature=0.3, top_k=0, top_p=0.9, min_p=0.1, repeat_penalty=1.2,
                          presence_penalty=0.5, frequency_penalty=0.25, seed=7, max_tokens=64,
                          stop=("a", "b", "c", "d", "e"), mirostat_mode=2)
REQUEST = GenerationRequest(1, (Message("system", "Be brief."), Message("user", "Hi")), SAMPLING)


@pytest.mark.parametrize(("raw", "expected"), [
    ("http://gpu-box:8000", "http://gpu-box:8000/v1"),
    ("gpu-box:8000/", "http://gpu-box:8000/v1"),
    ("https://api.example.com/openai/v1/", "https://api.example.com/openai/v1"),
    ("http://127.0.0.1:8080/v1/chat/completions", "http://127.0.0.1:8080/v1"),
])
def test_base_urls_are_normalized(raw: str, expected: str) -> None:
    assert normalize_base_url(raw) == expected


@pytest.mark.parametrize("raw", ["", "ftp://host/v1", "http://host:99999/v1", "http:///v1",
                                 "http://host/v1?x=1"])
def test_unusable_addresses_are_refused_with_a_sentence(raw: str) -> None:
    with pytest.raises(ValueError, match=r"\w+ \w+"):
        normalize_base_url(raw)


def test_a_key_over_plain_http_to_another_machine_is_flagged() -> None:
    assert Endpoint("http://gpu-box:8000/v1", "k").key_in_clear
    assert not Endpoint("https://gpu-box/v1", "k").key_in_clear
    assert not Endpoint("http://127.0.0.1:8000/v1", "k").key_in_clear
    assert not Endpoint("http://gpu-box:8000/v1").key_in_clear


def test_what_no_remote_engine_is_sent_is_named() -> None:
    ask = GenerationRequest(1, (Message("user", "x"),))
    assert unsendable(ask) == ""
    odd = GenerationRequest(1, (Message("user", "x"),), reply_format="json", logprobs=0)
    assert unsendable(odd) == "a reply format (JSON), logprobs"


def test_model_lists_of_different_servers() -> None:
    vllm = parse_models({"object": "list", "data": [
        {"id": "Qwen/Qwen2.5-32B", "owned_by": "vllm", "max_model_len": 32768}]})
    assert vllm is not None and vllm[0].n_ctx == 32768
    assert detect_server(m.owned_by for m in vllm) == "vllm"
    llama = parse_models({"data": [{"id": "m.gguf", "owned_by": "llamacpp",
                                    "meta": {"n_ctx_train": 8192}}, {"no id": 1}, "junk"]})
    assert llama is not None and [m.id for m in llama] == ["m.gguf"] and llama[0].n_ctx == 8192
    assert detect_server(["me"]) == "llama-cpp-python"
    assert detect_server(["someone"], "ollama/0.5") == "ollama"
    assert detect_server(["openai", "system"]) == "openai"
    assert parse_models({"models": []}) is None and parse_models([1]) is None


def test_every_server_gets_the_openai_fields() -> None:
    for server in ("openai", "vllm", "inglenook", "llama.cpp", "ollama"):
        body = chat_body(REQUEST, "m", server)
        assert body["model"] == "m" and body["stream"] is True
        assert body["messages"] == [{"role": "system", "content": "Be brief."},
                                    {"role": "user", "content": "Hi"}]
        assert (body["temperature"], body["top_p"], body["seed"], body["max_tokens"]) == \
            (0.3, 0.9, 7, 64)
        assert (body["presence_penalty"], body["frequency_penalty"]) == (0.5, 0.25)
        assert body["stream_options"] == {"include_usage": True}


def test_a_plain_openai_server_gets_no_extensions_and_at_most_four_stops() -> None:
    body = chat_body(REQUEST, "gpt", "openai")
    assert set(body) - {"model", "messages", "stream", "stream_options"} == set(STANDARD)
    assert body["stop"] == ["a", "b", "c", "d"]
    assert set(unsent_settings("openai", SAMPLING)) == {"top_k", "min_p", "repeat_penalty",
                                                        "mirostat_mode", "stop"}


def test_extensions_go_where_they_are_read_under_their_names_there() -> None:
    vllm = chat_body(REQUEST, "m", "vllm")
    assert (vllm["top_k"], vllm["min_p"], vllm["repetition_penalty"]) == (-1, 0.1, 1.2)
    assert "repeat_penalty" not in vllm and "mirostat" not in vllm
    llama = chat_body(REQUEST, "m", "llama.cpp")
    assert (llama["top_k"], llama["repeat_penalty"], llama["mirostat"]) == (0, 1.2, 2)
    assert llama["stop"] == list(SAMPLING.stop)
    ours = chat_body(REQUEST, "m", "inglenook")
    assert {"top_k", "min_p", "repeat_penalty"} <= set(ours) and "mirostat_mode" not in ours


def test_random_seed_and_unlimited_length_are_left_to_the_server() -> None:
    body = chat_body(GenerationRequest(1, (Message("user", "x"),), SamplingParams()), "m",
                     "openai")
    assert "seed" not in body and "max_tokens" not in body and "stop" not in body


# ---- reading a stream ---------------------------------------------------------------------------
@dataclass
class Sse:
    data: str
    event: str = "message"


def chunk(content: str | None = None, finish: str | None = None, **delta: str) -> Sse:
    if content is not None:
        delta["content"] = content
    return Sse(json.dumps({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}))


def run(events: list[Sse], cancelled: bool = False) -> tuple[str, list[object]]:
    reply = ReplyStream(5, "gpu-box:8000", 0.0)
    out: list[object] = list(reply.read(events, lambda: False))
    out += list(reply.end(cancelled, n_ctx=4096, seed=3))
    text = "".join(e.text for e in out if isinstance(e, p.Delta))
    assert sum(isinstance(e, p.Finished) for e in out) == 1 and isinstance(out[-1], p.Finished)
    return text, out


def test_a_whole_reply_with_usage() -> None:
    usage = {"prompt_tokens": 12, "completion_tokens": 3,
             "prompt_tokens_details": {"cached_tokens": 4}}
    text, out = run([chunk("", role="assistant"), chunk("Hel"), chunk("lo"), chunk("!"),
                     chunk(finish="stop"), Sse(json.dumps({"choices": [], "usage": usage})),
                     Sse("[DONE]")])
    assert text == "Hello!"
    (stats,) = [e.stats for e in out if isinstance(e, p.ReplyStats)]
    assert (stats.prompt_tokens, stats.cached_tokens, stats.generated_tokens) == (12, 4, 3)
    assert (stats.context_used, stats.n_ctx, stats.seed) == (15, 4096, 3)
    assert stats.ttft_s > 0
    assert out[-1] == p.Finished(5, p.Finish("stop"))


def test_without_usage_the_chunks_are_counted_and_length_is_reported() -> None:
    _, out = run([chunk("a"), chunk("b"), chunk(finish="length"), Sse("[DONE]")])
    (stats,) = [e.stats for e in out if isinstance(e, p.ReplyStats)]
    assert stats.generated_tokens == 2 and stats.prompt_tokens == 0
    assert out[-1].finish.reason == "length"  # type: ignore[attr-defined]


def test_reasoning_sent_apart_is_kept_between_think_tags() -> None:
    text, _ = run([chunk(reasoning_content="Let me"), chunk(reasoning_content=" think."),
                   chunk("Yes."), chunk(finish="stop")])
    assert text == "<think>Let me think.</think>Yes."
    unfinished, _ = run([chunk(reasoning="Hmm")])
    assert unfinished == "<think>Hmm</think>"


def test_a_stream_cut_off_keeps_the_text_and_says_so() -> None:
    text, out = run([chunk("Part"), chunk("ial")])
    finish = out[-1].finish  # type: ignore[attr-defined]
    assert text == "Partial" and finish.reason == "error"
    assert "closed the connection before the reply ended" in finish.message
    assert finish.message.endswith(KEPT)


def test_an_error_inside_the_stream_is_shown_with_the_servers_words() -> None:
    text, out = run([chunk("Hi"), Sse(json.dumps({"error": {"message": "CUDA out of memory"}}))])
    finish = out[-1].finish  # type: ignore[attr-defined]
    assert text == "Hi" and finish.reason == "error"
    assert "gpu-box:8000 reported an error during the reply: CUDA out of memory" in \
        finish.message
    _, garbled = run([Sse("{not json")])
    assert "not a reply chunk" in garbled[-1].finish.message  # type: ignore[attr-defined]
    _, deep = run([Sse("[" * 100_000 + "]" * 100_000)])  # deeper than Python's stack
    assert "not a reply chunk" in deep[-1].finish.message  # type: ignore[attr-defined]


def test_a_stop_wins_over_how_the_stream_ended() -> None:
    _, out = run([chunk("a")], cancelled=True)
    assert out[-1].finish == p.Finish("cancelled")  # type: ignore[attr-defined]


def test_images_go_to_a_remote_server_as_data_urls_and_a_changed_one_is_refused(
        tmp_path: Path) -> None:
    png = tmp_path / "cat.png"
    Image.new("RGB", (4, 3), (200, 10, 10)).save(png)
    ref = ImageRef(hashlib.sha256(png.read_bytes()).hexdigest(), str(png))
    request = GenerationRequest(1, (Message("user", "What is it?", images=(ref,)),), SAMPLING)
    content = chat_body(request, "m", "llama.cpp")["messages"][0]["content"]
    url = f"data:image/png;base64,{base64.b64encode(png.read_bytes()).decode()}"
    assert content == [{"type": "image_url", "image_url": {"url": url}},
                       {"type": "text", "text": "What is it?"}]
    png.write_bytes(b"not the picture that was attached")
    with pytest.raises(ImageRefused, match=r"cat\.png changed since it was attached"):
        chat_body(request, "m", "llama.cpp")
