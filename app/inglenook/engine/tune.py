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

from inglenook.engine.protocol import TuneResult

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
    # The speeds of the settings in use when it began (`current`), measured alongside.
    before_decode_tok_s: float = 0.0
    before_prompt_tok_s: float = 0.0


class Stopped(Exception):
    """The tune was cancelled."""


def thread_choices(physical: int, logical: int, current: tuple[int, int] = (0, 0)) -> list[int]:
    return sorted({max(1, physical // 2), max(1, physical), max(1, logical)}
                  | {n for n in current if n > 0})


def batch_choices(n_batch: int) -> list[int]:
    """The loaded batch size and smaller ones: a larger one would need a reload to measure."""
    return sorted({b for b in (n_batch // 4, n_batch // 2) if b >= MIN_BATCH} | {n_batch})


def trial_count(physical: int, logical: int, n_batch: int,
                current: tuple[int, int] = (0, 0)) -> int:
    """How many trials tune() runs (for its progress)."""
    threads = len(thread_choices(physical, logical, current))
    return ROUNDS * (2 * threads + len(batch_choices(n_batch)) - 1)


def tune(bench: Bench, physical: int, logical: int, n_batch: int, seconds: float,
         stopped: Callable[[], bool], current: tuple[int, int] = (0, 0),
         progress: Callable[[int, int], None] | None = None) -> Tuned:
    """Decode threads among thread_choices (with the `current` decode and prompt threads, so
    that the figures compare with what is in use); prompt threads among them at the loaded
    batch size; then smaller batch sizes with the fastest prompt threads. `progress(done,
    total)` after each trial. Raises Stopped."""
    best: dict[tuple[str, int, int], float] = {}
    total, done = trial_count(physical, logical, n_batch, current), [0]

    def measure(kind: str, threads: int, batch: int) -> None:
        if stopped():
            raise Stopped
        rate = (bench.decode_rate(threads, seconds) if kind == "decode"
                else bench.prompt_rate(threads, batch, seconds))
        key = (kind, threads, batch)
        best[key] = max(best.get(key, 0.0), rate)
        done[0] += 1
        if progress is not None:
            progress(done[0], total)

    threads = thread_choices(physical, logical, current)
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
    decode_now, prompt_now = current
    return Tuned(decode_threads, prompt_threads, batch, best[("decode", decode_threads, 1)],
                 prompt_rate, trials, best.get(("decode", decode_now, 1), 0.0),
                 best.get(("prompt", prompt_now, n_batch), 0.0))


def compare(result: TuneResult) -> tuple[str, bool]:
    """What a tune found against the settings in use (its before/after figures), for the
    user, and whether keeping it would change anything."""
    threads, batch_threads = result.before_n_threads, result.before_n_threads_batch
    batch_threads = batch_threads or threads
    now = (threads, batch_threads, result.before_n_batch)
    best = (result.n_threads, result.n_threads_batch, result.n_batch)
    if now == best:
        return (f"Already the fastest here: {_threads(threads)} for replies "
                f"({result.decode_tok_s:.1f} tok/s), {_threads(batch_threads)} and batch "
                f"{result.n_batch} for prompts ({result.prompt_tok_s:,.0f} tok/s)."), False
    replies = (f"Replies: {_threads(threads)} → {_threads(result.n_threads)}, "
               f"{_rates(result.before_decode_tok_s, result.decode_tok_s, '.1f')}"
               if threads != result.n_threads
               else f"Replies: {_threads(threads)}, {result.decode_tok_s:.1f} tok/s (kept)")
    prompts = (f"Prompts: {_threads(batch_threads)}, batch {result.before_n_batch} → "
               f"{_threads(result.n_threads_batch)}, batch {result.n_batch}, "
               f"{_rates(result.before_prompt_tok_s, result.prompt_tok_s, ',.0f')}"
               if now[1:] != best[1:]
               else f"Prompts: {_threads(batch_threads)}, batch {result.n_batch}, "
                    f"{result.prompt_tok_s:,.0f} tok/s (kept)")
    return f"{replies}.\n{prompts}.", True


def _threads(n: int) -> str:
    return f"{n} thread{'s' if n != 1 else ''}"


def _rates(before: float, after: float, spec: str) -> str:
    gain = f" ({(after / before - 1) * 100:+.0f}%)" if before > 0 else ""
    return f"{format(before, spec)} → {format(after, spec)} tok/s{gain}"
