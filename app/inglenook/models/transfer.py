"""Two pieces of a fast byte transfer: sha256 on a helper thread, and throttled progress."""

from __future__ import annotations

import hashlib
import queue
import threading
import time
from collections import deque
from collections.abc import Callable

_PROGRESS_EVERY_S = 0.1
_SPEED_WINDOW_S = 5.0

ProgressCallback = Callable[[int, int, float, float | None], None]
"""(done_bytes, total_bytes, bytes_per_s, eta_s or None while unknown)."""


class Sha256Worker:
    """sha256 on a helper thread. hashlib lets go of the GIL on large updates, so hashing runs
    alongside the network reads and disk writes instead of after each chunk: on loopback that
    took a download from ~0.55 to ~0.9 of curl's speed (bench/download_bench.py). Chunks come in
    lists of about a megabyte, to keep the hand-offs between threads few."""

    _RESET = object()
    _STOP = object()

    def __init__(self) -> None:

        self._new = hashlib.sha256
        self._sha = self._new()
        self._queue: queue.Queue[object] = queue.Queue(maxsize=16)  # bounds memory: ~16 MiB
        self._thread = threading.Thread(target=self._run, name="sha256", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while (item := self._queue.get()) is not self._STOP:
            if item is self._RESET:
                self._sha = hashlib.sha256()
            else:
                for data in item:  # type: ignore[attr-defined]
                    self._sha.update(data)

    def update(self, chunks: list[bytes]) -> None:
        """Hash these next (the list is the hasher's from now on)."""
        if chunks:
            self._queue.put(chunks)

    def reset(self) -> None:
        self._queue.put(self._RESET)

    def hexdigest(self) -> str:
        self.close()
        return self._sha.hexdigest()

    def close(self) -> None:
        if self._thread.is_alive():
            self._queue.put(self._STOP)
            self._thread.join()

    def __enter__(self) -> Sha256Worker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ProgressMeter:
    """Throttled progress: speed over the last few seconds, ETA from that speed."""

    def __init__(self, total: int, start: int, callback: ProgressCallback | None) -> None:
        self.total, self.callback = total, callback
        self.samples: deque[tuple[float, int]] = deque([(time.monotonic(), start)])
        self.last = 0.0
        if callback is not None:
            callback(start, total, 0.0, None)

    def update(self, done: int, force: bool = False) -> None:
        if self.callback is None:
            return
        now = time.monotonic()
        if not force and now - self.last < _PROGRESS_EVERY_S:
            return
        self.last = now
        if done < self.samples[-1][1]:  # started again from zero: old samples mean nothing
            self.samples.clear()
        self.samples.append((now, done))
        while len(self.samples) > 2 and now - self.samples[0][0] > _SPEED_WINDOW_S:
            self.samples.popleft()
        t0, d0 = self.samples[0]
        speed = (done - d0) / (now - t0) if now > t0 else 0.0
        eta = (self.total - done) / speed if speed > 0 else None
        self.callback(done, self.total, speed, 0.0 if done >= self.total else eta)
