"""Pieces of byte transfers: sha256 on a helper thread, throttled progress, and bounded reads
of the small answers (JSON, error pages) that must never be read whole."""

from __future__ import annotations

import contextlib
import hashlib
import queue
import re
import threading
import time
import zlib
from collections import deque
from collections.abc import Callable

import httpx2

_PROGRESS_EVERY_S = 0.1
_SPEED_WINDOW_S = 5.0

ProgressCallback = Callable[[int, int, float, float | None], None]
"""(done_bytes, total_bytes, bytes_per_s, eta_s or None while unknown)."""


# A 206's Content-Range ("bytes start-end/total", total may be "*"), and a 416's ("bytes */total").
CONTENT_RANGE = re.compile(r"^bytes (\d+)-(\d+)/(\d+|\*)$")
UNSATISFIED_RANGE = re.compile(r"^bytes \*/(\d+)$")


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


# -- bounded reads --------------------------------------------------------------------------------
# Ask for gzip or nothing: only gzip is decompressed here, a bounded amount at a time. httpx2's own
# decoders inflate a whole network read at once (a 256 KiB read of a gzip bomb is 250 MB), and
# brotli or zstd can inflate further still.
SMALL_ANSWER_HEADERS = {"Accept-Encoding": "gzip"}


class BodyRefused(Exception):
    """str(): why the body was not read (further), to end a sentence ("is larger than 32 MB")."""


def read_bounded(response: httpx2.Response, limit: int, *, seconds: float | None = None,
                 truncate: bool = False) -> bytes:
    """The body of a streamed response (`client.stream(...)`, sent with SMALL_ANSWER_HEADERS),
    never more than `limit` bytes of it after decompression, and never reading for longer
    than `seconds`. Past either bound it raises BodyRefused, or with `truncate` returns the
    first `limit` bytes; either way the rest is never read (closing the stream drops it)."""
    encoding = response.headers.get("Content-Encoding", "identity").strip().lower()
    if encoding not in ("identity", "gzip", ""):
        raise BodyRefused(f"came in an encoding that was not asked for ({encoding[:40]})")
    announced = response.headers.get("Content-Length", "")
    if not truncate and encoding != "gzip" and announced.isdigit() and int(announced) > limit:
        raise BodyRefused(f"is larger than {_size(limit)}")
    inflate = zlib.decompressobj(wbits=31) if encoding == "gzip" else None
    deadline = None if seconds is None else time.monotonic() + seconds
    body = bytearray()
    for chunk in response.iter_raw():
        data = chunk
        while data:
            if inflate is not None:
                try:
                    out = inflate.decompress(data, limit + 1 - len(body))
                except zlib.error:
                    raise BodyRefused("is not valid gzip") from None
                data = inflate.unconsumed_tail
                if not out and inflate.eof:
                    data = b""  # bytes after the gzip stream end: not part of the body
            else:
                out, data = data, b""
            body += out
            if len(body) > limit:
                if truncate:
                    return bytes(body[:limit])
                raise BodyRefused(f"is larger than {_size(limit)}")
        if deadline is not None and time.monotonic() > deadline:
            if truncate:
                return bytes(body)
            raise BodyRefused(f"took longer than {seconds:g} s to arrive")
    if inflate is not None:
        with contextlib.suppress(zlib.error):
            body += inflate.flush()[: limit + 1 - len(body)]
    if len(body) > limit and not truncate:
        raise BodyRefused(f"is larger than {_size(limit)}")
    return bytes(body[:limit])


def _size(n: int) -> str:
    return f"{n / 1e6:g} MB" if n >= 1e6 else f"{n / 1e3:g} KB"
