"""The tune routine's choices, against a machine described by a table."""

from __future__ import annotations

import pytest

from inglenook.engine.tune import Stopped, batch_choices, thread_choices, tune


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
