"""The tune routine's choices, against a machine described by a table."""

from __future__ import annotations

import pytest

from inglenook.engine.protocol import TuneResult
from inglenook.engine.tune import (
    Stopped,
    batch_choices,
    compare,
    thread_choices,
    trial_count,
    tune,
)


class Table:
    """tune.Bench: decode and prompt rates by thread count (and batch size)."""

    def __init__(self, decode: dict[int, float], prompt: dict[tuple[int, int], float]) -> None:
        self.decode, self.prompt = decode, prompt
        self.calls: list[tuple[str, int, int]] = []

    def decode_rate(self, n_threads: int, seconds: float) -> float:
        self.calls.append(("decode", n_threads, 1))
        return self.decode[n_threads]

    def prompt_rate(self, n_threads: int, n_batch: int, seconds: float) -> float:
        self.calls.append(("prompt", n_threads, n_batch))
        return self.prompt[(n_threads, n_batch)]


def test_choices() -> None:
    assert thread_choices(4, 8) == [2, 4, 8]
    assert thread_choices(1, 1) == [1]
    assert batch_choices(512) == [128, 256, 512]
    assert batch_choices(100) == [100]


def test_the_fastest_of_each_is_kept_and_every_trial_reported() -> None:
    # Decoding is best on the physical cores, prompts on all of them with batches of 256.
    table = Table({2: 20.0, 4: 30.0, 8: 25.0},
                  {(2, 512): 100.0, (4, 512): 180.0, (8, 512): 200.0, (8, 128): 150.0,
                   (8, 256): 210.0})
    tuned = tune(table, 4, 8, 512, 0.1, lambda: False)
    assert (tuned.n_threads, tuned.n_threads_batch, tuned.n_batch) == (4, 8, 256)
    assert (tuned.decode_tok_s, tuned.prompt_tok_s) == (30.0, 210.0)
    assert len(tuned.trials) == 3 + 3 + 2
    assert len(table.calls) == 2 * len(tuned.trials)  # every setting measured twice


def test_a_stop_ends_the_tune_between_trials() -> None:
    table = Table({1: 1.0}, {(1, 512): 1.0})
    calls = iter([False, False, True])
    with pytest.raises(Stopped):
        tune(table, 1, 1, 512, 0.1, lambda: next(calls))
    assert len(table.calls) == 2


def test_the_settings_in_use_are_measured_too_for_before_and_after() -> None:
    """Threads in use that are not among the choices (3 here) are measured as well, so the
    result compares with them; progress counts every trial."""
    table = Table({2: 20.0, 3: 24.0, 4: 30.0, 8: 25.0},
                  {(n, b): 100.0 + n + b / 100 for n in (2, 3, 4, 8) for b in (128, 256, 512)})
    seen: list[tuple[int, int]] = []
    tuned = tune(table, 4, 8, 512, 0.1, lambda: False, current=(3, 3),
                 progress=lambda done, total: seen.append((done, total)))
    assert ("decode", 3, 1) in table.calls and ("prompt", 3, 512) in table.calls
    assert (tuned.before_decode_tok_s, tuned.before_prompt_tok_s) == (24.0, 108.12)
    total = trial_count(4, 8, 512, (3, 3))
    assert seen == [(n, total) for n in range(1, total + 1)] and total == len(table.calls)


def result(**changes: object) -> TuneResult:
    values: dict[str, object] = dict(
        request_id=-1, n_threads=4, n_threads_batch=8, n_batch=256, decode_tok_s=30.0,
        prompt_tok_s=210.0, before_n_threads=1, before_n_threads_batch=1, before_n_batch=512,
        before_decode_tok_s=20.0, before_prompt_tok_s=100.0)
    values.update(changes)
    return TuneResult(**values)  # type: ignore[arg-type]


def test_the_comparison_says_before_and_after() -> None:
    text, changed = compare(result())
    assert changed
    assert text == ("Replies: 1 thread → 4 threads, 20.0 → 30.0 tok/s (+50%).\n"
                    "Prompts: 1 thread, batch 512 → 8 threads, batch 256, 100 → 210 tok/s "
                    "(+110%).")
    text, changed = compare(result(before_n_threads=4, before_n_threads_batch=8,
                                   before_n_batch=256))
    assert not changed and text.startswith("Already the fastest here: 4 threads")
    text, changed = compare(result(before_n_threads=4))
    assert changed and "Replies: 4 threads, 30.0 tok/s (kept)" in text
