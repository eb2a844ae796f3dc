"""Live figures for whoever shows the server (the window's switch, the CLI's log)."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from inglenook.core.replies import Stats

REQUEST_LOG = 200  # the latest requests the window lists


@dataclass(frozen=True)
class RequestRecord:
    """One request as the window's request log lists it: what was asked, never what was said."""

    at: float  # time.time() when it ended
    client: str  # the peer's address
    method: str
    route: str
    status: int  # the HTTP status (a stream's is 200 even when it ends with an error event)
    seconds: float
    model: str = ""
    prompt_tokens: int = 0
    cached_tokens: int = 0
    generated_tokens: int = 0
    outcome: str = ""  # "" when the status says it all; else why it ended (an error, a stop)
    fetched: str = ""  # images fetched by URL for it, or refused: their hosts and sizes


@dataclass(frozen=True)
class ServerStatus:
    running: bool = False
    url: str = ""
    # Requests answered since the server started, any route and outcome: those its log lists
    # (a model list, a refusal and a reply each count once, when they end).
    requests: int = 0
    active: int = 0  # replies generating or waiting for the engine now
    tokens: int = 0  # tokens generated for API clients in total
    tokens_per_s: float = 0.0  # decode speed of the latest reply
    errors: int = 0  # requests answered with an error (4xx/5xx), cancellations excluded
    last_error: str = ""  # cleared by the next request that succeeds
    recent: tuple[RequestRecord, ...] = ()  # the latest requests, oldest first


class StatusBoard:
    """Thread-safe ServerStatus. `on_change(status)` is called on the thread that changed it
    (the server's event loop); the window re-emits it as a queued signal."""

    def __init__(self, on_change: Callable[[ServerStatus], None] | None = None) -> None:
        self._lock = threading.Lock()
        self._status = ServerStatus()
        self._recent: deque[RequestRecord] = deque(maxlen=REQUEST_LOG)
        self.on_change = on_change

    def get(self) -> ServerStatus:
        with self._lock:
            return self._status

    def update(self, **changes: Any) -> None:
        with self._lock:
            self._status = replace(self._status, **changes)
            status = self._status
        if self.on_change is not None:
            self.on_change(status)

    def reply_started(self) -> None:
        with self._lock:
            self._status = replace(self._status, active=self._status.active + 1)
        self._changed()

    def reply_ended(self, stats: Stats | None) -> None:
        """The engine is done with a reply (finished, stopped or dropped while it waited)."""
        with self._lock:
            s = self._status
            self._status = replace(
                s, active=max(0, s.active - 1),
                tokens=s.tokens + (stats.generated_tokens if stats else 0),
                tokens_per_s=stats.decode_tok_s if stats and stats.generated_tokens > 1
                else s.tokens_per_s)
        self._changed()

    def failed(self, message: str) -> None:
        """A client was told its reply failed."""
        with self._lock:
            s = self._status
            self._status = replace(s, errors=s.errors + 1, last_error=message)
        self._changed()

    def refused(self, message: str) -> None:
        """A request answered with an error before it reached the engine."""
        with self._lock:
            s = self._status
            self._status = replace(s, errors=s.errors + 1, last_error=message)
        self._changed()

    def logged(self, record: RequestRecord) -> None:
        """A request ended (any route, any outcome)."""
        ok = record.status < 400 and not record.outcome
        with self._lock:
            self._recent.append(record)
            s = self._status
            self._status = replace(s, recent=tuple(self._recent), requests=s.requests + 1,
                                   last_error="" if ok else s.last_error)
        self._changed()

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change(self.get())
