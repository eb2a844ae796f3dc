"""The endpoints of every dialect, under one security middleware (server/security.py):
OpenAI's (GET /v1/models, POST /v1/chat/completions, POST /v1/completions) here, POST
/v1/embeddings in embeddings.py, /v1/audio/* in audio.py, Anthropic's
(POST /v1/messages, /v1/messages/count_tokens) in anthropic.py, Ollama's (/api/*, only when
turned on) in ollama.py."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from inglenook.models.download_queue import DownloadManager
from inglenook.server import anthropic, audio, embeddings, ollama, openai_responses
from inglenook.server.config import ServerConfig
from inglenook.server.engine_link import EngineLink
from inglenook.server.errors import (
    ApiError,
    api_error_handler,
    http_error_handler,
    unexpected_error_handler,
)
from inglenook.server.ollama_pull import Puller
from inglenook.server.replying import (  # re-exported: tests and the CLI use them from here
    API_ANONYMOUS,
    API_TOKEN,
    BODY_TIMEOUT_S,
    Serving,
    owner_of,
    principal_of,
    read_body,
)
from inglenook.server.request_log import RequestLogMiddleware
from inglenook.server.responses import ChatFormat, CompletionFormat, models_list
from inglenook.server.schemas import parse_chat, parse_completion
from inglenook.server.security import SecurityMiddleware
from inglenook.server.status import StatusBoard

__all__ = ["API_ANONYMOUS", "API_TOKEN", "BODY_TIMEOUT_S", "build_app", "owner_of",
           "principal_of", "read_body"]


def build_app(link: EngineLink, config: ServerConfig, board: StatusBoard,
              on_startup: Callable[[], None] = lambda: None,
              downloads: DownloadManager | None = None) -> Starlette:
    """`downloads`: the queue Ollama's pulls go through (the window's; else the server's own,
    made at the first pull)."""
    created = int(time.time())
    serving = Serving(link, config, board)
    kept = openai_responses.ResponseStore()  # the profile's stored Responses
    puller = Puller(downloads)

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
        return await serving.reply(request, parse_chat, ChatFormat)

    async def completions(request: Request) -> Any:
        return await serving.reply(request, parse_completion, CompletionFormat)

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        on_startup()
        try:
            yield
        finally:
            kept.close()
            puller.close()

    return Starlette(
        routes=[Route("/v1/models", list_models, methods=["GET"]),
                Route("/v1/models/{model:path}", get_model, methods=["GET"]),
                Route("/v1/chat/completions", chat, methods=["POST"]),
                Route("/v1/completions", completions, methods=["POST"]),
                Route("/v1/embeddings", embeddings.openai_route(serving), methods=["POST"]),
                *openai_responses.routes(serving, kept),
                *audio.routes(serving),
                *anthropic.routes(serving),
                *(ollama.routes(serving, puller) if config.ollama else [])],
        middleware=[Middleware(RequestLogMiddleware, board=board),
                    Middleware(SecurityMiddleware, config=config)],
        exception_handlers={ApiError: api_error_handler, HTTPException: http_error_handler,
                            Exception: unexpected_error_handler},
        lifespan=lifespan)
