"""Sending one reply: a JSON body, or server-sent events as the engine produces text.

While a reply runs, the response also listens for the client going away (an ASGI
`http.disconnect`) and then stops the reply in the engine, waiting or running: an abandoned
stream must not keep the engine busy. Headers are sent with the first text, so an error found
before any text (a prompt longer than the context, no model) still gets its proper status.
"""

from __future__ import annotations

import logging
import re

import anyio
from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send

from inglenook.core.escape import printable
from inglenook.core.replies import Finish, Stats
from inglenook.engine import protocol as p
from inglenook.server.engine_link import ENGINE_LOST, NOT_LOADED, EngineLink, Reply
from inglenook.server.errors import ApiError
from inglenook.server.reply_reader import Choice, ChoiceReader
from inglenook.server.request_log import note_usage
from inglenook.server.responses import FINISH_REASONS, Format
from inglenook.server.schemas import ApiCall
from inglenook.server.status import StatusBoard

log = logging.getLogger(__name__)
_PARAM = re.compile(r"^'([A-Za-z_][\w.\[\]]*)'")
SSE_HEADERS = [(b"cache-control", b"no-cache"), (b"x-accel-buffering", b"no")]


def finish_error(finish: Finish) -> ApiError:
    """What a client is told about a reply that did not end with stop or length."""
    message = finish.message
    if finish.reason == "cancelled":
        return ApiError(503, message or "The reply was stopped before it finished.",
                        code="cancelled")
    if message.startswith("No model is loaded"):
        return ApiError(503, message, code="model_not_loaded")
    if message == ENGINE_LOST or message.startswith("The engine stopped"):
        return ApiError(503, message, code="engine_unavailable")
    if NOT_LOADED in message:
        return ApiError(503, message, param="model", code="model_not_loaded")
    if message.startswith("The engine failed") or not message:
        return ApiError(500, message or "The engine failed.", code="engine_error")
    named = _PARAM.match(message)  # the engine's refusal of a field, named first
    if named:
        return ApiError(400, message, param=named[1])
    if "the context holds" in message:
        return ApiError(400, _for_a_client(message), param="messages",
                        code="context_length_exceeded")
    return ApiError(400, message)  # the chat template refused this conversation


_OVERFLOW = re.compile(r".* ([\d,]+) tokens (?:but|and) the context holds ([\d,]+)"
                       r"(?: \(with ([\d,]+) kept for the reply\))?")


def _for_a_client(message: str) -> str:
    """The engine's context refusal, written for the window ("Start a new chat…"), as a
    client needs it: the fields and the numbers."""
    found = _OVERFLOW.match(message)
    if found is None:
        return message
    prompt, n_ctx, kept = (int((g or "0").replace(",", "")) for g in found.groups())
    return (f"The prompt ('messages', with the system prompt and tools) is {prompt:,} tokens; "
            f"the model's context is {n_ctx:,} tokens" +
            (f", of which {kept:,} are kept for the reply ('max_tokens')" if kept else "") +
            ". Send fewer or shorter messages, or load the model with a longer context.")


class ReplyResponse:
    """The ASGI response for one started Reply."""

    def __init__(self, link: EngineLink, reply: Reply, call: ApiCall, fmt: Format,
                 board: StatusBoard, group: str = "") -> None:
        self.link, self.reply, self.call, self.fmt, self.board = link, reply, call, fmt, board
        self.group = group  # the engine the reply runs on (router.resolve)
        self.stats: Stats | None = None
        self.client_left = False
        self.responded = False  # the whole response is sent
        self.error: ApiError | None = None
        self.headers: dict[str, str] = {}  # added to the answer's (a dialect's notices)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(self._watch, receive, tasks.cancel_scope)
                try:
                    if self.call.stream:
                        await self._stream(scope, receive, send)
                    else:
                        await self._complete(scope, receive, send)
                finally:
                    self.link.cancel(self.reply)  # nothing when it ended
                    tasks.cancel_scope.cancel()
        finally:
            note_usage(scope, self.fmt.model, self.stats, self._outcome())
            self._record(scope.get("path", ""))

    async def _watch(self, receive: Receive, scope: anyio.CancelScope) -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        self.client_left = not self.responded  # after the response it only means "done"
        scope.cancel()

    def _readers(self) -> list[ChoiceReader]:
        """Made at the reply's first event: by then a model the request named is loaded."""
        info = self.link.model_info(self.group)
        return [ChoiceReader(info, bool(self.call.tools), self.call.parallel_tool_calls,
                             self.fmt.split, self.call.logprobs >= 0)
                for _ in self.reply.request_ids]

    async def _complete(self, scope: Scope, receive: Receive, send: Send) -> None:
        readers: list[ChoiceReader] = []
        stats: list[Stats | None] = [None] * len(self.reply.request_ids)
        failed: Finish | None = None
        async for choice, event in self.reply.events():
            readers = readers or self._readers()
            if isinstance(event, p.Delta):
                readers[choice].feed(event.text)
            elif isinstance(event, p.Logprobs):
                held = readers[choice].choice.logprobs
                if held is not None:
                    held += event.tokens
            elif isinstance(event, p.ReplyStats):
                stats[choice] = event.stats
            elif isinstance(event, p.Finished):
                readers[choice].flush(event.finish.reason)
                self._finished(readers[choice].choice, event.finish)
                if event.finish.reason not in FINISH_REASONS and failed is None:
                    failed = event.finish
        self.stats = stats[0]
        if failed is None:
            body = self.fmt.complete([r.choice for r in readers],
                                     [s for s in stats if s is not None])
            response = JSONResponse(body, headers=self.headers)
        else:
            response = self.fmt.error_response(self._fail(failed))
        await response(scope, receive, send)
        self.responded = True

    async def _stream(self, scope: Scope, receive: Receive, send: Send) -> None:
        readers: list[ChoiceReader] = []
        started = False
        stats: list[Stats | None] = [None] * len(self.reply.request_ids)
        failed: Finish | None = None

        async def body(chunks: list[bytes], more: bool = True) -> None:
            nonlocal started
            if not chunks and more:
                return  # held back (a marker that may be starting): nothing to send yet
            if not started:
                started = True
                await send({"type": "http.response.start", "status": 200,
                            "headers": [(b"content-type", self.fmt.media_type.encode()),
                                        *SSE_HEADERS,
                                        *((k.lower().encode(), v.encode("latin-1", "replace"))
                                          for k, v in self.headers.items())]})
                chunks = [*self.fmt.begin(), *chunks]
            await send({"type": "http.response.body", "body": b"".join(chunks),
                        "more_body": more})
            self.responded = not more

        async for choice, event in self.reply.events():
            readers = readers or self._readers()
            if failed is not None:
                continue
            reader = readers[choice]
            if isinstance(event, p.Delta) and event.text:
                for part in reader.feed(event.text):
                    await body(self.fmt.event(choice, part))
            elif isinstance(event, p.Logprobs) and reader.choice.logprobs is not None:
                self.fmt.logprobs(choice, event.tokens)  # sent with the choice's next chunk
            elif isinstance(event, p.ReplyStats):
                stats[choice] = event.stats
            elif isinstance(event, p.Finished):
                if event.finish.reason in FINISH_REASONS:
                    for part in reader.flush(event.finish.reason):
                        await body(self.fmt.event(choice, part))
                    self._finished(reader.choice, event.finish)
                    await body(self.fmt.end(choice, reader.choice))
                else:
                    failed = event.finish
                    self.link.cancel(self.reply)  # the other choices go too
        self.stats = stats[0]
        if failed is None:
            await body(self.fmt.close([s for s in stats if s is not None],
                                      self.call.include_usage), more=False)
            return
        error = self._fail(failed)
        if not started:
            await self.fmt.error_response(error)(scope, receive, send)
            self.responded = True
        else:  # the status is sent: an error event, which the dialect's clients raise
            await body([self.fmt.error_event(error)])
            await body([], more=False)

    def _finished(self, choice: Choice, finish: Finish) -> None:
        choice.finish = finish.reason
        if finish.stop in self.call.sampling.stop:  # the client's, not one the template adds
            choice.stop = finish.stop

    def _fail(self, finish: Finish) -> ApiError:
        """Counted before the client hears of it, so the status never lags the reply."""
        self.error = finish_error(finish)
        self.board.failed(self.error.message)
        return self.error

    def _outcome(self) -> str:
        """Why the reply ended, when its HTTP status does not say it ("": it does)."""
        if self.client_left:
            return "the client left; stopped"
        return f"{self.error.status} {self.error.message}" if self.error is not None else ""

    def _record(self, path: str) -> None:
        outcome = self._outcome() or "200"
        s = self.stats
        figures = (f", {s.prompt_tokens} prompt ({s.cached_tokens} cached) + "
                   f"{s.generated_tokens} tokens, TTFT {s.ttft_s * 1000:.0f} ms, "
                   f"{s.decode_tok_s:.1f} tok/s" if s else "")
        log.info("%s %s%s: %s", printable(self.reply.owner), printable(path), figures,
                 printable(outcome))  # the client's `user`, path and quoted names escaped

