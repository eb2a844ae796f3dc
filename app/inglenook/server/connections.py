"""The API server's connections, bounded in time and in number, before any request is read.

uvicorn counts every open connection against its limit, also one that never sends a whole
request: 300 half-open connections made every client get 503 while they lasted, and 1,100
used up the process's file descriptors. Here (a subclass of uvicorn's h11 protocol):

- a connection has HEAD_TIMEOUT_S from when it opens, or from the end of its last reply, to
  send a whole request head; then it is closed (uvicorn's keep-alive timer stops at the first
  byte, so a client sending a byte now and then kept it for ever);
- an address holds at most `per_address` connections and the server `total`, fewer than the
  file descriptors it may open; a connection beyond either bound makes room by closing the
  oldest one that is waiting for a request (half-open, or idle between requests), and is
  refused with 503 when every one is busy with a request.

A slow body is bounded where it is read (routes.read_body).
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

from inglenook.server.errors import error_body

HEAD_TIMEOUT_S = 10.0
PER_ADDRESS = 64  # local clients all come from 127.0.0.1; twice the default pending replies
MOST_CONNECTIONS = 256
_BUSY_BODY = json.dumps(error_body(503, "Too many connections are open: try again shortly.",
                                   code="too_many_connections")).encode()
_BUSY = (b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
         b"connection: close\r\ncontent-length: %d\r\n\r\n%s" % (len(_BUSY_BODY), _BUSY_BODY))


def most_connections() -> int:
    """What the server keeps open at most: MOST_CONNECTIONS, or a quarter of the file
    descriptors this process may open (the engine, the window and the log need the rest)."""
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (ImportError, OSError, ValueError):
        return MOST_CONNECTIONS
    if soft == resource.RLIM_INFINITY:
        return MOST_CONNECTIONS
    return max(16, min(MOST_CONNECTIONS, soft // 4))


class ConnectionGuard:
    """Which connections are open, by address, and which of them wait for a request (oldest
    first). Used on the server's event loop only."""

    def __init__(self, total: int, per_address: int = PER_ADDRESS) -> None:
        self.total, self.per_address = total, per_address
        self._address: dict[GuardedH11Protocol, str] = {}
        self._count: Counter[str] = Counter()
        self._waiting: dict[GuardedH11Protocol, None] = {}  # insertion order: oldest first

    def __len__(self) -> int:
        return len(self._address)

    def admit(self, conn: GuardedH11Protocol, address: str) -> bool:
        """Make room for `conn` (closing the oldest waiting connection where a bound is
        reached); False when there is none to close."""
        if self._count[address] >= self.per_address and not self._evict(address):
            return False
        if len(self._address) >= self.total and not self._evict(None):
            return False
        self._address[conn] = address
        self._count[address] += 1
        return True

    def _evict(self, address: str | None) -> bool:
        for conn in self._waiting:
            if address is None or self._address.get(conn) == address:
                self.gone(conn)
                conn.close_waiting()
                return True
        return False

    def waiting(self, conn: GuardedH11Protocol) -> None:
        if conn in self._address:
            self._waiting[conn] = None

    def busy(self, conn: GuardedH11Protocol) -> None:
        self._waiting.pop(conn, None)

    def gone(self, conn: GuardedH11Protocol) -> None:
        self._waiting.pop(conn, None)
        address = self._address.pop(conn, None)
        if address is not None:
            self._count[address] -= 1
            if not self._count[address]:
                del self._count[address]


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol under a ConnectionGuard (see guarded_protocol)."""

    guard: ConnectionGuard
    head_timeout_s: float = HEAD_TIMEOUT_S

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if not self.guard.admit(self, self.client[0] if self.client else ""):
            transport.write(_BUSY)
            transport.close()
            return
        self._wait_for_a_request()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._note_request()

    def on_response_complete(self) -> None:
        super().on_response_complete()  # may start a pipelined request at once
        if not self.transport.is_closing():
            self._note_request()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_deadline()
        self.guard.gone(self)
        super().connection_lost(exc)

    def _note_request(self) -> None:
        """Busy while a request is in progress; otherwise waiting, against the clock."""
        if self.cycle is not None and not self.cycle.response_complete:
            self._cancel_deadline()
            self.guard.busy(self)
        elif self._deadline is None:
            self._wait_for_a_request()

    def _wait_for_a_request(self) -> None:
        self._cancel_deadline()
        self._deadline = self.loop.call_later(self.head_timeout_s, self.close_waiting)
        self.guard.waiting(self)

    def _cancel_deadline(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def close_waiting(self) -> None:
        """Close a connection that has no request in progress (too slow, or made room)."""
        self._cancel_deadline()
        if self.cycle is None or self.cycle.response_complete:
            self.transport.close()


def guarded_protocol(guard: ConnectionGuard, head_timeout_s: float | None = None
                     ) -> type[GuardedH11Protocol]:
    """The protocol class for one server (uvicorn.Config(http=...)), bound to its guard."""
    return type("GuardedH11Protocol", (GuardedH11Protocol,), {
        "guard": guard, "head_timeout_s": HEAD_TIMEOUT_S if head_timeout_s is None
        else head_timeout_s})
