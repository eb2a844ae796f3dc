"""Embeddings in two dialects, one path: OpenAI's POST /v1/embeddings and Ollama's /api/embed
(and its older /api/embeddings), each parsed into an EmbedCall and answered by the engine of
the model it names (engine/host/embedding.py), under the same security middleware and request
log as every route.

A chat model can be asked for vectors (the mean of its token states); the answer then carries
a warning, in the `X-Inglenook-Warning` header and a `warning` field, that it is not an
embedding model. `dimensions` is refused unless it is the model's own: nothing here shortens
vectors. OpenAI refuses a text longer than the model reads; Ollama cuts it unless `truncate`
is false, as Ollama does.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse

from inglenook.core.replies import Stats
from inglenook.engine import protocol as p
from inglenook.engine.client import EmbedRefused, EngineCrashed, EngineError
from inglenook.server.errors import ApiError
from inglenook.server.fields import boolean, obj, only_known, text
from inglenook.server.replying import Serving
from inglenook.server.request_log import note_usage
from inglenook.server.schemas import keep_alive

MAX_INPUTS = 2048  # OpenAI's own limit on one request's inputs
WARNING_HEADER = "X-Inglenook-Warning"
OPENAI_FIELDS = {"model", "input", "encoding_format", "dimensions", "user"}
OLLAMA_FIELDS = {"model", "input", "truncate", "options", "keep_alive", "dimensions"}
LEGACY_FIELDS = {"model", "prompt", "options", "keep_alive"}


@dataclass(frozen=True)
class EmbedCall:
    model: str
    inputs: tuple[str, ...] | tuple[tuple[int, ...], ...]
    truncate: bool
    dimensions: int | None = None
    base64: bool = False
    keep_alive: float | None = None


def _dimensions(body: dict[str, Any]) -> int | None:
    value = body.get("dimensions")
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ApiError(400, "'dimensions' must be a positive whole number.", param="dimensions")
    return value


def _inputs(raw: Any, name: str, tokens_allowed: bool) -> tuple[Any, ...]:
    """A text, a list of texts, or (OpenAI) a token list or a list of token lists."""
    shape = ("a text, a list of texts, a list of token ids or a list of such lists"
             if tokens_allowed else "a text or a list of texts")
    if isinstance(raw, str):
        return (raw,)
    if not isinstance(raw, list) or not raw:
        raise ApiError(400, f"'{name}' must be {shape} (not empty).", param=name)
    if len(raw) > MAX_INPUTS:
        raise ApiError(400, f"'{name}' holds {len(raw):,} inputs; at most {MAX_INPUTS:,} in "
                       "one request.", param=name)
    if all(isinstance(item, str) for item in raw):
        return tuple(raw)

    def is_ids(item: Any) -> bool:
        return isinstance(item, list) and all(
            isinstance(t, int) and not isinstance(t, bool) for t in item)

    if tokens_allowed and is_ids(raw):
        return (tuple(raw),)
    if tokens_allowed and all(is_ids(item) for item in raw):
        return tuple(tuple(item) for item in raw)
    raise ApiError(400, f"'{name}' must be {shape}; its items may not be mixed.", param=name)


def parse_openai(data: Any) -> EmbedCall:
    body = obj(data)
    only_known(body, OPENAI_FIELDS)
    encoding = body.get("encoding_format", "float")
    if encoding not in ("float", "base64"):
        raise ApiError(400, "'encoding_format' must be \"float\" or \"base64\".",
                       param="encoding_format")
    text(body, "user", 256)
    return EmbedCall(text(body, "model", 256), _inputs(body.get("input"), "input", True),
                     truncate=False, dimensions=_dimensions(body), base64=encoding == "base64")


def parse_ollama(data: Any) -> EmbedCall:
    body = obj(data)
    only_known(body, OLLAMA_FIELDS)
    obj(body.get("options") or {}, "options")  # sampling options mean nothing to a vector
    return EmbedCall(text(body, "model", 256), _inputs(body.get("input"), "input", False),
                     truncate=boolean(body, "truncate", default=True),
                     dimensions=_dimensions(body), keep_alive=keep_alive(body.get("keep_alive")))


def parse_legacy(data: Any) -> EmbedCall:
    body = obj(data)
    only_known(body, LEGACY_FIELDS)
    obj(body.get("options") or {}, "options")
    return EmbedCall(text(body, "model", 256), (text(body, "prompt", 10**7),), truncate=True,
                     keep_alive=keep_alive(body.get("keep_alive")))


async def embed(serving: Serving, request: Request, call: EmbedCall) -> tuple[p.Embedded, str]:
    """The engine's answer and the model's name; ApiError for what it refused."""
    link = serving.link
    group = link.resolve(call.model)
    if not group and link.client.model is None:
        raise ApiError(503, "No model is loaded.", code="model_not_loaded")
    name = Path(group).stem if group else link.model_name or ""
    try:
        answer = await asyncio.to_thread(link.client.embed, call.inputs, call.truncate, group,
                                         call.keep_alive)
    except EmbedRefused as exc:
        raise ApiError(400, str(exc), param="input") from None
    except EngineCrashed:
        raise ApiError(503, "The engine stopped while embedding; try again.",
                       code="engine_unavailable") from None
    except EngineError as exc:
        raise ApiError(400 if group or link.client.model else 503, str(exc),
                       code="embeddings_unavailable") from None
    if call.dimensions is not None and call.dimensions != answer.dimensions:
        raise ApiError(400, f"This model's vectors have {answer.dimensions} dimensions; it "
                       f"cannot give {call.dimensions} ('dimensions' may only be "
                       f"{answer.dimensions} here).", param="dimensions")
    tokens = sum(answer.tokens)
    note_usage(request.scope, name, Stats(tokens, 0, 0, 0.0, 0.0, 0.0, 0, 0))
    return answer, name


def _respond(content: dict[str, Any], answer: p.Embedded) -> JSONResponse:
    warning = "" if answer.embedding_model else answer.note
    if warning:
        content["warning"] = warning
    return JSONResponse(content, headers={WARNING_HEADER: warning} if warning else None)


def openai_route(serving: Serving) -> Callable[[Request], Any]:
    async def route(request: Request) -> JSONResponse:
        try:
            call = parse_openai(await serving.body(request))
            answer, name = await embed(serving, request, call)
        except ApiError as exc:
            serving.board.refused(exc.message)
            raise
        rows = answer.vectors()
        data = [{"object": "embedding", "index": i,
                 "embedding": base64.b64encode(row.astype("<f4").tobytes()).decode("ascii")
                 if call.base64 else row.tolist()} for i, row in enumerate(rows)]
        tokens = sum(answer.tokens)
        return _respond({"object": "list", "data": data, "model": name,
                         "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}, answer)

    return route


def ollama_routes(serving: Serving, named: Callable[[Any], Any] = lambda body: body
                  ) -> tuple[Callable[[Request], Any], Callable[[Request], Any]]:
    """/api/embed and /api/embeddings (errors in Ollama's shape: the caller wraps them);
    `named` turns a name a model was pulled by into its file's."""

    async def answered(request: Request, parse: Callable[[Any], EmbedCall]
                       ) -> tuple[p.Embedded, str]:
        try:
            return await embed(serving, request, parse(named(await serving.body(request))))
        except ApiError as exc:
            serving.board.refused(exc.message)
            raise

    async def current(request: Request) -> JSONResponse:
        answer, name = await answered(request, parse_ollama)
        return _respond({"model": name, "embeddings": answer.vectors().tolist(),
                         "total_duration": 0, "load_duration": 0,
                         "prompt_eval_count": sum(answer.tokens)}, answer)

    async def legacy(request: Request) -> JSONResponse:
        answer, _name = await answered(request, parse_legacy)
        return _respond({"embedding": answer.vectors()[0].tolist()}, answer)

    return current, legacy
