"""Several replies at once (issue 18), printed as one JSON line (run by bench/run.py):

  raw_batched_{1,2,4,8}_tok_s     llama_decode of one token of each of N sequences per step,
                                  in one KV pool of N contexts with flash attention, as the
                                  engine's default (the limit on this machine)
  raw_batched4_over_1             raw_batched_4 ÷ raw_batched_1
  parallel_{1,2,4,8}_aggregate_tok_s   N openai clients streaming different conversations
                                  from `inglenook serve --parallel 8` at once (all tokens ÷ wall)
  parallel4_over_single           parallel_4 ÷ parallel_1; parallel4_efficiency: that ÷
                                  raw_batched4_over_1 (goal ≥ 0.9)
  parallel4_p95_ttft_over_single_ttft  the slowest of the 4 clients' first text ÷ one
                                  client's alone (goal ≤ 2)
  raw_read4_over_1                llama_decode reading 4 prompts in one batch ÷ reading one:
                                  on a CPU prompt reading is compute-bound, so this is the floor
                                  of the TTFT ratio above
  parallel4_over_peer             the same 4 clients against llama_cpp.server (serial) (≥ 1.4)
  single_stream_tok_s, single_raw_tok_s, single_stream_over_raw   one reply, prompt lookup
                                  off, through the engine ÷ raw create_chat_completion
  prefill_max_stall_ms            the longest gap in one client's stream while another
                                  client's 2,000-token prompt is read (prefill_gap_p50_ms: its
                                  usual gap)

Greedy, the bundled model, all physical cores. `--quick`: tiny counts, figures meaningless.
"""

from __future__ import annotations

import ctypes
import itertools
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import openai

from common import at_once, bundled_model, log
from inglenook.core.load import LoadParams
from inglenook.core.messages import GenerationRequest, Message
from inglenook.core.sampling import SamplingParams
from inglenook.engine import protocol as p
from inglenook.engine.client import EngineClient
from inglenook.engine.host import physical_cores
from server_bench import EXTRA, SAMPLING, STORY, TOPICS, inglenook_serve, peer_server

N_CTX = 2048
# The engine's default layout, which the raw baselines match: a shared KV pool (unless
# kv_per_reply) and flash attention with it.
POOLED = not LoadParams("").kv_per_reply
FLASH = LoadParams("").flash_attn or POOLED


def _quiet(level: int, text: bytes, _data: object) -> None:
    if level == 4:  # GGML_LOG_LEVEL_ERROR
        sys.stderr.write(text.decode("utf-8", errors="replace"))


_QUIET: Any = None  # the ctypes callback, made with llama_cpp imported (kept alive here)


def raw_batched(model: str, threads: int, steps: int, runs: int) -> dict[str, float]:
    """Tokens per second of llama_decode on N sequences, one token each per step."""
    import llama_cpp  # the raw baseline; the app imports llama_cpp only in engine/host/

    global _QUIET
    _QUIET = _QUIET or llama_cpp.llama_log_callback(_quiet)
    llama_cpp.llama_backend_init()
    # llama.cpp's own log prints every level, graph dumps too (5,000 lines, 10-20 s here);
    # errors only, as the engine host keeps them (Llama(verbose=False) does the same).
    llama_cpp.llama_log_set(_QUIET, ctypes.c_void_p(0))
    params = llama_cpp.llama_model_default_params()
    loaded = llama_cpp.llama_model_load_from_file(model.encode(), params)
    vocab = llama_cpp.llama_model_get_vocab(loaded)
    results: dict[str, float] = {}
    reads: dict[int, float] = {}
    try:
        for n in (1, 2, 4, 8):
            best, reads[n] = 0.0, float("inf")
            for _ in range(runs):
                rate, read = _raw_run(llama_cpp, loaded, vocab, n, threads, steps)
                best, reads[n] = max(best, rate), min(reads[n], read)
            results[f"raw_batched_{n}_tok_s"] = round(best, 1)
    finally:
        llama_cpp.llama_model_free(loaded)
    results["raw_batched4_over_1"] = round(results["raw_batched_4_tok_s"]
                                           / results["raw_batched_1_tok_s"], 3)
    results["raw_read4_over_1"] = round(reads[4] / reads[1], 3)
    return results


def _raw_run(llama_cpp: Any, loaded: Any, vocab: Any, n: int, threads: int,
             steps: int) -> tuple[float, float]:
    """Tokens per second decoding n sequences, and the seconds reading their prompts."""
    cp = llama_cpp.llama_context_default_params()
    cp.n_ctx, cp.n_batch, cp.n_ubatch, cp.n_seq_max = N_CTX * n, 512, 512, n
    cp.n_threads, cp.n_threads_batch, cp.no_perf = threads, threads, True
    # The same work as the engine's default: one KV pool all sequences share (kv_unified),
    # with flash attention, which the pool turns on (host/loading.py).
    cp.kv_unified, cp.swa_full = POOLED, not POOLED  # a sliding window's cells only
    cp.flash_attn_type = (llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED if FLASH
                          else llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED)
    ctx = llama_cpp.llama_init_from_model(loaded, cp)
    batch = llama_cpp.llama_batch_init(512, 0, 1)
    try:
        def decode(entries: list[tuple[int, int, int, bool]]) -> None:
            batch.n_tokens = len(entries)
            for j, (token, pos, seq, logits) in enumerate(entries):
                batch.token[j], batch.pos[j], batch.n_seq_id[j] = token, pos, 1
                batch.seq_id[j][0], batch.logits[j] = seq, logits
            assert llama_cpp.llama_decode(ctx, batch) == 0

        prompts = []
        for s in range(n):
            text = f"<|im_start|>user\n{STORY} Name the keeper {TOPICS[s]}.<|im_end|>\n" \
                   "<|im_start|>assistant\n".encode()
            buf = (llama_cpp.llama_token * 512)()
            count = llama_cpp.llama_tokenize(vocab, text, len(text), buf, 512, True, True)
            prompts.append(list(buf[:count]))
        started = time.perf_counter()
        decode([(t, i, s, i == len(p_) - 1) for s, p_ in enumerate(prompts)
                for i, t in enumerate(p_)])
        read = time.perf_counter() - started
        pos = [len(p_) for p_ in prompts]
        last = [p_[-1] for p_ in prompts]
        started = time.perf_counter()
        for _ in range(steps):
            decode([(last[s], pos[s], s, True) for s in range(n)])
            for s in range(n):
                pos[s] += 1
        return n * steps / (time.perf_counter() - started), read
    finally:
        llama_cpp.llama_batch_free(batch)
        llama_cpp.llama_free(ctx)


def stream(api: openai.OpenAI, content: str, max_tokens: int) -> dict[str, Any]:
    sent = time.perf_counter()
    stamps, usage = [], None
    for chunk in api.chat.completions.create(
            model="", messages=[{"role": "user", "content": content}], max_tokens=max_tokens,
            stream=True, stream_options={"include_usage": True}, extra_body=EXTRA,
            **SAMPLING):
        if chunk.usage is not None:
            usage = chunk.usage
        if chunk.choices and chunk.choices[0].delta.content:
            stamps.append(time.perf_counter())
    tokens = usage.completion_tokens if usage is not None else len(stamps)
    return {"tokens": tokens, "ttft": stamps[0] - sent if stamps else 0.0, "stamps": stamps}


def clients_at_once(url: str, n: int, max_tokens: int, salt: int) -> dict[str, Any]:
    results: list[dict[str, Any]] = []
    lock = threading.Lock()

    def ask(i: int) -> None:
        with openai.OpenAI(base_url=url, api_key="x", max_retries=0, timeout=600) as api:
            # A tail no earlier request had: a lone client reads as much of its prompt anew
            # as each of four does (a repeated prompt would be found whole in the cache).
            result = stream(api, f"{STORY} Name the keeper {TOPICS[(i + salt) % 12]}, "
                            f"number {salt * 8 + i}.", max_tokens)
        with lock:
            results.append(result)

    wall = at_once(n, ask)
    return {"tok_s": sum(r["tokens"] for r in results) / wall,
            "ttfts": [r["ttft"] for r in results]}


def parallel(url: str, rounds: int, max_tokens: int) -> dict[str, Any]:
    """Each N in turn, `rounds` times, interleaved: the median aggregate of each, and the
    TTFTs of one and of four."""
    rates: dict[int, list[float]] = {1: [], 2: [], 4: [], 8: []}
    ttft_one: list[float] = []
    ttft_four: list[float] = []
    for r in range(rounds):
        for n in rates:
            run = clients_at_once(url, n, max_tokens, r * 8 + n)
            rates[n].append(run["tok_s"])
            if n == 1:
                ttft_one += run["ttfts"]
            elif n == 4:
                ttft_four += run["ttfts"]
    return {"rates": {n: statistics.median(v) for n, v in rates.items()},
            "ttft_one": statistics.median(ttft_one), "p95_four": _p95(ttft_four)}


def prefill_stall(url: str, max_tokens: int, sentences: int) -> dict[str, float]:
    """One client streams; once it does, another sends a long prompt: the first's gaps."""
    out: dict[str, Any] = {}
    streaming = threading.Event()

    def first() -> None:
        with openai.OpenAI(base_url=url, api_key="x", max_retries=0, timeout=600) as api:
            stamps = []
            for chunk in api.chat.completions.create(
                    model="", messages=[{"role": "user", "content": STORY}],
                    max_tokens=max_tokens, stream=True, extra_body=EXTRA, **SAMPLING):
                if chunk.choices and chunk.choices[0].delta.content:
                    stamps.append(time.perf_counter())
                    streaming.set()
            out["stamps"] = stamps

    reader = threading.Thread(target=first)
    reader.start()
    streaming.wait(120)
    long_prompt = " ".join(f"Stone {i} is small and blue." for i in range(sentences))
    with openai.OpenAI(base_url=url, api_key="x", max_retries=0, timeout=600) as api:
        asked = time.perf_counter()
        second = stream(api, long_prompt + " Which stone is last?", 8)
    reader.join()
    stamps = out["stamps"]
    read_until = asked + second["ttft"]
    during = [b - a for a, b in itertools.pairwise(stamps) if b >= asked
              and a <= read_until]
    gaps = [b - a for a, b in itertools.pairwise(stamps)]
    return {"prefill_max_stall_ms": round(max(during or gaps or [0.0]) * 1000, 1),
            "prefill_gap_p50_ms": round(statistics.median(gaps or [0.0]) * 1000, 1)}


def single_stream(model: str, threads: int, runs: int, max_tokens: int) -> dict[str, float]:
    """One reply with prompt lookup off through the engine, against raw llama-cpp-python."""
    import llama_cpp  # the raw baseline; the app imports llama_cpp only in engine/host/

    greedy = SamplingParams(temperature=0.0, seed=1, repeat_penalty=1.0, top_k=40, top_p=0.95,
                            min_p=0.05, max_tokens=max_tokens)
    llm = llama_cpp.Llama(model, n_ctx=N_CTX, n_batch=512, n_ubatch=512, n_threads=threads,
                          n_threads_batch=threads, flash_attn=FLASH, verbose=False)
    with tempfile.TemporaryDirectory() as tmp:
        client = EngineClient(log_path=Path(tmp) / "engine.log")
        client.load(LoadParams(model, n_ctx=N_CTX, n_threads=threads, n_threads_batch=threads,
                               prompt_lookup=False))
        raw, engine = [], []
        try:
            for i in range(runs):
                llm.reset()
                stamps = [time.perf_counter() for chunk in llm.create_chat_completion(
                    [{"role": "user", "content": STORY}], stream=True, temperature=0.0, seed=1,
                    repeat_penalty=1.0, top_k=40, top_p=0.95, min_p=0.05,
                    max_tokens=max_tokens) if chunk["choices"][0]["delta"].get("content")]
                raw.append((len(stamps) - 1) / (stamps[-1] - stamps[0]))
                first = last = 0.0
                generated = 0
                for event in client.generate(GenerationRequest(
                        10 + i, (Message("user", STORY),), greedy)):
                    if isinstance(event, p.Delta):
                        last = time.perf_counter()
                        first = first or last
                    elif isinstance(event, p.ReplyStats):
                        generated = event.stats.generated_tokens
                engine.append((generated - 1) / (last - first))
        finally:
            client.close()
            llm.close()
    r, e = statistics.median(raw), statistics.median(engine)
    return {"single_stream_tok_s": round(e, 1), "single_raw_tok_s": round(r, 1),
            "single_stream_over_raw": round(e / r, 3)}


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))] if ordered else 0.0


def main() -> int:
    quick = "--quick" in sys.argv
    model = bundled_model()
    if model is None:
        return 1
    threads = physical_cores()
    steps, rounds, tokens, sentences, runs = (4, 1, 4, 20, 1) if quick else (
        96, 3, 128, 180, 5)  # 180 sentences: ~1,750 tokens, within a slot of N_CTX
    results: dict[str, Any] = {}
    log("Raw llama_decode of 1, 2, 4 and 8 sequences a step…")
    results.update(raw_batched(str(model), threads, steps, 1 if quick else 2))
    log("One reply through the engine (prompt lookup off) against raw llama-cpp-python…")
    results.update(single_stream(str(model), threads, runs, 256 if not quick else 8))
    with tempfile.TemporaryDirectory() as tmp:
        # A pool of a context per client, as the raw runs: the clients never wait for room.
        with inglenook_serve(str(model), threads, Path(tmp), "--parallel", "8",
                             "--ctx", str(N_CTX), "--kv-pool", str(8 * N_CTX)) as url:
            with openai.OpenAI(base_url=f"{url}", api_key="x", max_retries=0) as api:
                stream(api, "Hello", 4)  # the first reply pages the weights in
            log(f"1, 2, 4 and 8 clients at once ({rounds} rounds of {tokens} tokens)…")
            both = parallel(url, rounds, tokens)
            log("One client streaming while another's long prompt is read…")
            results.update(prefill_stall(url, 400 if not quick else 12, sentences))
        rates = both["rates"]
        for n, rate in rates.items():
            results[f"parallel_{n}_aggregate_tok_s"] = round(rate, 1)
        results["parallel4_over_single"] = round(rates[4] / rates[1], 3)
        results["parallel4_efficiency"] = round(
            results["parallel4_over_single"] / results["raw_batched4_over_1"], 3)
        results["parallel4_p95_ttft_over_single_ttft"] = round(
            both["p95_four"] / both["ttft_one"], 3)
        with peer_server(str(model), threads) as peer:
            if peer:
                log("The same four clients against llama_cpp.server…")
                with openai.OpenAI(base_url=peer, api_key="x", max_retries=0) as api:
                    stream(api, "Hello", 4)
                peer_rates = [clients_at_once(peer, 4, tokens, r)["tok_s"]
                              for r in range(rounds)]
                results["peer_parallel_4_aggregate_tok_s"] = round(
                    statistics.median(peer_rates), 1)
                results["parallel4_over_peer"] = round(
                    rates[4] / statistics.median(peer_rates), 3)
    results.update(threads=threads, quick=quick)
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
