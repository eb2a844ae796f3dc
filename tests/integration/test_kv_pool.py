"""The shared KV pool (LoadParams.kv_pool, the default) on the real bundled model: four replies
at once in a pool of one context hold the memory of one context, not four; a request replayed
at once gives the same reply; a full pool saves the idle chat or ends the latest reply with a
message, never silently.
(With kv_per_reply each slot has a KV stream of its own: tests/integration/test_batching.py.)"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from inglenook.core.load import LoadParams
from inglenook.core.messages import GenerationRequest, Message
from inglenook.core.replies import Stats
from inglenook.engine import protocol as p
from inglenook.engine.client import EngineClient
from inglenook.models import fit
from inglenook.models.gguf import read_header
from tests.integration.conftest import GREEDY, finish_of, stats_of

QUESTION = (Message("user", "What is the capital of France?"),)
RIVERS = " ".join(f"Fact {i}: river number {i} flows north." for i in range(12))
PEAKS = " ".join(f"Note {i}: mountain number {i} is tall." for i in range(12))


@pytest.fixture
def client(tmp_path: Path) -> Iterator[EngineClient]:
    engine = EngineClient(log_path=tmp_path / "engine.log")
    yield engine
    engine.close()


def say(client: EngineClient, rid: int, messages: tuple[Message, ...], max_tokens: int = 24,
        conversation: str = "", seed: int = 42,
        temperature: float = 0.0) -> tuple[str, Stats, p.Finished]:
    sampling = GREEDY.replace(max_tokens=max_tokens, seed=seed, temperature=temperature)
    events = list(client.generate(GenerationRequest(rid, messages, sampling, conversation)))
    text = "".join(e.text for e in events if isinstance(e, p.Delta))
    return text, stats_of(events).stats, finish_of(events)


def test_a_default_load_holds_four_replies_in_the_memory_of_one(
        bundled_model: Path, tmp_path: Path) -> None:
    """A default load shares one pool of the context length among its replies at once; before
    it was the default each of four slots reserved a whole context (what --kv-per-reply still
    does): the engine's memory grew with the slots, not with the chats in flight."""
    n_ctx = 8192
    shape = fit.shape_from_header(read_header(bundled_model))
    one_context = fit.kv_cache_bytes(shape, n_ctx, "f16")
    rss, infos = [], []
    for options in ({"kv_per_reply": True}, {}, {"n_slots": 1}):
        engine = EngineClient(log_path=tmp_path / f"engine-{len(rss)}.log")
        try:
            infos.append(engine.load(LoadParams(str(bundled_model), n_ctx=n_ctx,
                                                **{"n_slots": 4, **options})))
            assert engine.pid is not None
            rss.append(psutil.Process(engine.pid).memory_info().rss)
        finally:
            engine.close()
    streams, pooled, _single = infos
    assert (streams.kv_pool, pooled.kv_pool, pooled.n_slots) == (0, n_ctx, 4)
    assert streams.kv_bytes == 4 * pooled.kv_bytes == 4 * one_context
    assert pooled.flash_attn  # the pool turns it on
    # Three contexts' KV less, measured on the process (half of it, for what else moves),
    # and four slots hold about what one does.
    assert rss[0] - rss[1] > 1.5 * one_context, (rss, one_context)
    assert rss[1] < 1.3 * rss[2], rss


def test_a_replayed_request_in_the_pool_gives_the_same_reply(client: EngineClient,
                                                              bundled_model: Path) -> None:
    """What the reverted first pool failed (llama.cpp's unified cache without flash
    attention): the same greedy request, again in the same engine, gave another reply."""
    client.load(LoadParams(str(bundled_model), n_ctx=2048, n_slots=4, kv_pool=4096))
    first, _, _ = say(client, 1, QUESTION, 32)
    again, _, _ = say(client, 2, QUESTION, 32)
    assert first and again == first
    seeded = [say(client, 3 + i, QUESTION, 16, seed=7, temperature=0.9)[0] for i in range(2)]
    assert seeded[0] == seeded[1]


def test_a_full_pool_saves_the_idle_chat_and_the_next_reply_goes_on(
        client: EngineClient, bundled_model: Path) -> None:
    client.load(LoadParams(str(bundled_model), n_ctx=256, n_slots=2, kv_pool=256))
    rivers = (Message("user", RIVERS + " Which way does river 3 flow?"),)
    reply, turn1, _ = say(client, 1, rivers, 8, conversation="chat:rivers")
    assert turn1.prompt_tokens > 128  # more than half of the pool
    # Another chat's prompt does not fit beside it: the idle chat's cells are saved and freed.
    peaks = (Message("user", PEAKS + " How tall is mountain 2?"),)
    _, other, finished = say(client, 2, peaks, 8, conversation="chat:peaks")
    assert finished.finish.reason in ("stop", "length") and other.generated_tokens > 0
    # The first chat comes back from the state cache and reads only its new turn.
    follow = (*rivers, Message("assistant", reply), Message("user", "And river 7?"))
    _, turn2, _ = say(client, 3, follow, 8, conversation="chat:rivers")
    assert turn2.cache_source == "ram"
    assert turn2.cached_tokens >= turn1.prompt_tokens


def test_a_full_pool_with_replies_in_progress_ends_the_latest_with_a_message(
        client: EngineClient, bundled_model: Path) -> None:
    client.load(LoadParams(str(bundled_model), n_ctx=256, n_slots=2, kv_pool=256,
                           prompt_lookup=False))
    # Two prompts of ~100 tokens: both fit, and their replies fill the rest within ~30 tokens.
    story = (Message("user", " ".join(RIVERS.split(". ")[:8]) + " Now write a long story."),)
    poem = (Message("user", " ".join(PEAKS.split(". ")[:8]) + " Now write a long poem."),)
    results: dict[int, tuple[str, Stats, p.Finished]] = {}

    def run(rid: int, messages: tuple[Message, ...]) -> None:
        results[rid] = say(client, rid, messages, 200, conversation=f"chat:{rid}")

    threads = [threading.Thread(target=run, args=(10 + i, m))
               for i, m in enumerate((story, poem))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(600)
    ends = {rid: r[2].finish for rid, r in results.items()}
    (full,) = [f for f in ends.values() if "KV pool" in f.message]
    assert full.reason == "length" and "is full" in full.message
    (other,) = [f for f in ends.values() if f is not full]
    assert other.reason in ("stop", "length") and "KV pool" not in other.message
