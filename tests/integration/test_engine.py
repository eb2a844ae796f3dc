"""The engine host with the real bundled model: streaming, KV reuse, stop, bad input, crashes."""

from __future__ import annotations

import os
import re
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from inglenook.core.load import MAX_CTX, MAX_SLOTS, LoadParams
from inglenook.core.messages import GenerationRequest, Message
from inglenook.engine import client as client_module
from inglenook.engine import protocol as p
from inglenook.engine.client import EngineClient, EngineCrashed, EngineError
from tests.gguf_tools import rewrite_metadata
from tests.integration.conftest import GREEDY, ask, finish_of, stats_of

QUESTION = (Message("user", "What is the capital of France?"),)
LONG = GREEDY.replace(max_tokens=400)
STORY = (Message("user", "Write a long story about a dragon who learns to bake bread."),)


def test_reply_streams_in_order_and_is_deterministic(engine: EngineClient) -> None:
    text, events = ask(engine, QUESTION, 1, GREEDY.replace(max_tokens=40))
    assert isinstance(events[0], p.Started)
    deltas = [e for e in events if isinstance(e, p.Delta)]
    assert len(deltas) > 3
    assert all(isinstance(d.text, str) and d.text for d in deltas)
    assert finish_of(events).finish.reason in ("stop", "length")
    stats = stats_of(events).stats
    assert stats.generated_tokens > 3 and stats.decode_tok_s > 0 and stats.ttft_s > 0
    again, _ = ask(engine, QUESTION, 2, GREEDY.replace(max_tokens=40))
    assert again == text


def test_follow_up_evaluates_only_new_tokens(engine: EngineClient) -> None:
    first, events = ask(engine, QUESTION, 10, GREEDY.replace(max_tokens=40))
    turn1 = stats_of(events).stats
    follow_up = (*QUESTION, Message("assistant", first), Message("user", "And of Germany?"))
    _, events = ask(engine, follow_up, 11, GREEDY.replace(max_tokens=40))
    turn2 = stats_of(events).stats
    assert turn2.cached_tokens >= turn1.prompt_tokens
    new_tokens = turn2.prompt_tokens - turn2.cached_tokens
    assert 0 < new_tokens < 30, (turn2, turn1)


def test_stop_takes_effect_within_a_token_and_keeps_the_text(engine: EngineClient) -> None:
    request = GenerationRequest(20, STORY, LONG)
    received_after_cancel = 0
    cancelled = False
    text = ""
    events = []
    for event in engine.generate(request):
        events.append(event)
        if isinstance(event, p.Delta):
            text += event.text
            if cancelled:
                received_after_cancel += 1
            elif len(text) > 40:
                engine.cancel(20)
                cancelled = True
    finish = finish_of(events)
    assert finish.finish.reason == "cancelled"
    assert stats_of(events).stats.generated_tokens < 100
    # Deltas already in the pipe, plus at most one token decoded after the flag was seen.
    assert received_after_cancel <= 3
    # The engine is still usable after a stop.
    reply, _ = ask(engine, QUESTION, 21, GREEDY.replace(max_tokens=8))
    assert reply


def test_stop_during_a_long_prompt_evaluation(engine: EngineClient) -> None:
    long_prompt = " ".join(f"Item {i} is a small blue stone." for i in range(330))
    request = GenerationRequest(30, (Message("user", long_prompt),), LONG)
    events = []
    for event in engine.generate(request):
        events.append(event)
        if isinstance(event, p.PromptProgress) and len(events) <= 3:
            assert event.total > 2000
            engine.cancel(30)
    assert finish_of(events).finish.reason == "cancelled"
    assert not [e for e in events if isinstance(e, p.Delta)]
    reply, _ = ask(engine, QUESTION, 31, GREEDY.replace(max_tokens=8))
    assert reply


def test_prompt_longer_than_the_context_gets_a_message(engine: EngineClient) -> None:
    huge = "word " * 6000
    _, events = ask(engine, (Message("user", huge),), 40)
    finish = finish_of(events).finish
    assert finish.reason == "error"
    assert "context" in finish.message and "tokens" in finish.message


def test_malformed_gguf_is_refused_and_the_engine_stays_up(
        engine: EngineClient, bundled_model: Path, tmp_path: Path) -> None:
    broken = tmp_path / "truncated.gguf"
    broken.write_bytes(bundled_model.read_bytes()[: 40_000_000])
    with pytest.raises(EngineError, match="truncated"):
        engine.load(LoadParams(str(broken)))
    assert engine.alive
    info = engine.load(LoadParams(str(bundled_model), n_ctx=4096))
    assert info.template_source == "gguf"


def test_hostile_chat_template_is_refused(
        engine: EngineClient, bundled_model: Path, tmp_path: Path) -> None:
    canary = tmp_path / "pwned"
    hostile = tmp_path / "hostile.gguf"
    payload = ("{{ cycler.__init__.__globals__.os.popen('touch " + str(canary) + "').read() }}")
    rewrite_metadata(bundled_model, hostile, {"tokenizer.chat_template": payload})
    with pytest.raises(EngineError, match="blocked"):
        engine.load(LoadParams(str(hostile)))
    assert not canary.exists()
    engine.load(LoadParams(str(bundled_model), n_ctx=4096))


# Spends its time in one C call (2^40 list comparisons), where no sandbox check can run.
C_LEVEL_BOMB = ("{% set ns = namespace(a=[0], b=[0]) %}{% for i in range(40) %}"
                "{% set ns.a = [ns.a, ns.a] %}{% set ns.b = [ns.b, ns.b] %}{% endfor %}"
                "{{ ns.a == ns.b }}")
CHATML = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n"
          "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def test_a_template_stuck_in_c_code_fails_the_load_and_the_engine_stays_up(
        engine: EngineClient, bundled_model: Path, tmp_path: Path) -> None:
    stuck = tmp_path / "stuck.gguf"
    rewrite_metadata(bundled_model, stuck, {"tokenizer.chat_template": C_LEVEL_BOMB})
    with pytest.raises(EngineError, match=r"chat template cannot be used.*longer than"):
        engine.load(LoadParams(str(stuck)))  # used to hang, "Loading…" for ever
    assert engine.alive
    engine.load(LoadParams(str(bundled_model), n_ctx=4096))


def test_a_template_stuck_on_one_message_fails_that_reply_only(
        engine: EngineClient, bundled_model: Path, tmp_path: Path) -> None:
    stuck = tmp_path / "stuck-on-boom.gguf"
    template = "{% if messages[-1].content == 'boom' %}" + C_LEVEL_BOMB + "{% endif %}" + CHATML
    rewrite_metadata(bundled_model, stuck, {"tokenizer.chat_template": template})
    engine.load(LoadParams(str(stuck), n_ctx=2048))
    try:
        _, events = ask(engine, (Message("user", "boom"),), 60, GREEDY.replace(max_tokens=4))
        finish = finish_of(events).finish
        assert finish.reason == "error" and "longer than" in finish.message
        reply, events = ask(engine, QUESTION, 61, GREEDY.replace(max_tokens=4))
        assert finish_of(events).finish.reason in ("stop", "length") and reply
    finally:
        engine.load(LoadParams(str(bundled_model), n_ctx=4096))


def test_model_without_a_template_uses_chatml_from_its_tokens(
        engine: EngineClient, bundled_model: Path, tmp_path: Path) -> None:
    bare = tmp_path / "bare.gguf"
    rewrite_metadata(bundled_model, bare, {"tokenizer.chat_template": None})
    info = engine.load(LoadParams(str(bare), n_ctx=2048))
    assert (info.template_source, info.template_name) == ("detected", "ChatML")
    reply, _ = ask(engine, QUESTION, 50, GREEDY.replace(max_tokens=8))
    assert reply
    engine.load(LoadParams(str(bundled_model), n_ctx=4096))


def test_quantized_v_cache_without_flash_attention_is_refused(
        engine: EngineClient, bundled_model: Path) -> None:
    with pytest.raises(EngineError, match="flash attention"):
        engine.load(LoadParams(str(bundled_model), kv_cache_type="q8_0", kv_per_reply=True))
    info = engine.load(LoadParams(str(bundled_model), n_ctx=4096, kv_cache_type="q8_0",
                                  flash_attn=True, kv_per_reply=True))
    assert info.kv_cache_type == "q8_0"
    reply, _ = ask(engine, QUESTION, 60, GREEDY.replace(max_tokens=8))
    assert reply
    # The shared pool (the default) turns flash attention on itself.
    info = engine.load(LoadParams(str(bundled_model), n_ctx=4096, kv_cache_type="q8_0"))
    assert info.kv_cache_type == "q8_0" and info.flash_attn and info.kv_pool == 4096
    engine.load(LoadParams(str(bundled_model), n_ctx=4096))


def test_killed_engine_is_reported_and_can_be_restarted(
        bundled_model: Path, tmp_path: Path) -> None:
    client = EngineClient(log_path=tmp_path / "engine.log")
    try:
        client.load(LoadParams(str(bundled_model), n_ctx=2048))
        with pytest.raises(EngineCrashed, match="SIGKILL"):
            for event in client.generate(GenerationRequest(1, STORY, LONG)):
                if isinstance(event, p.Delta):
                    client.kill()
        assert not client.alive and client.model is None
        client.load(LoadParams(str(bundled_model), n_ctx=2048))
        reply, _ = ask(client, QUESTION, 2, GREEDY.replace(max_tokens=8))
        assert reply
    finally:
        client.close()


def test_a_death_met_by_a_memory_report_is_still_reported_by_check(
        bundled_model: Path, tmp_path: Path) -> None:
    client = EngineClient(log_path=tmp_path / "engine.log")
    try:
        client.load(LoadParams(str(bundled_model), n_ctx=1024))
        client.kill()
        with pytest.raises(EngineCrashed, match="SIGKILL"):
            client.memory_report()  # the status bar's thread meets the death first
        with pytest.raises(EngineCrashed, match="SIGKILL"):
            client.check()  # the engine thread must still hear of it
    finally:
        client.close()


def test_clean_shutdown_exits_zero(bundled_model: Path, tmp_path: Path) -> None:
    client = EngineClient(log_path=tmp_path / "engine.log")
    client.load(LoadParams(str(bundled_model), n_ctx=1024))
    process = client._proc
    client.close()
    assert process is not None and process.returncode == 0
    assert "Fatal Python error" not in (tmp_path / "engine.log").read_text(errors="replace")


def test_lone_surrogate_and_odd_unicode_in_a_message(engine: EngineClient) -> None:
    odd = "Bad paste \ud83d, RTL \u202eabc\u202c, e\u0301, 🌍, NUL \x00, 中文. Reply with OK."
    text, events = ask(engine, (Message("user", odd),), 70, GREEDY.replace(max_tokens=12))
    assert finish_of(events).finish.reason in ("stop", "length")
    assert text


def test_stuck_engine_is_restarted_to_honour_a_stop(
        bundled_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(client_module, "CANCEL_GRACE_S", 0.5)
    client = EngineClient(log_path=tmp_path / "engine.log")
    try:
        client.load(LoadParams(str(bundled_model), n_ctx=1024))
        events = []
        for event in client.generate(GenerationRequest(1, STORY, LONG)):
            events.append(event)
            if isinstance(event, p.Delta) and len(events) == 3:
                os.kill(client.pid, signal.SIGSTOP)  # fault injection: the host hangs
                client.cancel(1)
        finish = finish_of(events).finish
        assert finish.reason == "cancelled" and "restarting" in finish.message
        assert not client.alive
        client.load(LoadParams(str(bundled_model), n_ctx=1024))
        assert ask(client, QUESTION, 2, GREEDY.replace(max_tokens=4))[0]
    finally:
        client.close()


def test_stop_strings_end_the_reply_before_the_string(engine: EngineClient) -> None:
    full, _ = ask(engine, QUESTION, 80, GREEDY.replace(max_tokens=40))
    words = full.split()
    assert len(words) > 4
    stop = words[3]
    cut, events = ask(engine, QUESTION, 81, GREEDY.replace(max_tokens=40, stop=(stop,)))
    assert finish_of(events).finish.reason == "stop"
    assert cut == full[: full.index(stop)]


def test_engine_reports_gpu_memory_of_its_build(engine: EngineClient) -> None:
    ready = engine.ready
    assert ready is not None
    if not ready.gpu_offload_supported:  # this machine's CPU-only build
        assert (ready.vram_free, ready.vram_total) == (0, 0)
    else:
        assert 0 < ready.vram_free <= ready.vram_total


# -- memory and context checks before loading ------------------------------------------------------
def test_a_context_that_cannot_fit_is_refused_before_any_load(
        engine: EngineClient, bundled_model: Path) -> None:
    progress: list[float] = []
    # The longest context a load may ask for, for the most replies at once sharing it (the
    # default pool): ~24 GB of KV cache, more than any desktop holds.
    with pytest.raises(EngineError, match=r"largest context that fits is ([\d,]+) tokens") as info:
        engine.load(LoadParams(str(bundled_model), n_ctx=MAX_CTX, n_slots=MAX_SLOTS,
                               allow_beyond_trained=True), on_progress=progress.append)
    # llama.cpp reports progress from the first byte of the model it reads: none was read.
    assert progress == []
    message = str(info.value)
    assert f"{MAX_CTX:,} tokens, shared by {MAX_SLOTS} replies at once, needs about" in message
    assert "\n" not in message
    found = re.search(r"fits is ([\d,]+) tokens", message)
    assert found is not None
    largest = int(found[1].replace(",", ""))
    assert 0 < largest < MAX_CTX and largest % 256 == 0
    assert engine.alive
    engine.load(LoadParams(str(bundled_model), n_ctx=4096))


def test_a_context_beyond_the_trained_length_needs_an_explicit_choice(
        engine: EngineClient, bundled_model: Path) -> None:
    progress: list[float] = []
    with pytest.raises(EngineError, match="trained on a context of 8,192 tokens"):
        engine.load(LoadParams(str(bundled_model), n_ctx=16384), on_progress=progress.append)
    assert progress == []
    info = engine.load(LoadParams(str(bundled_model), n_ctx=16384, allow_beyond_trained=True))
    assert info.n_ctx == 16384 and info.n_ctx_train == 8192
    engine.load(LoadParams(str(bundled_model), n_ctx=4096))


# -- the prompt inspector --------------------------------------------------------------------------
def test_inspect_shows_the_prompt_and_leaves_the_cache_alone(engine: EngineClient) -> None:
    first, events = ask(engine, QUESTION, 90, GREEDY.replace(max_tokens=20))
    turn1 = stats_of(events).stats
    view = engine.inspect(GenerationRequest(91, (Message("user", "Something else entirely."),)))
    assert view.request_id == 91 and not view.defused and view.dropped_messages == 0
    assert view.prompt == (
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
        "Face<|im_end|>\n<|im_start|>user\nSomething else entirely.<|im_end|>\n"
        "<|im_start|>assistant\n")
    assert "".join(t.piece for t in view.tokens) == view.prompt
    assert [t.piece for t in view.tokens if t.special] == ["<|im_start|>", "<|im_end|>"] * 2 + [
        "<|im_start|>"]
    # Nothing was evaluated: the follow-up still finds the first question in the KV cache.
    follow_up = (*QUESTION, Message("assistant", first), Message("user", "And of Germany?"))
    _, events = ask(engine, follow_up, 92, GREEDY.replace(max_tokens=8))
    assert stats_of(events).stats.cached_tokens >= turn1.prompt_tokens
    # And it is the prompt a reply evaluates.
    view = engine.inspect(GenerationRequest(93, follow_up))
    assert len(view.tokens) == stats_of(events).stats.prompt_tokens


@pytest.fixture(scope="module")
def small_engine(bundled_model: Path, tmp_path_factory: pytest.TempPathFactory
                 ) -> Iterator[EngineClient]:
    """A context of 1,024: a conversation outgrows it in a few seconds of prompt reading."""
    client = EngineClient(log_path=tmp_path_factory.mktemp("logs") / "engine.log")
    client.load(LoadParams(str(bundled_model), n_ctx=1024))
    yield client
    client.close()


@pytest.mark.parametrize(("overflow", "first_kept"), [("middle", 2), ("rolling", 0)])
def test_inspect_leaves_out_what_the_context_would_leave_out(
        small_engine: EngineClient, overflow: str, first_kept: int) -> None:
    turns: list[Message] = []
    for i in range(12):
        filler = f"Earlier message number {i} about nothing much. " * 15
        turns += [Message("user", filler), Message("assistant", filler)]
    turns.append(Message("user", "Say hello."))
    request = GenerationRequest(94, tuple(turns), GREEDY.replace(max_tokens=8),
                                overflow=overflow)  # type: ignore[arg-type]
    view = small_engine.inspect(request)
    assert view.dropped_messages > 0 and view.n_ctx == 1024
    # "middle" keeps the first exchange (messages 0 and 1), "rolling" does not.
    assert view.dropped_start == first_kept
    assert ("Earlier message number 0 " in view.prompt) == (overflow == "middle")
    left_out = turns[view.dropped_start: view.dropped_start + view.dropped_messages]
    assert all(m.content not in view.prompt for m in left_out)
    after = view.dropped_start + view.dropped_messages
    assert all(m.content in view.prompt for m in turns[after:]) and "Say hello." in view.prompt
    assert len(view.tokens) <= view.n_ctx
    if overflow == "middle":  # the default: the reply leaves out what the view did
        _, events = ask(small_engine, tuple(turns), 95, GREEDY.replace(max_tokens=8))
        assert finish_of(events).finish.reason in ("stop", "length")
        stats = stats_of(events).stats
        assert stats.dropped_messages == view.dropped_messages
        assert stats.dropped_start == view.dropped_start
        assert stats.prompt_tokens == len(view.tokens) < stats.n_ctx


def test_inspect_reports_why_there_is_no_prompt(engine: EngineClient, tmp_path: Path) -> None:
    with pytest.raises(EngineError, match="context"):
        engine.inspect(GenerationRequest(96, (Message("user", "word " * 6000),)))
    client = EngineClient(log_path=tmp_path / "engine.log")
    try:
        client.start()
        with pytest.raises(EngineError, match="No model is loaded"):
            client.inspect(GenerationRequest(1, QUESTION))
    finally:
        client.close()
