"""API replies as jobs on the engine scheduler, their events delivered to the event loop.

The server shares the engine the way the window does: each HTTP request is one scheduler Job
with its own owner (so clients and chats take turns) and its own request id. API request ids
come from their own range, shared by every server in the process, so they never name a window
reply (the window counts from 1) in the scheduler or in the engine host, whose late-cancel
check assumes ids do not repeat.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

from inglenook.core.messages import GenerationRequest, Message
from inglenook.core.replies import Finish, Stats
from inglenook.core.sampling import SamplingParams
from inglenook.engine import protocol as p
from inglenook.engine.client import EngineClient, EngineCrashed, EngineError
from inglenook.engine.remote_router import EngineRouter
from inglenook.engine.scheduler import Job, Scheduler
from inglenook.server.errors import ApiError
from inglenook.server.status import StatusBoard

FIRST_API_REQUEST_ID = 1_000_000_000  # below 2**31: ids also travel in Qt int signals
ENGINE_LOST = "The engine stopped during this reply; it is being restarted."

_ids = itertools.count(FIRST_API_REQUEST_ID)
_ids_lock = threading.Lock()


def next_request_id() -> int:
    with _ids_lock:
        return next(_ids)


class Reply:
    """The events of one API reply, read on the event loop. Ends with exactly one Finished."""

    def __init__(self, request_id: int, owner: str, loop: asyncio.AbstractEventLoop) -> None:
        self.request_id = request_id
        self.owner = owner
        self.finished = False  # set on the event loop when Finished is read
        self._loop = loop
        self._events: asyncio.Queue[Any] = asyncio.Queue()

    def push(self, event: Any) -> bool:
        """From the engine thread. False when the event loop is gone (the server stopped)."""
        try:
            self._loop.call_soon_threadsafe(self._events.put_nowait, event)
        except RuntimeError:
            return False
        return True

    async def events(self) -> AsyncIterator[Any]:
        while not self.finished:
            event = await self._events.get()
            if isinstance(event, p.Finished):
                self.finished = True
            yield event


class EngineLink:
    """Starts replies on the scheduler and stops them. Used on the server's event loop, except
    `cancel_all`, which any thread may call.

    `on_engine_lost(message)` runs on the engine thread when the host died during an API reply
    (a crash, or the stop watchdog): whoever owns the engine decides whether to reload.
    """

    def __init__(self, scheduler: Scheduler, client: EngineClient | EngineRouter, max_pending: int,
                 board: StatusBoard,
                 on_engine_lost: Callable[[str], None] | None = None) -> None:
        self.scheduler = scheduler
        self.client = client
        self.max_pending = max_pending
        self.board = board  # counts what the engine did, read or not by the client
        self.on_engine_lost = on_engine_lost
        self._lock = threading.Lock()
        self._pending: dict[int, Reply] = {}

    @property
    def model_name(self) -> str | None:
        model = self.client.model  # read across threads: a reference, replaced whole
        return model.name if model is not None else None

    def start(self, messages: tuple[Message, ...], sampling: SamplingParams,
              owner: str, conversation: str = "") -> Reply:
        """`conversation` (a client that names its `user`): the engine keeps its KV state
        when another conversation runs, as it does for a chat of the window."""
        if self.client.model is None:
            raise ApiError(503, "No model is loaded.", code="model_not_loaded")
        rid = next_request_id()
        reply = Reply(rid, owner, asyncio.get_running_loop())
        with self._lock:
            if len(self._pending) >= self.max_pending:
                raise ApiError(503, f"The server is busy ({self.max_pending} requests are "
                               "generating or waiting); try again shortly.", code="server_busy")
            self._pending[rid] = reply
        self.board.reply_started()
        request = GenerationRequest(rid, messages, sampling, conversation=conversation)
        job = Job(lambda: self._run(request, reply), owner=owner, request_id=rid,
                  dropped=lambda: self._end(reply, p.Finished(rid, Finish("cancelled"))))
        try:
            self.scheduler.submit(job)
        except RuntimeError as exc:  # the scheduler closed: the engine is shutting down
            self._end(reply, p.Finished(rid, Finish("cancelled")))
            raise ApiError(503, "The engine is shutting down.", code="engine_unavailable") from exc
        return reply

    def cancel(self, reply: Reply) -> None:
        """Stop a reply wherever it is (waiting or running); nothing if it already ended."""
        if not reply.finished:
            self.scheduler.cancel(reply.request_id)

    def cancel_all(self) -> None:
        with self._lock:
            ids = list(self._pending)
        for rid in ids:
            self.scheduler.cancel(rid)

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._pending)

    # ---- on the engine thread ---------------------------------------------------------------
    def _run(self, request: GenerationRequest, reply: Reply) -> None:
        rid = request.request_id
        listening = True
        finished = p.Finished(rid, Finish("error", "The engine ended without a reason."))
        stats: Stats | None = None
        try:
            for event in self.client.generate(request):
                if isinstance(event, p.Finished):
                    finished = event
                    continue
                if isinstance(event, p.ReplyStats):
                    stats = event.stats
                if listening and not reply.push(event):
                    listening = False  # nobody will read the rest: stop within a token
                    self.client.cancel(rid)
        except EngineCrashed:
            finished = p.Finished(rid, Finish("error", ENGINE_LOST))
        except EngineError as exc:
            finished = p.Finished(rid, Finish("error", str(exc)))
        except Exception as exc:  # the reply must end, whatever happened
            finished = p.Finished(rid, Finish("error", f"The engine failed: {exc}"))
        self._end(reply, finished, stats)
        if not self.client.alive and self.on_engine_lost is not None:
            self.on_engine_lost(finished.finish.message or ENGINE_LOST)

    def _end(self, reply: Reply, finished: p.Finished, stats: Stats | None = None) -> None:
        with self._lock:
            self._pending.pop(reply.request_id, None)
        self.board.reply_ended(stats)
        reply.push(finished)
