"""API replies as jobs on the engine scheduler, their events delivered to the event loop.

The server shares the engines the way the window does: each choice of an HTTP request is one
scheduler Job with its own owner (so clients and chats take turns for the lanes) and its own
request id, on the engine of the model it names (loaded just in time). API request ids come
from their own range, shared by every server in the process, so they never name a window reply
(the window counts from 1) in the scheduler or in an engine host, whose late-cancel check
assumes ids do not repeat.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inglenook.core.load import ModelInfo
from inglenook.core.messages import ForcedCall, GenerationRequest, Message, RawPrompt
from inglenook.core.replies import Finish, Stats
from inglenook.core.sampling import SamplingParams
from inglenook.engine import protocol as p
from inglenook.engine.client import EngineClient, EngineCrashed, EngineError
from inglenook.engine.router import EngineRouter
from inglenook.engine.scheduler import Job, Scheduler
from inglenook.server.errors import ApiError
from inglenook.server.status import StatusBoard

FIRST_API_REQUEST_ID = 1_000_000_000  # below 2**31: ids also travel in Qt int signals
ENGINE_LOST = "The engine stopped during this reply; it is being restarted."
NOT_LOADED = "could not be loaded"  # in the message of a model the API named that failed

_ids = itertools.count(FIRST_API_REQUEST_ID)
_ids_lock = threading.Lock()


def next_request_id() -> int:
    with _ids_lock:
        return next(_ids)


@dataclass(frozen=True)
class Ask:
    """What one HTTP request asks of the engine. `principal` scopes KV reuse (see
    core/messages.py); `conversation` a client-named conversation within it; `group` the
    engine (router.resolve); `n` choices of the same prompt."""

    messages: tuple[Message, ...]
    sampling: SamplingParams
    owner: str
    principal: str
    conversation: str = ""
    group: str = ""
    n: int = 1
    keep_alive: float | None = None
    tools: tuple[dict[str, Any], ...] = ()
    enable_thinking: bool | None = None
    reasoning_effort: str = ""
    reply_format: str = ""  # GenerationRequest.reply_format
    logit_bias: tuple[tuple[int, float], ...] = ()
    logprobs: int = -1
    forced_call: ForcedCall | None = None
    raw: RawPrompt | None = None
    prefill: str = ""  # GenerationRequest.prefill: the reply goes on from this text


class Reply:
    """The events of one API reply's choices, read on the event loop as (choice, event).
    Ends once every choice gave its one Finished."""

    def __init__(self, request_ids: list[int], owner: str,
                 loop: asyncio.AbstractEventLoop) -> None:
        self.request_ids = request_ids
        self.owner = owner
        self.finished = False  # set on the event loop when the last Finished is read
        self._open = set(range(len(request_ids)))
        self._loop = loop
        self._events: asyncio.Queue[tuple[int, Any]] = asyncio.Queue()

    @property
    def request_id(self) -> int:
        return self.request_ids[0]

    def push(self, choice: int, event: Any) -> bool:
        """From an engine thread. False when the event loop is gone (the server stopped)."""
        try:
            self._loop.call_soon_threadsafe(self._events.put_nowait, (choice, event))
        except RuntimeError:
            return False
        return True

    async def events(self) -> AsyncIterator[tuple[int, Any]]:
        while not self.finished:
            choice, event = await self._events.get()
            if isinstance(event, p.Finished):
                self._open.discard(choice)
                self.finished = not self._open
            yield choice, event


class EngineLink:
    """Starts replies on the scheduler and stops them. Used on the server's event loop, except
    `cancel_all`, which any thread may call.

    `on_engine_lost(message)` runs on an engine thread when the window's engine died during an
    API reply (a crash, or the stop watchdog): whoever owns the engine decides whether to
    reload. A model the API loaded that dies is loaded again by the next request naming it.
    """

    def __init__(self, scheduler: Scheduler, client: EngineRouter | EngineClient,
                 max_pending: int, board: StatusBoard,
                 on_engine_lost: Callable[[str], None] | None = None) -> None:
        self.scheduler = scheduler
        self.client = client if isinstance(client, EngineRouter) else EngineRouter(client)
        self.max_pending = max_pending
        self.board = board  # counts what the engine did, read or not by the client
        self.on_engine_lost = on_engine_lost
        self._lock = threading.Lock()
        self._pending: dict[int, Reply] = {}

    @property
    def model_name(self) -> str | None:
        model = self.client.model  # read across threads: a reference, replaced whole
        return model.name if model is not None else None

    def model_names(self) -> list[str]:
        """What /v1/models lists: the window's model, those loaded, then the library."""
        if self.client.model is None:
            return []
        return self.client.names()

    def resolve(self, name: str) -> str:
        """The group of the model a request names; an empty name is the window's model. A
        name that is neither loaded nor in the library is a 404, as OpenAI answers it (an
        unknown name answered by another model would hide a typo)."""
        group = self.client.resolve(name)
        wanted = name.strip().lower()
        if group or not wanted:
            return group
        model = self.client.model
        known = {m.name.lower() for m in self.client.loaded_models()}
        if model is not None:
            known |= {model.name.lower(), Path(model.path).name.lower(),
                      Path(model.path).stem.lower()}
        if wanted not in known:
            raise ApiError(404, f"The model '{name[:100]}' does not exist here; GET /v1/models "
                           "lists those a request may name (or leave the name empty for the "
                           "loaded one).", param="model", code="model_not_found")
        return group

    def model_info(self, group: str) -> ModelInfo | None:
        """What the engine of `group` has loaded (None until it has)."""
        if not group:
            return self.client.model
        engine = self.client.engine_of(group)
        return engine.model if engine is not None else None

    def start(self, ask: Ask) -> Reply:
        if not ask.group and self.client.model is None:
            raise ApiError(503, "No model is loaded.", code="model_not_loaded")
        rids = [next_request_id() for _ in range(ask.n)]
        reply = Reply(rids, ask.owner, asyncio.get_running_loop())
        with self._lock:
            if len(self._pending) + ask.n > self.max_pending:
                raise ApiError(503, f"The server is busy ({self.max_pending} requests are "
                               "generating or waiting); try again shortly.", code="server_busy")
            for rid in rids:
                self._pending[rid] = reply
        sampling = ask.sampling
        for choice, rid in enumerate(rids):
            self.board.reply_started()
            if choice and sampling.seed >= 0:  # each choice a sample of its own
                sampling = ask.sampling.replace(seed=(ask.sampling.seed + choice) % 2**31)
            # overflow "stop": a conversation longer than the context is a 400, as OpenAI
            # answers it, never a reply to a history with turns silently left out.
            request = GenerationRequest(rid, ask.messages, sampling,
                                        conversation=ask.conversation if not choice else "",
                                        overflow="stop", tools=ask.tools,
                                        enable_thinking=ask.enable_thinking,
                                        reasoning_effort=ask.reasoning_effort,
                                        principal=ask.principal,
                                        reply_format=ask.reply_format,
                                        logit_bias=ask.logit_bias, logprobs=ask.logprobs,
                                        forced_call=ask.forced_call, raw=ask.raw,
                                        prefill=ask.prefill)
            job = Job(functools.partial(self._run, request, reply, choice, ask),
                      owner=ask.owner, request_id=rid, group=ask.group,
                      dropped=functools.partial(self._end, reply, choice,
                                                p.Finished(rid, Finish("cancelled"))))
            try:
                self.scheduler.submit(job)
            except RuntimeError as exc:  # the scheduler closed: the engine is shutting down
                for c, r in enumerate(rids[choice:], start=choice):
                    self._end(reply, c, p.Finished(r, Finish("cancelled")))
                raise ApiError(503, "The engine is shutting down.",
                               code="engine_unavailable") from exc
        return reply

    def cancel(self, reply: Reply) -> None:
        """Stop a reply wherever it is (waiting or running); nothing if it already ended."""
        if not reply.finished:
            for rid in reply.request_ids:
                self.scheduler.cancel(rid)

    def cancel_all(self) -> None:
        with self._lock:
            ids = list(self._pending)
        for rid in ids:
            self.scheduler.cancel(rid)

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._pending)

    # ---- on an engine thread ----------------------------------------------------------------
    def _run(self, request: GenerationRequest, reply: Reply, choice: int, ask: Ask) -> None:
        rid = request.request_id
        listening = True
        finished = p.Finished(rid, Finish("error", "The engine ended without a reason."))
        stats: Stats | None = None
        started = False
        try:
            for event in self.client.generate(request, ask.group, ask.keep_alive):
                started = True
                if isinstance(event, p.Finished):
                    finished = event
                    continue
                if isinstance(event, p.ReplyStats):
                    stats = event.stats
                if listening and not reply.push(choice, event):
                    listening = False  # nobody will read the rest: stop within a token
                    self.client.cancel(rid)
        except EngineCrashed:
            finished = p.Finished(rid, Finish("error", ENGINE_LOST))
        except EngineError as exc:
            message = str(exc) if started or not ask.group else (
                f"The model {ask.group.rsplit('/', 1)[-1]} {NOT_LOADED}: {exc}")
            finished = p.Finished(rid, Finish("error", message))
        except Exception as exc:  # the reply must end, whatever happened
            finished = p.Finished(rid, Finish("error", f"The engine failed: {exc}"))
        self._end(reply, choice, finished, stats)
        if not ask.group and not self.client.alive and self.on_engine_lost is not None:
            self.on_engine_lost(finished.finish.message or ENGINE_LOST)

    def _end(self, reply: Reply, choice: int, finished: p.Finished,
             stats: Stats | None = None) -> None:
        with self._lock:
            self._pending.pop(finished.request_id, None)
        self.board.reply_ended(stats)
        reply.push(choice, finished)
