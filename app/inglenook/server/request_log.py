"""The request log: every request of every route and dialect, as it ended, for the window's
list (the server's status board keeps the latest). The outermost middleware, so that what the
security middleware refuses is listed too. A reply adds its model and token counts through
`note_usage`, and images fetched for it (or refused) their hosts through `note_fetched`; nothing
of what was said is kept."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from inglenook.core.replies import Stats
from inglenook.server.status import RequestRecord, StatusBoard

_USAGE = "inglenook.usage"  # where a reply leaves its figures in the request's scope
_FETCHED = "inglenook.fetched"  # what image_fetch did for the request


@dataclass(frozen=True)
class Usage:
    model: str
    stats: Stats | None
    outcome: str = ""


def note_usage(scope: Scope, model: str, stats: Stats | None, outcome: str = "") -> None:
    scope.setdefault("state", {})[_USAGE] = Usage(model, stats, outcome)


def note_fetched(scope: Scope, notes: list[str]) -> None:
    scope.setdefault("state", {})[_FETCHED] = "; ".join(notes)


class RequestLogMiddleware:
    def __init__(self, app: ASGIApp, board: StatusBoard) -> None:
        self.app, self.board = app, board

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = [0]

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, sending)
        except Exception:
            status[0] = status[0] or 500  # answered by the error handler outside
            raise
        finally:
            self.board.logged(_record(scope, status[0], time.perf_counter() - started))


def _record(scope: Scope, status: int, seconds: float) -> RequestRecord:
    usage: Any = scope.get("state", {}).get(_USAGE)
    client = scope.get("client") or ("", 0)
    stats: Stats | None = usage.stats if usage is not None else None
    return RequestRecord(
        time.time(), str(client[0]), str(scope.get("method", "")), str(scope.get("path", "")),
        status, seconds, usage.model if usage is not None else "",
        stats.prompt_tokens if stats else 0, stats.cached_tokens if stats else 0,
        stats.generated_tokens if stats else 0,
        usage.outcome if usage is not None else ("" if status else "no answer"),
        str(scope.get("state", {}).get(_FETCHED, "")))
