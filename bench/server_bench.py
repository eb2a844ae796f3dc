"""API server figures: `inglenook serve` through the official openai client, against raw
llama-cpp-python and, when it is installed, llama-cpp-python's own server (the peer).

Same model (the bundled one), threads, context and greedy sampling everywhere; one thing runs at
a time. Prints progress on stderr and one JSON object as the last line of stdout:
  api_decode_tok_s, raw_decode_tok_s, peer_decode_tok_s   streamed decode speed (median)
  api_decode_over_raw, api_decode_over_peer_server        their ratios
  {api,peer,raw}_ttft_turn{1,12}_ms, api_ttft_turn12_over_peer
                                         TTFT of turns 1 and 12 of a conversation resent every
                                         turn (median of 3 conversations; raw: llama-cpp-python
                                         in this process)
  api_ttft_alternating_ms, peer_ttft_alternating_ms, api_ttft_alternating_over_peer
                                         TTFT of turn 12 of one of two conversations resent in
                                         alternation by two clients (each names its `user`)
  api_concurrent4_aggregate_over_single  tokens/s of 4 clients at once ÷ of one client alone
                                         (median over rounds that alternate the two)
  api_concurrent4_p95_ttft_ms            p95 time to first text of those 4 clients
  dialect_stream_over_openai_*           a streamed reply on each dialect's route against the
                                         OpenAI route (bench/dialects.py)
`--quick` uses tiny counts (to check that it runs); its figures mean nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import openai

from common import at_once, bundled_model, log
from dialects import dialect_overheads
from inglenook.engine.host import physical_cores

N_CTX = 4096
STORY = "Write a long, detailed story about a lighthouse keeper and a storm."
# Greedy and no penalties, as the raw baseline samples.
SAMPLING: dict[str, Any] = {"temperature": 0.0, "seed": 1, "top_p": 0.95}
EXTRA: dict[str, Any] = {"top_k": 40, "min_p": 0.05, "repeat_penalty": 1.0}
TOPICS = ["rivers", "mountains", "bread", "clocks", "owls", "glass", "maps", "bees", "tides",
          "lanterns", "violins", "comets"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def inglenook_serve(model: str, threads: int, home: Path, *extra: str) -> Iterator[str]:
    env = dict(os.environ, INGLENOOK_HOME=str(home))
    proc = subprocess.Popen(
        [sys.executable, "-m", "inglenook", "serve", "--model", model, "--port", "0",
         "--ctx", str(N_CTX), "--threads", str(threads), *extra],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line.startswith("Serving "):
            raise SystemExit(f"inglenook serve did not start: {line!r}")
        yield line.split(" at ")[1].split()[0]
    finally:
        stop(proc)


@contextmanager
def peer_server(model: str, threads: int) -> Iterator[str | None]:
    """llama-cpp-python's server (the `server` extra), or None when it is not installed."""
    try:
        import llama_cpp.server  # noqa: F401
    except ImportError:
        log("llama_cpp.server is not installed: no peer comparison")
        yield None
        return
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "llama_cpp.server", "--model", model, "--n_ctx", str(N_CTX),
         "--n_threads", str(threads), "--n_threads_batch", str(threads), "--n_batch", "512",
         "--n_ubatch", "512", "--host", "127.0.0.1", "--port", str(port), "--verbose", "False"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        with openai.OpenAI(base_url=url, api_key="x", max_retries=0, timeout=2) as probe:
            for _ in range(300):  # up to a minute to load
                try:
                    probe.models.list()
                    break
                except openai.APIConnectionError:
                    if proc.poll() is not None:
                        raise SystemExit("llama_cpp.server exited at start-up") from None
                    time.sleep(0.2)
        yield url
    finally:
        stop(proc)


def stop(proc: subprocess.Popen[Any]) -> None:
    proc.terminate()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    if proc.stdout:
        proc.stdout.close()


def stream(api: openai.OpenAI, messages: list[dict[str, str]], max_tokens: int,
           user: str = "") -> dict[str, Any]:
    """One streamed reply: text, tokens, time to first text, decode rate, wall time."""
    sent = time.perf_counter()
    stamps, text, usage = [], [], None
    for chunk in api.chat.completions.create(
            model="", messages=messages, max_tokens=max_tokens, stream=True,  # type: ignore[arg-type]
            stream_options={"include_usage": True},
            extra_body={**EXTRA, **({"user": user} if user else {})}, **SAMPLING):
        if chunk.usage is not None:
            usage = chunk.usage
        if chunk.choices and chunk.choices[0].delta.content:
            stamps.append(time.perf_counter())
            text.append(chunk.choices[0].delta.content)
    done = time.perf_counter()
    # Inglenook batches ~15 ms of text per chunk and counts tokens in `usage`; the peer sends
    # one chunk per token and no usage.
    tokens = usage.completion_tokens if usage is not None else len(stamps)
    span = stamps[-1] - stamps[0] if len(stamps) > 1 else 0.0
    return {"text": "".join(text), "tokens": tokens, "ttft": stamps[0] - sent,
            "rate": (tokens - 1) / span if span else 0.0, "wall": done - sent}


def client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=url, api_key="x", max_retries=0, timeout=600,
                         default_query=None)


def raw_rate(llm: Any, max_tokens: int) -> float:
    llm.reset()
    stamps = []
    for chunk in llm.create_chat_completion(
            [{"role": "user", "content": STORY}], stream=True, max_tokens=max_tokens,
            **SAMPLING, **EXTRA):
        if chunk["choices"][0]["delta"].get("content"):
            stamps.append(time.perf_counter())
    return (len(stamps) - 1) / (stamps[-1] - stamps[0])


def decode_rates(model: str, threads: int, urls: dict[str, str], runs: int,
                 max_tokens: int) -> dict[str, float]:
    import llama_cpp  # the raw baseline; the app imports llama_cpp only in engine/host.py

    llm = llama_cpp.Llama(model, n_ctx=N_CTX, n_batch=512, n_ubatch=512, n_threads=threads,
                          n_threads_batch=threads, verbose=False)
    rates: dict[str, list[float]] = {"raw": [], **{name: [] for name in urls}}
    apis = {name: client(url) for name, url in urls.items()}
    try:
        for _ in range(runs):  # interleaved, so drift in machine speed hits all alike
            rates["raw"].append(raw_rate(llm, max_tokens))
            for name, api in apis.items():
                rates[name].append(stream(api, [{"role": "user", "content": STORY}],
                                          max_tokens)["rate"])
    finally:
        llm.close()
        for api in apis.values():
            api.close()
    return {name: statistics.median(values) for name, values in rates.items()}


def ttft_turns(url: str, turns: int, rep: int, reply_tokens: int) -> list[float]:
    with client(url) as api:
        return resent_chat(lambda messages: stream(api, messages, reply_tokens), turns, rep)


def alternating_ttft(url: str, turns: int, rep: int, reply_tokens: int) -> float:
    """Two clients, each naming its `user`, take turns resending their growing conversations:
    the TTFT of the first client's last turn, asked right after the other client's turn."""
    with client(url) as api:
        chats = [resent_chat_steps(lambda m, u=user: stream(api, m, reply_tokens, user=u), turns,
                                   rep * 2 + i) for i, user in enumerate(("ann", "bob"))]
        last = 0.0
        for _ in range(turns):
            last = next(chats[0])
            next(chats[1])
        return last


def raw_ttft_turns(model: str, threads: int, turns: int, rep: int,
                   reply_tokens: int) -> list[float]:
    """The same conversation through llama-cpp-python in this process (its own prefix reuse)."""
    import llama_cpp  # the raw baseline; the app imports llama_cpp only in engine/host.py

    llm = llama_cpp.Llama(model, n_ctx=N_CTX, n_batch=512, n_ubatch=512, n_threads=threads,
                          n_threads_batch=threads, verbose=False)

    def ask(messages: list[dict[str, str]]) -> dict[str, Any]:
        sent, first, text = time.perf_counter(), 0.0, []
        for chunk in llm.create_chat_completion(messages, stream=True,  # type: ignore[arg-type]
                                                max_tokens=reply_tokens,
                                                **SAMPLING, **EXTRA):
            piece = chunk["choices"][0]["delta"].get("content")  # type: ignore[index]
            if piece:
                first = first or time.perf_counter()
                text.append(piece)
        return {"text": "".join(text), "ttft": first - sent}

    try:
        ask([{"role": "user", "content": "Hello"}])  # page the weights in
        return resent_chat(ask, turns, rep)
    finally:
        llm.close()


def resent_chat(ask: Any, turns: int, rep: int) -> list[float]:
    """TTFT of each turn of a conversation whose whole history is sent every turn; each `rep`
    starts differently, so that its turn 1 is not read from the last one's KV cache."""
    return list(resent_chat_steps(ask, turns, rep))


def resent_chat_steps(ask: Any, turns: int, rep: int) -> Iterator[float]:
    messages = [{"role": "system", "content": f"You are a helpful assistant. (Chat {rep})"}]
    for turn in range(turns):
        messages.append({"role": "user", "content": f"Tell me one interesting fact about "
                         f"{TOPICS[turn]}, in two sentences, and why it matters to people."})
        reply = ask(messages)
        messages.append({"role": "assistant", "content": reply["text"]})
        yield reply["ttft"]


def clients_at_once(api: openai.OpenAI, clients: int, max_tokens: int, salt: int) -> dict[str, Any]:
    """`clients` asking at once, each its own story: tokens/s over the wall time, and TTFTs."""
    results: list[dict[str, Any]] = []
    lock = threading.Lock()

    def ask(i: int) -> None:
        prompt = f"{STORY} Name the keeper {TOPICS[(i + salt) % len(TOPICS)]}."
        result = stream(api, [{"role": "user", "content": prompt}], max_tokens,
                        user=f"client{i}")
        with lock:
            results.append(result)

    wall = at_once(clients, ask)
    return {"tok_s": sum(x["tokens"] for x in results) / wall,
            "ttfts": [x["ttft"] for x in results]}


def concurrency(url: str, rounds: int, max_tokens: int) -> dict[str, float]:
    """One client alone, then four at once, alternating, so drift in machine speed hits both
    alike: the median ratio of their throughputs and the p95 TTFT of the four."""
    ratios, single, four, ttfts = [], [], [], []
    with client(url) as api:
        for r in range(rounds):
            one = clients_at_once(api, 1, max_tokens, r)
            many = clients_at_once(api, 4, max_tokens, r + 1)
            single.append(one["tok_s"])
            four.append(many["tok_s"])
            ratios.append(many["tok_s"] / one["tok_s"])
            ttfts += many["ttfts"]
    return {"single": statistics.median(single), "four": statistics.median(four),
            "ratio": statistics.median(ratios), "p95_ttft": _p95(ttfts)}


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny counts, to check it runs")
    args = parser.parse_args()
    quick = args.quick
    model = bundled_model()
    if model is None:
        return 1
    threads = physical_cores()
    runs, decode_tokens, turns, reps = (1, 16, 3, 1) if quick else (5, 256, 12, 3)
    # The TTFT conversations' replies: 64 tokens, as a chat's; quick: a few (at 64, they were
    # 1,400 of the quick run's 1,580 decoded tokens, for figures that mean nothing).
    reply_tokens = 8 if quick else 64
    rounds, concurrent_tokens = (1, 8) if quick else (5, 128)
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp, \
            inglenook_serve(str(model), threads, Path(tmp), "--ollama") as url, \
            peer_server(str(model), threads) as peer:
        urls = {"api": url, **({"peer": peer} if peer else {})}
        for address in urls.values():  # the first reply pages the mmapped weights in
            with client(address) as api:
                stream(api, [{"role": "user", "content": "Hello"}], 8)
        log(f"Decode speed: raw, inglenook serve{', llama_cpp.server' if peer else ''} "
            f"({runs} runs of {decode_tokens} tokens each)…")
        rates = decode_rates(str(model), threads, urls, runs, decode_tokens)
        results.update(raw_decode_tok_s=round(rates["raw"], 1),
                       api_decode_tok_s=round(rates["api"], 1),
                       api_decode_over_raw=round(rates["api"] / rates["raw"], 3))
        if peer:
            results.update(peer_decode_tok_s=round(rates["peer"], 1),
                           api_decode_over_peer_server=round(rates["api"] / rates["peer"], 3))

        log(f"TTFT of turn {turns} of a conversation resent every turn ({reps} times)…")
        runs_of: dict[str, list[list[float]]] = {"api": [], "peer": [], "raw": []}
        for rep in range(reps):  # interleaved, as above
            runs_of["api"].append(ttft_turns(url, turns, rep, reply_tokens))
            if peer:
                runs_of["peer"].append(ttft_turns(peer, turns, rep, reply_tokens))
            runs_of["raw"].append(raw_ttft_turns(str(model), threads, turns, rep,
                                                   reply_tokens))
        # Turn 1 too: a turn 12 no slower than turn 1 shows that only the new tokens were
        # evaluated (llama-cpp-python reuses the longest common prefix as well).
        ttft = {f"{name}_ttft_turn{turn}_ms": round(1000 * statistics.median(
                    run[turn - 1] for run in runs), 1)
                for name, runs in runs_of.items() if runs for turn in (1, turns)}
        # (--quick has 3 turns: the last is still reported as turn 12)
        results.update({key.replace(f"turn{turns}_", "turn12_"): value
                        for key, value in ttft.items()})
        if peer:
            results.update(api_ttft_turn12_over_peer=round(
                results["api_ttft_turn12_ms"] / results["peer_ttft_turn12_ms"], 3))

        log(f"TTFT of turn {turns} of two conversations resent in alternation ({reps} times)…")
        alternating = {name: statistics.median(alternating_ttft(address, turns, 10 + rep,
                                                                reply_tokens)
                                               for rep in range(reps))
                       for name, address in urls.items()}
        results.update(api_ttft_alternating_ms=round(alternating["api"] * 1000, 1))
        if peer:
            results.update(peer_ttft_alternating_ms=round(alternating["peer"] * 1000, 1),
                           api_ttft_alternating_over_peer=round(
                               alternating["api"] / alternating["peer"], 3))

        log(f"One client, then four at once ({rounds} rounds of {concurrent_tokens} tokens)…")
        both = concurrency(url, rounds, concurrent_tokens)
        results.update(api_single_tok_s=round(both["single"], 1),
                       api_concurrent4_tok_s=round(both["four"], 1),
                       api_concurrent4_aggregate_over_single=round(both["ratio"], 3),
                       api_concurrent4_p95_ttft_ms=round(both["p95_ttft"] * 1000, 1))
        log(f"Each dialect's streamed reply against OpenAI's ({rounds} rounds)…")
        results.update(dialect_overheads(url, rounds, concurrent_tokens))
    results.update(threads=threads, quick=quick)
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
