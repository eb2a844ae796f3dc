"""A deadline for an HTTP exchange that holds in every phase: connecting, the headers, the body.

httpx's timeouts are per read, so a server that sends a header line (or a byte) every few
seconds keeps an exchange alive for as long as it likes, each read within the read timeout. A
SocketWatchdog is shown the sockets of the connections a client opens (httpcore's `trace`
request extension: `connect_tcp.complete` and `start_tls.complete` carry the stream); when a
deadline passes it *shuts them down*, so that a blocked read or TLS handshake returns at once. A
connect under way is bounded by its own timeout, and its socket is shut down as soon as it is
seen. Shut down, not closed: closing a socket that another thread is reading does not wake the
read on Linux, and frees its descriptor number for reuse under it.

One watchdog may serve a client's successive exchanges (pooled connections are reused without
a new connect to be seen): each deadline covers every socket the watchdog has seen still open.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from typing import Any


class SocketWatchdog:
    """Give `trace` to every request (`extensions={"trace": watchdog.trace}`), then wrap each
    exchange in `with watchdog.deadline(seconds):` (or `arm` and `disarm`). `fired` says
    whether the last deadline passed; the caller turns that into its own message."""

    def __init__(self) -> None:
        self.fired = False
        self._lock = threading.Lock()
        self._armed = False
        self._timer: threading.Timer | None = None
        self._generation = 0  # which arm() a timer belongs to: a late one of an old deadline
        self._sockets: list[socket.socket] = []

    def trace(self, event: str, info: dict[str, Any]) -> None:
        """httpcore's trace callback: notes each connection's socket (TCP, then TLS)."""
        if not event.endswith((".connect_tcp.complete", ".start_tls.complete")):
            return
        stream = info.get("return_value")
        sock = stream.get_extra_info("socket") if stream is not None else None
        if not isinstance(sock, socket.socket):
            return
        with self._lock:
            self._sockets = [s for s in self._sockets if s.fileno() != -1]  # closed ones go
            self._sockets.append(sock)
            if self._armed and self.fired:  # connected after the deadline: ends at once
                _shut(sock)

    def arm(self, seconds: float) -> None:
        """Start a deadline `seconds` from now (replacing one under way)."""
        self.disarm()
        with self._lock:
            self._generation += 1
            timer = threading.Timer(max(seconds, 0.0), self._fire, (self._generation,))
            timer.daemon = True
            self.fired, self._armed, self._timer = False, True, timer
        timer.start()

    def disarm(self) -> None:
        """The exchange is over (or past the part the deadline was for); `fired` stays."""
        with self._lock:  # after this, the sockets are the client's to close
            timer, self._timer, self._armed = self._timer, None, False
        if timer is not None:
            timer.cancel()

    @contextlib.contextmanager
    def deadline(self, seconds: float) -> Iterator[SocketWatchdog]:
        self.arm(seconds)
        try:
            yield self
        finally:
            self.disarm()

    def _fire(self, generation: int) -> None:
        with self._lock:
            if not self._armed or generation != self._generation:
                return
            self.fired = True
            for sock in self._sockets:
                _shut(sock)


def _shut(sock: socket.socket) -> None:
    # socket.socket's own shutdown, also for an SSLSocket: SSLSocket.shutdown drops its SSL
    # object, and a read under way in the exchange's thread would then fail with ValueError.
    with contextlib.suppress(OSError):
        socket.socket.shutdown(sock, socket.SHUT_RDWR)
