"""The endpoints: GET /v1/models, POST /v1/chat/completions, POST /v1/completions."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from inglenook.server.config import ServerConfig
from inglenook.server.engine_link import Ask, EngineLink
from inglenook.server.errors import (
    ApiError,
    api_error_handler,
    http_error_handler,
    unexpected_error_handler,
)
from inglenook.server.request_log import RequestLogMiddleware
from inglenook.server.responses import ChatFormat, CompletionFormat, Format, models_list
from inglenook.server.schemas import ApiCall, parse_chat, parse_completion, parse_json
from inglenook.server.security import SecurityMiddleware
from inglenook.server.status import StatusBoard
from inglenook.server.streaming import ReplyResponse

API_ANONYMOUS = "api"  # the principal of every client of a server without tokens
API_TOKEN = "api-token:"  # + a hash of the token: one principal per token
BODY_TIMEOUT_S = 30.0  # for a whole request body: 4 MB arrives in far less on any link


def build_app(link: EngineLink, config: ServerConfig, board: StatusBoard,
              on_startup: Callable[[], None] = lambda: None) -> Starlette:
    created = int(time.time())

    async def list_models(_request: Request) -> JSONResponse:
        return JSONResponse(models_list(link.model_names(), created))

    async def get_model(request: Request) -> JSONResponse:
        listed = models_list(link.model_names(), created)["data"]
        found = [m for m in listed if m["id"] == request.path_params["model"]]
        if not found:
            raise ApiError(404, "No such model is loaded.", param="model",
                           code="model_not_found")
        return JSONResponse(found[0])

    async def chat(request: Request) -> Any:
        return await _reply(request, parse_chat, ChatFormat)

    async def completions(request: Request) -> Any:
        return await _reply(request, parse_completion, CompletionFormat)

    async def _reply(request: Request, parse: Callable[[Any], ApiCall],
                     fmt: type[Format]) -> ReplyResponse:
        try:
            call = parse(parse_json(await read_body(request, config.max_body_bytes)))
            principal = principal_of(request, config)
            owner = owner_of(request, call.user, principal)
            group = link.resolve(call.model)
            model = Path(group).stem if group else link.model_name or ""
            reply = link.start(Ask(call.messages, call.sampling, owner, principal,
                                   conversation=f"user:{call.user}" if call.user else "",
                                   group=group, n=call.n, keep_alive=call.keep_alive))
        except ApiError as exc:
            board.refused(exc.message)
            raise
        return ReplyResponse(link, reply, call, fmt(model), board)

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        on_startup()
        yield

    return Starlette(
        routes=[Route("/v1/models", list_models, methods=["GET"]),
                Route("/v1/models/{model:path}", get_model, methods=["GET"]),
                Route("/v1/chat/completions", chat, methods=["POST"]),
                Route("/v1/completions", completions, methods=["POST"])],
        middleware=[Middleware(RequestLogMiddleware, board=board),
                    Middleware(SecurityMiddleware, config=config)],
        exception_handlers={ApiError: api_error_handler, HTTPException: http_error_handler,
                            Exception: unexpected_error_handler},
        lifespan=lifespan)


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
    within = "" if principal == API_ANONYMOUS else f"{principal[len(API_TOKEN):]}/"
    if user:
        return f"api:{within}{user}"
    client = request.client
    return f"api:{client.host}:{client.port}" if client else "api:"


def principal_of(request: Request, config: ServerConfig) -> str:
    """Whose KV cache a request may reuse: the token it was let in with (the server may give
    each tool its own), or, on a server without tokens, every client's together. Never the
    window's chats (core.messages.WINDOW)."""
    tokens = config.tokens
    if not tokens:
        return API_ANONYMOUS
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    presented = given.strip().encode("utf-8", errors="replace")
    for token in tokens:
        if scheme.lower() == "bearer" and hmac.compare_digest(presented, token.encode()):
            return API_TOKEN + hashlib.sha256(token.encode()).hexdigest()[:16]
    return API_ANONYMOUS  # not reached: the security middleware let only tokens in
