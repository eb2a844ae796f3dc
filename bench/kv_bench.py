"""KV-cache states per conversation and context overflow (issue 9), printed as one JSON line.

  ttft_switch_back_over_cold     TTFT continuing a 3,000-token chat after another 3,000-token
                                 chat ran ÷ TTFT of that chat's prompt evaluated cold
  ttft_after_overflow_over_turn1 median TTFT of the turns after the context (n_ctx 512) first
                                 overflowed ÷ TTFT of turn 1 (…_max_… the slowest of them)
  kv_state_ram_mb                RAM held by the saved states of the two 3,000-token chats
  kv_state_restore_ms            reading and loading the state of the chat switched back to
  restart_resume_ttft_over_cold  TTFT continuing that chat after the engine quit and a new one
                                 loaded the model (its state kept on disk) ÷ the cold TTFT
  engine_rss_4_replies_over_1    the engine process's peak RSS (VmHWM) with 4 replies at once
                                 at the default context, sharing a KV pool of that context
                                 (the default load), ÷ one reply with one slot (fresh engines)
  engine_rss_4_streams_over_1    the same with a KV cache per reply (kv_per_reply)
  kv_pool_bytes_per_token        the fit planner's KV bytes a pool token; kv_state_bytes_per_token
                                 llama.cpp's own: a saved sequence's bytes ÷ its tokens

TTFTs are timed at the client (request sent → first text), greedy, the bundled model, all
physical cores. `--quick` uses tiny chats; its figures mean nothing.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from common import bundled_model, log
from inglenook.core.load import LoadParams
from inglenook.core.messages import GenerationRequest, Message, OverflowPolicy
from inglenook.core.replies import Stats
from inglenook.core.sampling import SamplingParams
from inglenook.engine import protocol as p
from inglenook.engine.client import EngineClient
from inglenook.engine.host import physical_cores

GREEDY = SamplingParams(temperature=0.0, seed=1, repeat_penalty=1.0, max_tokens=16)
MIB = 1024 * 1024


class Timer:
    def __init__(self, client: EngineClient) -> None:
        self.client = client
        self.rid = 0

    def ask(self, conversation: str, messages: tuple[Message, ...], sampling: SamplingParams,
            overflow: OverflowPolicy = "middle") -> tuple[str, float, Stats]:
        """The reply, its TTFT at the client and the engine's figures."""
        self.rid += 1
        request = GenerationRequest(self.rid, messages, sampling, conversation, overflow)
        sent, first, text, stats = time.perf_counter(), 0.0, "", None
        for event in self.client.generate(request):
            if isinstance(event, p.Delta):
                first = first or time.perf_counter()
                text += event.text
            elif isinstance(event, p.ReplyStats):
                stats = event.stats
            elif isinstance(event, p.Finished) and event.finish.reason == "error":
                raise RuntimeError(event.finish.message)
        assert stats is not None
        return text, (first or time.perf_counter()) - sent, stats


def long_chat(topic: str, tokens: int) -> tuple[Message, ...]:
    """A conversation of about `tokens` tokens (~16 a sentence with markup) ending in a question."""
    sentences = [f"The {topic} number {i} was seen near the old harbour at dawn." for i in
                 range(tokens // 16)]
    turns: list[Message] = [Message("system", "You are a helpful assistant.")]
    for start in range(0, len(sentences), 20):
        turns += [Message("user", "Remember these notes: " + " ".join(sentences[start:start + 10])),
                  Message("assistant", " ".join(sentences[start + 10:start + 20]) or "Noted.")]
    return (*turns, Message("user", f"Which {topic} was seen first?"))


def switch_back(client: EngineClient, model: str, threads: int,
                tokens: int) -> dict[str, float]:
    # One slot, so that the other chat takes its cells and the state is saved and restored
    # (with more, it would take a free slot and chat A stay where it is).
    client.load(LoadParams(model, n_ctx=4096, n_threads=threads, n_slots=1))
    timer = Timer(client)
    chat_a, chat_b = long_chat("ship", tokens), long_chat("lantern", tokens)
    reply, cold, stats = timer.ask("chat:a", chat_a, GREEDY)
    log(f"  chat A cold: {stats.prompt_tokens} tokens, TTFT {cold * 1000:.0f} ms")
    _, _, b = timer.ask("chat:b", chat_b, GREEDY)
    log(f"  chat B: {b.prompt_tokens} tokens ({b.cached_tokens} cached)")
    again = (*chat_a, Message("assistant", reply), Message("user", "And which one was last?"))
    _, warm, stats = timer.ask("chat:a", again, GREEDY)
    log(f"  chat A again: TTFT {warm * 1000:.0f} ms, {stats.cached_tokens} of "
        f"{stats.prompt_tokens} tokens from {stats.cache_source}, restored in "
        f"{stats.state_restore_s * 1000:.1f} ms")
    report = client.state_report()
    return {"ttft_switch_back_ms": round(warm * 1000, 1), "ttft_cold_3k_ms": round(cold * 1000, 1),
            "kv_state_bytes_per_token": round(stats_bytes_per_token(client, timer, stats), 0),
            "ttft_switch_back_over_cold": round(warm / cold, 4),
            "kv_state_ram_mb": round(report.ram_bytes / MIB, 1),
            "kv_state_restore_ms": round(stats.state_restore_s * 1000, 2)}


def stats_bytes_per_token(client: EngineClient, timer: Timer, stats: Stats) -> float:
    """llama.cpp's own figure: chat A's saved state (in RAM once chat B takes the slot back)
    ÷ the tokens it holds."""
    before = client.state_report().ram_bytes
    timer.ask("chat:b2", long_chat("lantern", 300), GREEDY)  # chat A's cells are saved
    after = client.state_report().ram_bytes
    return (after - before) / max(1, stats.prompt_tokens + stats.generated_tokens - 1)


def restart_resume(client: EngineClient, model: str, threads: int, tokens: int,
                   home: Path) -> tuple[EngineClient, dict[str, float]]:
    """A 3,000-token chat, the engine quits, a new one loads the model: TTFT of the next turn
    over the chat's cold TTFT."""
    params = LoadParams(model, n_ctx=4096, n_threads=threads, n_slots=1)
    client.load(params)
    client.forget_states()
    timer = Timer(client)
    chat = long_chat("compass", tokens)
    reply, cold, _ = timer.ask("chat:r", chat, GREEDY)
    client.close()
    client = EngineClient(log_path=home / "engine-again.log")
    client.load(params)
    again = (*chat, Message("assistant", reply), Message("user", "And which one was last?"))
    _, warm, stats = Timer(client).ask("chat:r", again, GREEDY)
    log(f"  after a restart: TTFT {warm * 1000:.0f} ms vs cold {cold * 1000:.0f} ms, "
        f"{stats.cached_tokens} of {stats.prompt_tokens} tokens from {stats.cache_source}")
    return client, {"ttft_restart_resume_ms": round(warm * 1000, 1),
                    "restart_resume_ttft_over_cold": round(warm / cold, 4)}


def peak_rss(pid: int | None) -> int:
    """VmHWM of a process, bytes (0 where /proc has none)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def pool_memory(model: str, threads: int, home: Path, quick: bool) -> dict[str, float]:
    """Fresh engines at the default context: one slot and one reply; four replies at once
    sharing a KV pool of that context (the default); four at once with a KV cache each
    (kv_per_reply). Their peak RSS."""
    import threading

    from inglenook.models import fit
    from inglenook.models.gguf import read_header

    n_ctx = 2048 if quick else 0  # 0: the model's default
    chat_tokens = 100 if quick else 600
    peaks: dict[str, int] = {}
    infos = {}
    layouts = [("one", 1, False), ("pool", 4, False), ("streams", 4, True)]
    for name, slots, per_reply in layouts:
        client = EngineClient(log_path=home / f"engine-{name}.log")
        try:
            context = infos["one"].n_ctx if infos else n_ctx
            infos[name] = client.load(LoadParams(
                model, n_ctx=context, n_threads=threads, n_slots=slots,
                kv_per_reply=per_reply))
            timers = [Timer(client) for _ in range(slots)]
            for n, timer in enumerate(timers):
                timer.rid = 1000 * (n + 1)
            asks = [threading.Thread(target=timer.ask, args=(
                f"chat:{n}", long_chat(f"ship {n}", chat_tokens), GREEDY.replace(max_tokens=32)))
                for n, timer in enumerate(timers)]
            for ask in asks:
                ask.start()
            for ask in asks:
                ask.join()
            peaks[name] = peak_rss(client.pid)
        finally:
            client.close()
    pool = infos["pool"]
    shape = fit.shape_from_header(read_header(model))
    per_token = fit.kv_cache_bytes(shape, pool.kv_pool, pool.kv_cache_type) / pool.kv_pool
    log(f"  peak RSS at n_ctx {pool.n_ctx}: 1 slot {peaks['one'] / 2**20:.0f} MiB, 4 replies "
        f"in a pool of {pool.kv_pool:,} tokens {peaks['pool'] / 2**20:.0f} MiB, 4 with a KV "
        f"cache each {peaks['streams'] / 2**20:.0f} MiB")
    return {"engine_rss_1_reply_mb": round(peaks["one"] / MIB, 1),
            "engine_rss_4_replies_mb": round(peaks["pool"] / MIB, 1),
            "engine_rss_4_replies_over_1": round(peaks["pool"] / max(1, peaks["one"]), 3),
            "engine_rss_4_streams_over_1": round(peaks["streams"] / max(1, peaks["one"]), 3),
            "kv_pool_bytes_per_token": round(per_token, 0)}


def after_overflow(client: EngineClient, model: str, threads: int,
                   turns_after: int) -> dict[str, float]:
    client.load(LoadParams(model, n_ctx=512, n_threads=threads))
    timer = Timer(client)
    sampling = GREEDY.replace(max_tokens=48)
    messages: tuple[Message, ...] = (Message("system", "You are a helpful assistant."),)
    ttfts: list[float] = []
    overflowed: list[float] = []
    turn = 0
    while len(overflowed) < turns_after:
        messages = (*messages, Message("user", f"Tell me one fact about the number {turn * 7}, "
                                               "in two sentences, and why it matters."))
        reply, ttft, stats = timer.ask("chat:o", messages, sampling)
        ttfts.append(ttft)
        if stats.dropped_messages:
            overflowed.append(ttft)
        messages = (*messages, Message("assistant", reply))
        turn += 1
    log(f"  turn 1 {ttfts[0] * 1000:.0f} ms; after overflow (from turn {turn - turns_after + 1})"
        f": {', '.join(f'{t * 1000:.0f}' for t in overflowed)} ms")
    return {"ttft_overflow_turn1_ms": round(ttfts[0] * 1000, 1),
            "ttft_after_overflow_ms": round(statistics.median(overflowed) * 1000, 1),
            "ttft_after_overflow_over_turn1": round(statistics.median(overflowed) / ttfts[0], 3),
            "ttft_after_overflow_max_over_turn1": round(max(overflowed) / ttfts[0], 3)}


def main() -> int:
    quick = "--quick" in sys.argv
    model = bundled_model()
    if model is None:
        return 1
    threads = physical_cores()
    results: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["INGLENOOK_HOME"] = tmp
        client = EngineClient(log_path=Path(tmp) / "engine.log")
        try:
            log("Switching back to a long chat after another one ran…")
            results.update(switch_back(client, str(model), threads, 300 if quick else 3000))
            log("Turns after the context overflowed (n_ctx 512)…")
            results.update(after_overflow(client, str(model), threads, 2 if quick else 8))
            log("Continuing a long chat after the engine quit and started again…")
            client, resumed = restart_resume(client, str(model), threads,
                                             300 if quick else 3000, Path(tmp))
            results.update(resumed)
        finally:
            client.close()
        log("Engine memory: one reply alone, four at once in the shared KV pool…")
        results.update(pool_memory(str(model), threads, Path(tmp), quick))
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
