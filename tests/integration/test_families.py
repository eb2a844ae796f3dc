"""Every family right: a sliding-window model (the real Gemma 3 270M, window 512), a recurrent
one (Mamba) and a mixture of experts (Qwen3-MoE; both tiny random-weight files written by
tests/family_gguf.py) through the engine, against raw llama-cpp-python with the same greedy
sampling, token for token; alone and several at once; a conversation restored equals one
continued; and each declares what its memory can do (ModelInfo.family)."""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from inglenook.core.load import LoadParams
from inglenook.core.messages import GenerationRequest, Message, RawPrompt
from inglenook.engine import protocol as p
from inglenook.engine.client import EngineClient
from tests.family_gguf import write_mamba, write_moe
from tests.integration.conftest import GREEDY

N_CTX = 1024
PROMPTS = ("def fibonacci(n):\n    ", "The capital of France is",
           "Once upon a time, in a small village by the sea,", "Ingredients for bread:\n1.")
REPLY = GREEDY.replace(max_tokens=16)
# The short form for `make test`: the indented prompt the issue saw part at its first token, and
# one more; bench/family_bench.py runs all four, longer (gemma_engine_exact).
GEMMA_PROMPTS = PROMPTS[:2]


@pytest.fixture(scope="session")
def tiny_models(bundled_model: Path, tmp_path_factory: pytest.TempPathFactory
                ) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("families")
    return {"mamba": write_mamba(folder / "mamba.gguf", bundled_model),
            "moe": write_moe(folder / "moe.gguf", bundled_model)}


def engine(model: Path, folder: Path, n_slots: int = 4, **load: object) -> EngineClient:
    client = EngineClient(log_path=folder / "engine.log")
    client.load(LoadParams(str(model), n_ctx=N_CTX, n_slots=n_slots, **load))  # type: ignore[arg-type]
    return client


def reply(client: EngineClient, rid: int, text: str, conversation: str = "") -> list[bytes]:
    """The reply's tokens, as bytes (random weights write no valid text)."""
    request = GenerationRequest(rid, (), REPLY, conversation, raw=RawPrompt(text), logprobs=0)
    return [bytes(t.chosen.utf8) for e in client.generate(request)
            if isinstance(e, p.Logprobs) for t in e.tokens]


def together(client: EngineClient, texts: tuple[str, ...], first: int) -> list[list[bytes]]:
    out: list[list[bytes]] = [[] for _ in texts]

    def run(i: int) -> None:
        out[i] = reply(client, first + i, texts[i])

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(texts))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    return out


def raw_replies(model: Path, texts: tuple[str, ...]) -> Iterator[tuple[list[bytes], list[float]]]:
    """Raw llama-cpp-python, greedy: each reply's tokens, and at each the gap between the two
    likeliest tokens' logits."""
    import llama_cpp  # the reference; the app imports llama_cpp only in engine/host/

    llm = llama_cpp.Llama(str(model), n_ctx=N_CTX, logits_all=True, verbose=False)
    try:
        for text in texts:
            llm.reset()
            tokens, gaps = [], []
            for token in llm.generate(llm.tokenize(text.encode(), add_bos=True, special=False),
                                      temp=0.0, top_k=1, repeat_penalty=1.0):
                scores = sorted(llm.scores[llm.n_tokens - 1])
                gaps.append(float(scores[-1] - scores[-2]))
                if llm.token_eos() == token or len(tokens) == REPLY.max_tokens:
                    break
                tokens.append(piece(llama_cpp, llm, token))
            yield tokens, gaps
    finally:
        llm.close()


def piece(llama_cpp: Any, llm: Any, token: int) -> bytes:
    """The token's bytes as the engine reports them (detokenize drops some whitespace)."""
    buffer = ctypes.create_string_buffer(256)
    n = llama_cpp.llama_token_to_piece(llama_cpp.llama_model_get_vocab(llm.model), token,
                                       buffer, 256, 0, False)
    return buffer.raw[:n]


def parts_only_at_near_ties(got: list[bytes], raw: list[bytes], gaps: list[float]) -> bool:
    """Equal, or parting first where raw llama.cpp's two likeliest tokens were within one
    logit: a batch of several tokens goes through other kernels than a lone token (the
    repacked Q4_K weights of an AVX2 build: gemm over four rows, gemv for one), rounding
    differently, and raw llama.cpp's own batched decoding does the same."""
    k = next((i for i, (a, b) in enumerate(zip(got, raw, strict=False)) if a != b), None)
    if k is None:
        return len(got) == len(raw)
    return gaps[k] < 1.0


# ---- sliding window: the real Gemma 3 270M ----------------------------------------------------
@pytest.mark.long  # make test runs bench/family_bench.py's quick form of it (test_bench)
def test_gemma_through_the_engine_equals_raw_llama_cpp_alone_and_at_once(
        gemma_model: Path, tmp_path: Path) -> None:
    client = engine(gemma_model, tmp_path, prompt_lookup=False)
    try:
        family = client.model.family if client.model else None
        assert family is not None and family.kind == "sliding-window"
        assert family.n_swa == 512 and family.swa_full and family.trims_anywhere
        solo = [reply(client, 10 + i, text) for i, text in enumerate(GEMMA_PROMPTS)]
        batched = together(client, GEMMA_PROMPTS, 20)
    finally:
        client.close()
    raw = list(raw_replies(gemma_model, GEMMA_PROMPTS))
    assert [r for r, _ in raw] == solo  # alone: exact
    for got, (tokens, gaps) in zip(batched, raw, strict=True):
        assert parts_only_at_near_ties(got, tokens, gaps), (got, tokens)


@pytest.mark.long
def test_a_gemma_conversation_restored_continues_as_one_kept_and_is_trimmed_exactly(
        gemma_model: Path, tmp_path: Path) -> None:
    client = engine(gemma_model, tmp_path, n_slots=2, prompt_lookup=False)
    try:
        facts = " ".join(f"Fact {i}: river number {i} flows north." for i in range(45))
        a1 = (Message("user", facts + " Which way does river 3 flow?"),)
        first = "".join(e.text for e in client.generate(GenerationRequest(1, a1, REPLY, "c:a"))
                        if isinstance(e, p.Delta))
        a2 = (*a1, Message("assistant", first), Message("user", "And river 7?"))
        straight = list(client.generate(GenerationRequest(2, a2, REPLY, "c:straight")))
        for i in range(2):  # two other conversations take both slots: c:a is saved
            list(client.generate(GenerationRequest(10 + i, (Message("user", PROMPTS[i] * 9),),
                                                   REPLY, f"c:other{i}")))
        restored = list(client.generate(GenerationRequest(3, a2, REPLY, "c:a")))
        # The same conversation asked again after its reply: its cells are cut back (past the
        # 512-token window: the full cache keeps them) and only the question read again.
        again = list(client.generate(GenerationRequest(4, a2, REPLY, "c:a")))
    finally:
        client.close()

    def text(events: list[object]) -> str:
        return "".join(e.text for e in events if isinstance(e, p.Delta))

    def stats(events: list[object]) -> p.ReplyStats:
        return next(e for e in events if isinstance(e, p.ReplyStats))

    assert stats(restored).stats.cached_tokens > 450 and text(restored) == text(straight)
    assert stats(again).stats.cached_tokens > 450 and text(again) == text(straight)


# ---- recurrent and mixture of experts: tiny random-weight files --------------------------------
@pytest.mark.parametrize("name", ["mamba", "moe"])
def test_a_tiny_family_model_through_the_engine_equals_raw_llama_cpp(
        name: str, tiny_models: dict[str, Path], tmp_path: Path) -> None:
    model = tiny_models[name]
    client = engine(model, tmp_path)  # prompt lookup asked for (the default)
    try:
        info = client.model
        assert info is not None
        if name == "mamba":  # no cutting back: speculation is off whatever the settings say
            assert info.family.kind == "recurrent" and not info.family.trims_anywhere
            assert info.speculation == ""
        else:
            assert info.family.kind == "dense" and info.family.n_experts == 4
            assert info.family.n_experts_used == 2 and info.speculation
        solo = [reply(client, 10 + i, text) for i, text in enumerate(PROMPTS)]
        batched = together(client, PROMPTS, 20)
    finally:
        client.close()
    raw = [tokens for tokens, _ in raw_replies(model, PROMPTS)]
    assert solo == raw and batched == raw
    assert all(len(tokens) == REPLY.max_tokens for tokens in raw)


def test_recurrent_state_is_restored_whole_and_never_cut_back(
        tiny_models: dict[str, Path], tmp_path: Path) -> None:
    client = engine(tiny_models["mamba"], tmp_path, n_slots=1)
    try:
        long = " ".join(f"Fact {i}: river number {i} flows north." for i in range(20))
        # The state holds the prompt as read (a one-token reply is sampled, not read): a
        # longer prompt extends it exactly, as a chat's next turn extends its last state.
        list(client.generate(GenerationRequest(1, (), REPLY.replace(max_tokens=1), "c:a",
                                               raw=RawPrompt(long))))
        continued = long + " And then?"
        straight = reply(client, 2, continued, "c:straight")
        reply(client, 3, PROMPTS[0] * 9, "c:other")  # takes the one slot: c:a is saved
        events = list(client.generate(GenerationRequest(
            4, (), REPLY, "c:a", raw=RawPrompt(continued), logprobs=0)))
        resumed = [bytes(t.chosen.utf8) for e in events if isinstance(e, p.Logprobs)
                   for t in e.tokens]
        stats = next(e.stats for e in events if isinstance(e, p.ReplyStats))
        # The slot now holds more than this prompt shares: it cannot be cut back, so only a
        # state kept whole at a length the prompt extends (c:a's first, 240 tokens) serves.
        events = list(client.generate(GenerationRequest(
            5, (), REPLY, "c:a", raw=RawPrompt(long + " Or not?"), logprobs=0)))
        shorter = next(e.stats for e in events if isinstance(e, p.ReplyStats))
        fresh = reply(client, 6, long + " Or not?")
    finally:
        client.close()
    assert resumed == straight and stats.cached_tokens > 200
    assert shorter.cached_tokens in (0, stats.cached_tokens)
    assert [bytes(t.chosen.utf8) for e in events if isinstance(e, p.Logprobs)
            for t in e.tokens] == fresh


def test_a_window_only_sliding_cache_is_never_cut_back_before_its_window(
        gemma_model: Path) -> None:
    """With only the window's cells (swa_full off: 768 of them here, the window and a batch),
    cutting 1,100 tokens back to 100 would leave the next token looking at cells llama.cpp has
    reused: refused, and the sequence emptied (the prompt is read again). With every cell kept
    (the engine's choice) it is cut back: test_a_gemma_conversation_restored_…"""
    from inglenook.engine.host.llama import Batch, Context, Model

    model = Model(str(gemma_model), 0, True, False)
    ctx = Context(model, 2048, 1, 256, 2, 2, False, "f16", swa_full=False)
    batch = Batch(256)
    try:
        assert not ctx.swa_full and not ctx.can_shift
        memory = ctx.sequence(0)
        tokens = model.tokenize(" ".join(f"word{i}" for i in range(600)).encode(), False)[:1100]
        assert len(tokens) == 1100
        for start in range(0, len(tokens), 256):
            batch.clear()
            chunk = tokens[start:start + 256]
            for i, token in enumerate(chunk):
                batch.add(token, start + i, 0, False)
            assert ctx.decode(batch) == 0
            memory.appended(chunk)
        assert memory.keep(1090)  # within the window: always possible
        assert not memory.keep(100) and memory.n == 0
    finally:
        batch.close()
        ctx.close()
        model.close()


def test_a_recurrent_conversation_that_outgrows_its_context_reads_what_it_keeps_again(
        tiny_models: dict[str, Path], tmp_path: Path) -> None:
    """Recurrent state cannot lose a block from its middle: the turns kept are read again
    (nothing shifted), and the reply is the one a fresh engine gives the same prompt."""
    client = EngineClient(log_path=tmp_path / "engine.log")
    client.load(LoadParams(str(tiny_models["mamba"]), n_ctx=256, n_slots=1))
    try:
        messages: tuple[Message, ...] = ()
        for turn in range(6):
            messages += (Message("user", f"Turn {turn}: " + "river flows north " * 8),)
            events = list(client.generate(GenerationRequest(
                turn, messages, REPLY, "c:long", overflow="rolling")))
            finish = next(e.finish for e in events if isinstance(e, p.Finished))
            assert finish.reason in ("stop", "length"), finish
            text = "".join(e.text for e in events if isinstance(e, p.Delta))
            messages += (Message("assistant", text),)
        stats = next(e.stats for e in events if isinstance(e, p.ReplyStats))
        assert stats.dropped_messages > 0 and stats.shifted_tokens == 0
        fresh = list(client.generate(GenerationRequest(
            99, messages[:-1], REPLY, "c:fresh", overflow="rolling")))
    finally:
        client.close()
    assert "".join(e.text for e in fresh if isinstance(e, p.Delta)) == text
