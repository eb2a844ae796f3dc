"""Inglenook benchmarks: prints figures and writes bench/results.json (run by `make bench`).

All figures use the bundled model, greedy decoding and the same threads and settings:
  decode_ratio_vs_raw     decode tok/s through Inglenook's engine ÷ raw create_chat_completion
  ttft_turn12_over_turn1  TTFT of turn 12 of a conversation ÷ TTFT of turn 1
  stop_latency_*_ms       cancel() → Finished, while decoding and during a 3,000-token prompt
  gui_max_stall_ms, rss_* measured by bench/gui_stall.py in its own process (a 10,000-message chat)
  long_chat_*             bench/long_chat.py: a 10,000-message chat opened, scrolled, left
  window_shown_s          launch of `python -m inglenook` → main window shown
  store_*                 bench/store_bench.py: 10,000 conversations, switching, search, writes
  window_*                bench/window_memory.py: RSS with 80 messages, growth over 200 switches
  ttft_switch_back_*, kv_state_*   bench/kv_bench.py: saved KV states, context overflow;
                          restart_resume_* (a chat continued after a restart), engine_rss_*
                          and kv_pool_* (four replies in a shared KV pool vs one)
  spec_*, quantize_*      bench/spec_bench.py: prompt lookup, a draft model, Q8_0 → Q4_K_M
  api_*                   bench/server_bench.py: inglenook serve vs raw and llama_cpp.server
  raw_batched_*, parallel_*, single_stream_*, prefill_*   bench/batch_bench.py: several
                          replies at once (raw llama_decode of N sequences, N API clients)
  two_chats_*             bench/two_chats_stall.py: two chats of the window replying at once
  gemma_*                 bench/family_bench.py: Gemma 3 270M (sliding window) through the
                          engine against raw llama.cpp, four at once, switching back,
                          after a restart, its memory in the pool and per reply
  actions_*               bench/model_actions_stall.py: the GUI thread's longest stall (a 10 ms
                          heartbeat) at model actions: open Gemma, Smaller copy, theme, unload
  template_*              bench/template_bench.py: a prompt rendered here vs in the child
  grammar_*               bench/grammar_bench.py: a reply held to a JSON schema vs free
  vision_*                bench/vision_bench.py: an image encoded, a question with an image
                          (a tiny random projector: the machinery's floor; quality not judged);
                          bench/vision_stall.py: the GUI thread while a 12 MP photo is sent
  knowledge_*             bench/knowledge_bench.py: indexing 1,000 files, search at 100,000
                          chunks, recall@5 of generated facts (BM25, BM25 fused with
                          all-MiniLM-L6-v2's vectors, and with the bundled model's), and of
                          hand-written facts asked in other words (by_meaning); a folder of
                          100,000 files (progress and Cancel)
  stt_*, tts_*            bench/speech_bench.py: faster-whisper base and Piper: realtime
                          factors, word error rate of a round trip, first audio of a reply
  speech_*_max_stall_ms   bench/speech_stall.py: the GUI thread while dictating, reading a
                          reply aloud and in a voice conversation
A chart of decode speed and TTFT (raw, window, API, peer) goes next to the JSON, as .png.

`--quick` runs every part with tiny counts (make test does, so a bench that no longer runs fails
the suite); its figures mean nothing. `--output PATH` writes the JSON elsewhere.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import report  # bench/report.py
from chart import draw  # bench/chart.py: this script's folder is on sys.path
from common import bundled_model, log
from inglenook.core.load import LoadParams
from inglenook.core.messages import GenerationRequest, Message
from inglenook.core.sampling import SamplingParams
from inglenook.engine import protocol as p
from inglenook.engine.client import EngineClient
from inglenook.engine.host import physical_cores

HERE = Path(__file__).resolve().parent
N_CTX = 4096
DECODE_TOKENS = 256
STORY = "Write a long, detailed story about a lighthouse keeper and a storm."
# The engine and the raw run must sample identically: greedy, no penalties.
GREEDY = SamplingParams(temperature=0.0, seed=1, repeat_penalty=1.0, top_k=40, top_p=0.95,
                        min_p=0.05, max_tokens=DECODE_TOKENS)


def raw_decode_run(llm: object, tokens: int) -> tuple[float, int]:
    llm.reset()  # type: ignore[attr-defined]
    stamps = []
    for chunk in llm.create_chat_completion(  # type: ignore[attr-defined]
            [{"role": "user", "content": STORY}], stream=True, temperature=0.0, seed=1,
            repeat_penalty=1.0, top_k=40, top_p=0.95, min_p=0.05, max_tokens=tokens):
        if chunk["choices"][0]["delta"].get("content"):
            stamps.append(time.perf_counter())
    return (len(stamps) - 1) / (stamps[-1] - stamps[0]), len(stamps)


def engine_decode_run(client: EngineClient, rid: int, tokens: int) -> tuple[float, int]:
    """Timed where the window would see the text: at the client, after the pipe."""
    first, last, generated = 0.0, 0.0, 0
    for event in client.generate(GenerationRequest(rid, (Message("user", STORY),),
                                                       GREEDY.replace(max_tokens=tokens))):
        if isinstance(event, p.Delta):
            last = time.perf_counter()
            first = first or last
        elif isinstance(event, p.ReplyStats):
            generated = event.stats.generated_tokens
    return (generated - 1) / (last - first), generated


def decode_rates(model: str, threads: int, client: EngineClient, runs: int,
                 tokens: int = DECODE_TOKENS) -> dict[str, float]:
    import llama_cpp  # the raw baseline; the app itself imports llama_cpp only in engine/host.py

    llm = llama_cpp.Llama(model, n_ctx=N_CTX, n_batch=512, n_ubatch=512, n_threads=threads,
                          n_threads_batch=threads, verbose=False)
    raw, engine = [], []
    for i in range(runs):  # interleaved, so drift in machine speed hits both alike
        raw_rate, raw_tokens = raw_decode_run(llm, tokens)
        engine_rate, engine_tokens = engine_decode_run(client, 1000 + i, tokens)
        raw.append(raw_rate)
        engine.append(engine_rate)
    llm.close()
    raw_median, engine_median = statistics.median(raw), statistics.median(engine)
    return {"raw_decode_tok_s": round(raw_median, 1), "raw_tokens": raw_tokens,
            "engine_decode_tok_s": round(engine_median, 1), "engine_tokens": engine_tokens,
            "decode_ratio_vs_raw": round(engine_median / raw_median, 3)}


def client_params(model: str, threads: int = 0) -> LoadParams:
    return LoadParams(model, n_ctx=N_CTX, n_threads=threads or physical_cores(), n_batch=512)


def ttft_turns(client: EngineClient, turns: int = 12, reply_tokens: int = 64) -> list[float]:
    topics = ["rivers", "mountains", "bread", "clocks", "owls", "glass", "maps", "bees",
              "tides", "lanterns", "violins", "comets"]
    messages: list[Message] = [Message("system", "You are a helpful assistant.")]
    ttfts = []
    for turn in range(turns):
        messages.append(Message("user", f"Tell me one interesting fact about {topics[turn]}, "
                                        "in two sentences, and why it matters to people."))
        request = GenerationRequest(2000 + turn, tuple(messages),
                                    GREEDY.replace(max_tokens=reply_tokens))
        sent, first, reply = time.perf_counter(), 0.0, ""
        for event in client.generate(request):
            if isinstance(event, p.Delta):
                first = first or time.perf_counter()
                reply += event.text
        ttfts.append(first - sent)
        messages.append(Message("assistant", reply))
    return ttfts


def stop_latency_decode(client: EngineClient, runs: int = 10) -> tuple[float, float]:
    """Stop pressed at a random moment while decoding (as a user would, from another thread)."""
    latencies = []
    rng = random.Random(7)
    for i in range(runs):
        rid = 3000 + i
        request = GenerationRequest(rid, (Message("user", f"{STORY} Version {i}."),),
                                    GREEDY.replace(max_tokens=1000))
        asked: list[float] = []

        def press_stop(rid: int = rid, asked: list[float] = asked) -> None:
            asked.append(time.perf_counter())
            client.cancel(rid)

        timer: threading.Timer | None = None
        for event in client.generate(request):
            if isinstance(event, p.Delta) and timer is None:
                timer = threading.Timer(rng.uniform(0.1, 0.3), press_stop)
                timer.start()
            elif isinstance(event, p.Finished):
                assert event.finish.reason == "cancelled", event
                latencies.append(time.perf_counter() - asked[0])
    return statistics.median(latencies) * 1000, max(latencies) * 1000


def stop_latency_prefill(client: EngineClient, runs: int = 3,
                         sentences: int = 340) -> tuple[float, int]:
    latencies, total = [], 0
    for i in range(runs):
        rid = 4000 + i
        # A different first word each run, so no prefix of it is in the KV cache.
        text = f"Run {i}. " + " ".join(f"Stone {n} is small and blue." for n in range(sentences))
        request = GenerationRequest(rid, (Message("user", text),), GREEDY)
        asked = 0.0
        for event in client.generate(request):
            if isinstance(event, p.PromptProgress) and not asked:
                total = event.total
                asked = time.perf_counter()
                client.cancel(rid)
            elif isinstance(event, p.Finished):
                assert event.finish.reason == "cancelled", event
                latencies.append(time.perf_counter() - asked)
    return statistics.median(latencies) * 1000, total


def window_shown(home: Path) -> dict[str, float]:
    env = dict(os.environ, INGLENOOK_REPORT_SHOWN="1", INGLENOOK_HOME=str(home))
    env.setdefault("QT_QPA_PLATFORM", "offscreen")
    started = time.time()
    proc = subprocess.Popen([sys.executable, "-m", "inglenook"], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    figures: dict[str, float] = {}
    assert proc.stdout is not None
    try:
        for line in proc.stdout:
            name, _, stamp = line.strip().partition(" ")
            if name in ("window-shown", "model-ready"):
                figures[name.replace("-", "_") + "_s"] = float(stamp) - started
            if len(figures) == 2:
                break
    finally:
        proc.terminate()  # the engine host sees its pipe close and exits by itself
        proc.wait(timeout=30)
    return figures


SCRIPTS = [  # (what it measures, script), in the order of the results
    ("GUI stall while streaming into a 10,000-message conversation…", "gui_stall.py"),
    ("Conversation store: 10,000 conversations, switching, search, bytes per token…",
     "store_bench.py"),
    ("Window memory: an 80-message chat, 200 switches among 20 chats…", "window_memory.py"),
    ("A 10,000-message chat: opening, memory, PageUp to the top, leaving…", "long_chat.py"),
    ("KV state per conversation: switching back, overflow, restore…", "kv_bench.py"),
    ("Speculative decoding and quantizing…", "spec_bench.py"),
    ("Chat templates: rendered here and in the engine's killable child…", "template_bench.py"),
    ("Knowledge: 1,000 files indexed, search over 100,000 chunks, recall@5…",
     "knowledge_bench.py"),
    ("A reply in a JSON schema (a grammar) against the same reply free…", "grammar_bench.py"),
    ("Images: one encoded, a question with one (tiny projector, quality not judged)…",
     "vision_bench.py"),
    ("The GUI thread while a 12 MP photo is attached and sent, a screenshot pasted…",
     "vision_stall.py"),
    ("API server: decode vs raw and vs llama_cpp.server, four clients at once…",
     "server_bench.py"),
    ("Several replies at once: raw batches, 1-8 API clients, a long prompt beside…",
     "batch_bench.py"),
    ("Two chats of the window replying at once…", "two_chats_stall.py"),
    ("A sliding-window model (Gemma 3 270M): exactness, four at once, switching back…",
     "family_bench.py"),
    ("The GUI thread at model actions: open a 253 MB file, Smaller copy, theme, unload/load…",
     "model_actions_stall.py"),
    ("Voice: whisper base and a Piper voice, speed and word error rate…", "speech_bench.py"),
    ("The GUI thread while dictating, reading aloud, in a voice conversation…",
     "speech_stall.py"),
]


def run_script(name: str, quick: bool, home: Path) -> dict:
    """A bench script in its own process and data folder; its last line of output is a JSON
    object."""
    command = [sys.executable, str(HERE / name), *(["--quick"] if quick else [])]
    env = {**os.environ, "INGLENOOK_HOME": str(home / Path(name).stem)}
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise SystemExit(f"{name} failed ({done.returncode}):\n{done.stderr[-4000:]}")
    log(f"  ({name}: {time.monotonic() - started:.1f} s)")  # where make test's time goes
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny counts, to check it runs")
    parser.add_argument("--output", type=Path, default=HERE / "results.json")
    args = parser.parse_args()
    quick = args.quick
    model = bundled_model()
    if model is None:
        return 1
    threads = physical_cores()
    results: dict[str, object] = {"model": model.name, "threads": threads, "n_ctx": N_CTX}
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        os.environ["INGLENOOK_HOME"] = str(home)
        log(f"Model {model.name}, {threads} threads, n_ctx {N_CTX}")

        log("Decode speed: raw llama-cpp-python vs Inglenook's engine (5 runs each)…")
        client = EngineClient(log_path=home / "engine.log")
        try:
            client.load(client_params(str(model), threads))
            results.update(decode_rates(str(model), threads, client, *((1, 32) if quick else (5,))))

            log("TTFT over a 12-turn conversation…")
            ttfts = ttft_turns(client, *((3, 16) if quick else (12,)))
            results.update(ttft_turn1_ms=round(ttfts[0] * 1000, 1),
                           ttft_turn12_ms=round(ttfts[-1] * 1000, 1),
                           ttft_turn12_over_turn1=round(ttfts[-1] / ttfts[0], 3))

            log("Stop latency while decoding and during a long prompt…")
            median_ms, max_ms = stop_latency_decode(client, 2 if quick else 10)
            results.update(stop_latency_decode_ms=round(median_ms, 1),
                           stop_latency_decode_max_ms=round(max_ms, 1))
            prefill_ms, prompt_tokens = stop_latency_prefill(client, 1 if quick else 3,
                                                             80 if quick else 340)
            results.update(stop_latency_prefill_ms=round(prefill_ms, 1),
                           stop_prefill_prompt_tokens=prompt_tokens)
        finally:
            client.close()

        # One at a time: two at once on two cores oversubscribe llama.cpp's threads (tried:
        # the quick run took 155 s instead of 131 s).
        for message, name in SCRIPTS:
            log(message)
            results.update(run_script(name, quick, home))

        log("Start-up: launch → window shown → model ready…")
        results.update({k: round(v, 3) for k, v in window_shown(home / "startup").items()})

    width = max(len(k) for k in results)
    for key, value in results.items():
        print(f"{key:<{width}}  {value}")
    results["quick"] = quick
    results["date"] = time.strftime("%Y-%m-%d")
    args.output.write_text(json.dumps(results, indent=2) + "\n")
    chart = draw(results, args.output.with_suffix(".png"))
    print(f"\nwrote {args.output} and {chart}")
    if not quick and args.output == HERE / "results.json":
        report.main([str(args.output)])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
