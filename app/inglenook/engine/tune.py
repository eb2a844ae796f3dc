"""The fastest threads and batch size for the loaded model on this machine, by measuring.

Decoding reads every weight once per token and is bound by memory bandwidth: past the physical
cores, more threads only contend (and ggml's threads spin at barriers). Prompt evaluation works
on batches and is bound by arithmetic, where hyperthreads can help. The defaults follow that
(physical cores, all cores); this measures instead, since shared machines, E-cores and busy
neighbours all move the answer.

Each trial runs for about `seconds` (at least one step), twice, interleaved, keeping the better
run, so a moment of contention does not decide. No llama_cpp here: the host hands in a `Bench`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

MIN_BATCH = 64
ROUNDS = 2


class Bench(Protocol):
    def decode_rate(self, n_threads: int, seconds: float) -> float:
        """Tokens per second decoding one at a time with this many threads."""
        ...

    def prompt_rate(self, n_threads: int, n_batch: int, seconds: float) -> float:
        """Tokens per second evaluating a prompt in batches of n_batch with this many threads."""
        ...


@dataclass(frozen=True)
class Trial:
    kind: str  # "decode" or "prompt"
    n_threads: int
    n_batch: int
    tok_s: float


@dataclass(frozen=True)
class Tuned:
    n_threads: int
    n_threads_batch: int
    n_batch: int
    decode_tok_s: float
    prompt_tok_s: float
    trials: tuple[Trial, ...]


class Stopped(Exception):
    """The tune was cancelled."""


def thread_choices(physical: int, logical: int) -> list[int]:
    return sorted({max(1, physical // 2), max(1, physical), max(1, logical)})


def batch_choices(n_batch: int) -> list[int]:
    """The loaded batch size and smaller ones: a larger one would need a reload to measure."""
    return sorted({b for b in (n_batch // 4, n_batch // 2) if b >= MIN_BATCH} | {n_batch})


def tune(bench: Bench, physical: int, logical: int, n_batch: int, seconds: float,
         stopped: Callable[[], bool]) -> Tuned:
    """Decode threads among thread_choices; prompt threads among them at the loaded batch
    size; then smaller batch sizes with the fastest prompt threads. Raises Stopped."""
    best: dict[tuple[str, int, int], float] = {}

    def measure(kind: str, threads: int, batch: int) -> None:
        if stopped():
            raise Stopped
        rate = (bench.decode_rate(threads, seconds) if kind == "decode"
                else bench.prompt_rate(threads, batch, seconds))
        key = (kind, threads, batch)
        best[key] = max(best.get(key, 0.0), rate)

    threads = thread_choices(physical, logical)
    for _ in range(ROUNDS):
        for n in threads:
            measure("decode", n, 1)
            measure("prompt", n, n_batch)
    prompt_threads = max(threads, key=lambda n: best[("prompt", n, n_batch)])
    smaller = [b for b in batch_choices(n_batch) if b != n_batch]
    for _ in range(ROUNDS):
        for b in smaller:
            measure("prompt", prompt_threads, b)
    decode_threads = max(threads, key=lambda n: best[("decode", n, 1)])
    prompt = {k: v for k, v in best.items() if k[0] == "prompt" and k[1] == prompt_threads}
    (_, _, batch), prompt_rate = max(prompt.items(), key=lambda kv: kv[1])
    trials = tuple(Trial(k, n, b, rate) for (k, n, b), rate in best.items())
    return Tuned(decode_threads, prompt_threads, batch, best[("decode", decode_threads, 1)],
                 prompt_rate, trials)
