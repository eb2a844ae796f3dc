"""What every dialect's reply route does with a request: read the body (bounded), find whose
it is and which model it names, and start the reply on the engine."""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import functools
import hashlib
import hmac
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from starlette.requests import Request

from inglenook.core.messages import Message
from inglenook.server.config import ServerConfig
from inglenook.server.engine_link import Ask, EngineLink
from inglenook.server.errors import ApiError
from inglenook.server.fields import parse_json
from inglenook.server.image_decoding import ImageDecoding
from inglenook.server.image_fetch import FetchDeferred, FetchPolicy, ImageFetcher
from inglenook.server.images import RequestImages, collecting, fetching
from inglenook.server.request_log import note_fetched
from inglenook.server.responses import Format
from inglenook.server.schemas import ApiCall
from inglenook.server.security import presented_token
from inglenook.server.status import StatusBoard
from inglenook.server.streaming import ReplyResponse

API_ANONYMOUS = "api"  # the principal of every client of a server without tokens
API_TOKEN = "api-token:"  # + a hash of the token: one principal per token
API_CLIENT = "api-client:"  # + a hash of the client's address and user: --isolate-clients
BODY_TIMEOUT_S = 30.0  # for a whole request body: 4 MB arrives in far less on any link
FETCH_THREADS = 4  # requests whose images are being fetched at once; more wait their turn


@functools.cache
def _fetching_pool() -> ThreadPoolExecutor:
    """The threads that parse a request that fetches images (made at the first such request,
    shared by every server of the process, like asyncio's default pool)."""
    return ThreadPoolExecutor(FETCH_THREADS, thread_name_prefix="image-fetch")


@dataclass(frozen=True)
class Serving:
    """What a route needs of the server."""

    link: EngineLink
    config: ServerConfig
    board: StatusBoard
    decoding: ImageDecoding = field(default_factory=ImageDecoding)

    async def body(self, request: Request) -> Any:
        return parse_json(await read_body(request, self.config.max_body_bytes))

    async def reply(self, request: Request, parse: Callable[[Any], ApiCall],
                    fmt: Callable[[str], Format], body: Any = None) -> ReplyResponse:
        """Parse the body (read now unless given) into a call and start its reply; errors
        counted, then raised."""
        try:
            if body is None:
                body = await self.body(request)
            call = await self.parse(request, parse, body)
            return self.start(request, call, fmt)
        except ApiError as exc:
            self.board.refused(exc.message)
            raise

    async def parse(self, request: Request, parse: Callable[[Any], ApiCall],
                    body: Any) -> ApiCall:
        """The body as a call, in a thread: an image part is read (and, with fetching on,
        fetched) while the parse checks it, then, once a model that cannot see images has
        refused the request, decoded and written by self.decoding (never on the parse's pool).
        What was fetched goes to the log.

        The parse runs on the default pool, which every request's parse and the embeddings
        share, so it must not wait on the network there: a fetcher starts `deferred`, and a
        body that names an image by URL is parsed again on FETCH_THREADS threads of its own.
        Slow image servers then hold only those (each request for at most its fetch
        deadline), never another request's parse."""
        fetcher = ImageFetcher(self.config.fetch_policy or FetchPolicy(), deferred=True) \
            if self.config.fetch_images else None
        images = RequestImages()
        token, collected = fetching.set(fetcher), collecting.set(images)  # both pools run
        try:  # parse in this context
            try:
                call = await asyncio.to_thread(parse, body)
            except FetchDeferred:
                assert fetcher is not None
                fetcher.deferred = False
                images.clear()
                context = contextvars.copy_context()
                call = await asyncio.get_running_loop().run_in_executor(
                    _fetching_pool(), context.run, parse, body)
        finally:
            collecting.reset(collected)
            fetching.reset(token)
            if fetcher is not None and fetcher.notes:
                note_fetched(request.scope, fetcher.notes)
        if images.pending:
            self._check_vision(call, self.link.resolve(call.model))  # before a byte is written
            await self.decoding.finish(client_of(request, self.config), images)
        return call

    def start(self, request: Request, call: ApiCall,
              fmt: Callable[[str], Format]) -> ReplyResponse:
        link = self.link
        if call.sampling.max_tokens < 0:  # the client named no limit: the server's
            call = dataclasses.replace(call, sampling=call.sampling.replace(
                max_tokens=self.config.default_max_tokens))
        principal = principal_of(request, self.config, call.user)
        owner = owner_of(request, call.user, principal)
        group = link.resolve(call.model)
        self._check_effort(call, group)
        self._check_tools(call, group)
        self._check_vision(call, group)
        model = Path(group).stem if group else link.model_name or ""
        messages, prefill = continued(call)
        reply = link.start(Ask(messages, call.sampling, owner, principal,
                               conversation=f"user:{call.user}" if call.user else "",
                               group=group, n=call.n, keep_alive=call.keep_alive,
                               tools=call.tools, enable_thinking=call.enable_thinking,
                               reasoning_effort=call.reasoning_effort,
                               reply_format=call.reply_format, logit_bias=call.logit_bias,
                               logprobs=call.logprobs, forced_call=call.forced_call,
                               raw=call.raw, prefill=prefill))
        shape = fmt(model)
        shape.echo = call.raw.prefix if call.echo and call.raw is not None else ""
        return ReplyResponse(link, reply, call, shape, self.board, group)

    def _check_vision(self, call: ApiCall, group: str) -> None:
        """Images for a model loaded without a projector are a 400 before the reply starts (a
        model loaded for this request: the engine refuses them as it reads the prompt)."""
        info = self.link.model_info(group)
        if info is not None and not info.vision and any(m.images for m in call.messages):
            raise ApiError(400, "This model cannot see images: it was loaded without a vision "
                           "projector (mmproj).", param="messages", code="model_cannot_see")

    def _check_tools(self, call: ApiCall, group: str) -> None:
        """Tools for a model whose chat template has no tool calls this server can read are
        a 400, never a prompt sent without them as if they had been offered (a model loaded
        for this request: trusted)."""
        info = self.link.model_info(group)
        if info is not None and call.tools and not info.tool_format:
            raise ApiError(400, f"This model ({info.name}) cannot call tools: its chat template "
                           "has no tool-call format this server reads. Leave 'tools' out, or "
                           "load a model made for tool use.", param="tools",
                           code="model_cannot_call_tools")

    def _check_effort(self, call: ApiCall, group: str) -> None:
        """A reasoning switch the model's template does not read is refused, not ignored
        (known only once the model is loaded: a model loaded for this request is trusted)."""
        info = self.link.model_info(group)
        if info is None:
            return
        if call.reasoning_effort and not info.traits.effort:
            raise ApiError(400, "This model's chat template has no reasoning effort; leave "
                           "'reasoning_effort' out.", param="reasoning_effort")
        wanted, traits = call.enable_thinking, info.traits
        if wanted is None or traits.thinking_switch or (wanted == (traits.reasoning is not None)):
            return  # switchable, or already as asked
        raise ApiError(400, "This model " + ("does not think before it answers" if wanted else
                                             "always thinks: its chat template has no switch")
                       + f"; leave '{call.thinking_field}' out.", param=call.thinking_field)


def continued(call: ApiCall) -> tuple[tuple[Message, ...], str]:
    """A conversation that ends with the assistant's words (Anthropic's prefill, which Claude
    clients steer a reply with; a trailing assistant message on the chat route): the model
    goes on from them rather than starting a new turn, and the reply holds only what follows.
    Not a turn of calls, nor where a call is forced (its grammar starts the turn)."""
    messages = call.messages
    last = messages[-1] if messages else None
    if (last is None or last.role != "assistant" or last.tool_calls or call.raw is not None
            or not last.content or call.forced_call is not None or len(messages) < 2):
        return messages, ""
    return messages[:-1], last.content


async def read_body(request: Request, limit: int) -> bytes:
    """The body, refused with 413 as soon as it is known to be longer than `limit`."""
    too_big = ApiError(413, f"The request body is larger than {limit:,} bytes.",
                       code="body_too_large")
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise too_big
    chunks: list[bytes] = []

    async def collect() -> None:
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise too_big
            chunks.append(chunk)

    try:
        await asyncio.wait_for(collect(), BODY_TIMEOUT_S)
    except asyncio.TimeoutError:  # a client that trickles its body holds a connection
        raise ApiError(408, f"The request body did not arrive within {BODY_TIMEOUT_S:g} s.",
                       code="body_timeout") from None
    return b"".join(chunks)


def owner_of(request: Request, user: str, principal: str = API_ANONYMOUS) -> str:
    """Whose turn a reply is on the scheduler: the `user` the client names (within its
    principal), or else its connection, so that two clients take turns like two chats do."""
    within = "" if principal == API_ANONYMOUS else f"{principal.split(':', 1)[1]}/"
    if user:
        return f"api:{within}{user}"
    client = request.client
    return f"api:{client.host}:{client.port}" if client else "api:"


def client_of(request: Request, config: ServerConfig) -> str:
    """Who a request is, for its share of the server's work (image decoding): its token's
    principal, or its address on a server without tokens (never its connection: a client
    may open many)."""
    if config.tokens:
        return principal_of(request, config)
    return f"address:{request.client.host}" if request.client else "address:"


def principal_of(request: Request, config: ServerConfig, user: str = "") -> str:
    """Whose KV cache a request may reuse: the token it was let in with (the server may give
    each tool its own), or, on a server without tokens, every client's together, unless it
    keeps clients apart (`isolate_clients`): then each its own (`user`: the one the body
    names). Never the window's chats (core.messages.WINDOW)."""
    tokens = config.tokens
    if not tokens:
        return isolated(request, user) if config.isolate_clients else API_ANONYMOUS
    presented = (presented_token(request.headers) or "").encode("utf-8", errors="replace")
    for token in tokens:
        if hmac.compare_digest(presented, token.encode()):
            return API_TOKEN + hashlib.sha256(token.encode()).hexdigest()[:16]
    return API_ANONYMOUS  # not reached: the security middleware let only tokens in


def isolated(request: Request, user: str) -> str:
    """A principal of the client's own on a server that keeps clients apart: its address and
    the `user` it names, or else its connection. Clients on one machine share its address: one
    that names no user keeps its states while it keeps its connection (the SDKs keep theirs),
    and another reuses them only by naming the same user, a name it would have to guess."""
    client = request.client
    address = client.host if client else ""
    who = f"user:{user}" if user else f"port:{client.port if client else 0}"
    return API_CLIENT + hashlib.sha256(f"{address}\0{who}".encode()).hexdigest()[:16]
