"""The samplers of replies held to a grammar, made off the batch loop.

Turning a JSON schema (or a forced call's tools) into a grammar, having llama.cpp parse it, and
the first such reply's table of each token's first byte (sampler.first_bytes) take from
milliseconds to a good part of a second (and more before the grammar's size was bounded), and
the batch loop's other replies would wait for each. So one thread of the host makes them, one
at a time, and hands each back to the main thread through its inbox: the reply then waits for
a slot like any other. What this thread touches of the model is read only (its vocabulary);
the sampler it makes is the main thread's from then on.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass

from inglenook.engine.host.llama import Sampler


@dataclass
class Prepared:
    """A made sampler (or why none could be made), for the reply `request_id`."""

    request_id: int
    sampler: Sampler | None = None
    error: Exception | None = None


class SamplerMaker:
    """One daemon thread that runs `make` jobs in the order given; each result goes to
    `deliver`, called on that thread (the host puts it in its inbox)."""

    def __init__(self, deliver: Callable[[Prepared], None]) -> None:
        self._deliver = deliver
        self._jobs: queue.Queue[tuple[int, Callable[[], Sampler]]] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="grammars", daemon=True)
        self._thread.start()

    def submit(self, request_id: int, make: Callable[[], Sampler]) -> None:
        self._jobs.put((request_id, make))

    def _run(self) -> None:
        while True:
            request_id, make = self._jobs.get()
            try:
                prepared = Prepared(request_id, sampler=make())
            except Exception as exc:  # the reply fails with it; the host stays up
                prepared = Prepared(request_id, error=exc)
            self._deliver(prepared)
