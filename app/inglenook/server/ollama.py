"""Ollama's own API, off by default (a second open door: `inglenook serve --ollama`, on
Ollama's port 11434 unless --port says otherwise): /api/version, /api/tags, /api/show, /api/ps,
/api/chat and /api/generate (NDJSON streaming, Ollama's default), /api/embed and /api/embeddings
(embeddings.py: the same path as OpenAI's /v1/embeddings). Same security middleware;
errors in Ollama's shape, {"error": "<sentence>"}, past it.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from inglenook.core.messages import JSON_OBJECT, ImageRef, Message, ToolCallTurn
from inglenook.core.replies import Stats
from inglenook.server import embeddings
from inglenook.server.errors import ApiError
from inglenook.server.fields import boolean, listed, obj, only_known, text
from inglenook.server.images import base64_image
from inglenook.server.reply_reader import Choice, ReaderEvent
from inglenook.server.replying import Serving
from inglenook.server.responses import Format
from inglenook.server.schemas import ApiCall, keep_alive, sampling, schema_text
from inglenook.server.tool_specs import name_of_call, openai_tools
from inglenook.tools.parsing import CallParsed, TextDelta

VERSION = "0.12.0"  # the Ollama API this follows; clients check it is recent enough
_OPTIONS = {"temperature", "top_p", "top_k", "min_p", "seed", "num_predict", "stop",
            "repeat_penalty", "presence_penalty", "frequency_penalty"}
_COMMON = {"model", "stream", "options", "keep_alive", "think", "format"}
CHAT_FIELDS = _COMMON | {"messages", "tools"}
GENERATE_FIELDS = _COMMON | {"prompt", "system", "images"}


def _base(body: dict[str, Any]) -> dict[str, Any]:
    fmt = body.get("format")
    if fmt not in (None, "", "json") and not isinstance(fmt, dict):
        raise ApiError(400, "'format' must be \"json\" or a JSON schema.", param="format")
    reply_format = (JSON_OBJECT if fmt == "json" else
                    schema_text(fmt, "format") if isinstance(fmt, dict) else "")
    options = obj(body.get("options") or {}, "options")
    only_known(options, _OPTIONS, "options")
    think = body.get("think")
    if think is not None and not isinstance(think, bool):
        raise ApiError(400, "'think' must be true or false.", param="think")
    return {"sampling": sampling({**options, "max_tokens": options.get("num_predict")},
                                 "max_tokens", -1),
            "stream": boolean(body, "stream", default=True), "model": text(body, "model", 256),
            "keep_alive": keep_alive(body.get("keep_alive")), "enable_thinking": think,
            "thinking_field": "think", "reply_format": reply_format}


def parse_chat(data: Any) -> ApiCall:
    body = obj(data)
    only_known(body, CHAT_FIELDS)
    turns: list[Message] = []
    calls: list[ToolCallTurn] = []
    for i, item in enumerate(listed(body.get("messages"), "messages")):
        where = f"messages[{i}]"
        message = obj(item, where)
        only_known(message, {"role", "content", "thinking", "tool_calls", "tool_name", "images"},
                   where)
        role = message.get("role")
        if role not in ("system", "user", "assistant", "tool"):
            raise ApiError(400, f"'{where}.role' must be system, user, assistant or tool.",
                           param=f"{where}.role")
        content = text(message, "content", 10**7, f"{where}.content")
        made = tuple(ToolCallTurn(f"call{len(calls) + k}", str(c["function"]["name"]),
                                  json.dumps(c["function"].get("arguments") or {}))
                     for k, c in enumerate(_calls(message.get("tool_calls"), where)))
        calls += made
        if role == "tool":
            name = text(message, "tool_name", 64, f"{where}.tool_name")
            call_id = next((c.id for c in reversed(calls) if c.name == name), "")
            turns.append(Message("tool", content, tool_call_id=call_id,
                                 name=name or name_of_call(call_id, calls)))
        else:
            turns.append(Message(role, content, text(message, "thinking", 10**7),
                                 tool_calls=made, images=_images(message, where, role)))
    if not turns:
        raise ApiError(400, "'messages' must be a non-empty list.", param="messages")
    return ApiCall(tuple(turns), tools=openai_tools(body.get("tools")), **_base(body))


def _calls(raw: Any, where: str) -> list[dict[str, Any]]:
    out = []
    for j, item in enumerate(listed(raw or [], f"{where}.tool_calls")):
        function = obj(obj(item, f"{where}.tool_calls[{j}]").get("function"),
                       f"{where}.tool_calls[{j}].function")
        if not isinstance(function.get("name"), str):
            raise ApiError(400, f"'{where}.tool_calls[{j}].function.name' must be text.",
                           param=f"{where}.tool_calls[{j}].function.name")
        obj(function.get("arguments") or {}, f"{where}.tool_calls[{j}].function.arguments")
        out.append({"function": function})
    return out


def parse_generate(data: Any) -> ApiCall:
    body = obj(data)
    only_known(body, GENERATE_FIELDS)
    prompt = text(body, "prompt", 10**7)
    system = text(body, "system", 10**6)
    head = (Message("system", system),) if system else ()
    return ApiCall((*head, Message("user", prompt, images=_images(body, "", "user"))),
                   **_base(body))


def _images(holder: dict[str, Any], where: str, role: str) -> tuple[ImageRef, ...]:
    """Ollama's `images`: base64 strings, a user turn's only."""
    at = f"{where}.images" if where else "images"
    raw = listed(holder.get("images") or [], at, 16)
    if raw and role != "user":
        raise ApiError(400, f"'{at}': only a user turn can show the model images.", param=at)
    return tuple(base64_image(item, f"{at}[{k}]", at) for k, item in enumerate(raw))


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _final(stats: list[Stats], finish: str) -> dict[str, Any]:
    s = stats[0] if stats else None
    ns = 1_000_000_000
    return {"done": True, "done_reason": finish,
            "prompt_eval_count": s.prompt_tokens if s else 0,
            "eval_count": s.generated_tokens if s else 0,
            "eval_duration": int(s.generated_tokens / s.decode_tok_s * ns)
            if s and s.decode_tok_s else 0,
            "total_duration": 0, "load_duration": 0, "prompt_eval_duration": 0}


def _line(data: dict[str, Any]) -> bytes:
    return (json.dumps(data, ensure_ascii=False) + "\n").encode("utf-8", errors="replace")


class ChatFormat(Format):
    """/api/chat: NDJSON lines of `message` deltas, then one `done` line with the counts."""

    media_type = "application/x-ndjson"
    key = "message"

    def __init__(self, model: str) -> None:
        super().__init__(model)
        self._finish = "stop"

    def _piece(self, content: str = "", thinking: str = "",
               calls: tuple[Any, ...] = ()) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if thinking:
            message["thinking"] = thinking
        if calls:
            message["tool_calls"] = [{"function": {"name": c.name,
                                                   "arguments": dict(c.arguments)}}
                                     for c in calls]
        return {"message": message}

    def _head(self, name: str = "") -> dict[str, Any]:
        return {"model": self.model, "created_at": _now()}

    def complete(self, choices: list[Choice], stats: list[Stats]) -> dict[str, Any]:
        c = choices[0]
        return {**self._head(), **self._piece(c.text.strip() if c.calls else c.text,
                                              c.reasoning.strip(), tuple(c.calls)),
                **_final(stats, c.finish)}

    def event(self, index: int, event: ReaderEvent) -> list[bytes]:
        if isinstance(event, CallParsed):
            piece = self._piece(calls=event.calls)
        elif isinstance(event, TextDelta):
            piece = self._piece(event.text)
        else:
            piece = self._piece(thinking=event.text)
        return [_line({**self._head(), **piece, "done": False})]

    def end(self, index: int, choice: Choice) -> list[bytes]:
        self._finish = choice.finish
        return []

    def close(self, stats: list[Stats], include_usage: bool) -> list[bytes]:
        return [_line({**self._head(), **self._piece(), **_final(stats, self._finish)})]

    def error_event(self, error: ApiError) -> bytes:
        return _line({"error": error.message})

    def error_response(self, error: ApiError) -> JSONResponse:
        return ollama_error(error)


class GenerateFormat(ChatFormat):
    """/api/generate: the same, with `response` (and `thinking`) instead of a message."""

    def _piece(self, content: str = "", thinking: str = "",
               calls: tuple[Any, ...] = ()) -> dict[str, Any]:
        return {"response": content, **({"thinking": thinking} if thinking else {})}


def ollama_error(error: ApiError) -> JSONResponse:
    """Ollama's error shape, {"error": "<sentence>"}: what its clients show."""
    return JSONResponse({"error": error.message}, status_code=error.status)


def _ollama(handler: Callable[[Request], Awaitable[Any]]) -> Callable[[Request], Awaitable[Any]]:
    @functools.wraps(handler)
    async def answer(request: Request) -> Any:
        try:
            return await handler(request)
        except ApiError as exc:
            return ollama_error(exc)

    return answer


def _details(info: Any) -> dict[str, Any]:
    return {"format": "gguf", "family": info.architecture if info else "",
            "parameter_size": "", "quantization_level": info.quantization if info else ""}


def routes(serving: Serving) -> list[Route]:
    link = serving.link

    def listed_models() -> list[dict[str, Any]]:
        info = link.model_info("")
        return [{"name": name, "model": name, "modified_at": _now(), "size": 0,
                 "digest": "", "details": _details(info if info and info.name == name
                                                   else None)}
                for name in link.model_names()]

    async def version(_request: Request) -> JSONResponse:
        return JSONResponse({"version": VERSION})

    async def tags(_request: Request) -> JSONResponse:
        return JSONResponse({"models": listed_models()})

    async def ps(_request: Request) -> JSONResponse:
        loaded = {m.name for m in link.client.loaded_models()}
        return JSONResponse({"models": [{**m, "expires_at": _now(), "size_vram": 0}
                                        for m in listed_models() if m["name"] in loaded]})

    async def show(request: Request) -> JSONResponse:
        body = obj(await serving.body(request))
        name = text(body, "model", 256) or text(body, "name", 256)
        info = link.model_info(link.resolve(name))
        if info is None:
            raise ApiError(404, f"The model '{name[:100]}' is not loaded; /api/tags lists "
                           "those that can be.", param="model", code="model_not_found")
        capabilities = ["completion"] + (["tools"] if info.tool_format else []) + (
            ["thinking"] if info.traits.reasoning else []) + (["vision"] if info.vision else [])
        return JSONResponse({"modelfile": "", "parameters": "", "template": "",
                             "details": _details(info), "capabilities": capabilities,
                             "model_info": {"general.architecture": info.architecture,
                                            f"{info.architecture}.context_length": info.n_ctx}})

    async def chat(request: Request) -> Any:
        return await serving.reply(request, parse_chat, ChatFormat)

    async def generate(request: Request) -> Any:
        return await serving.reply(request, parse_generate, GenerateFormat)

    embed, embed_legacy = embeddings.ollama_routes(serving)

    return [Route("/api/version", _ollama(version), methods=["GET"]),
            Route("/api/tags", _ollama(tags), methods=["GET"]),
            Route("/api/ps", _ollama(ps), methods=["GET"]),
            Route("/api/show", _ollama(show), methods=["POST"]),
            Route("/api/chat", _ollama(chat), methods=["POST"]),
            Route("/api/generate", _ollama(generate), methods=["POST"]),
            Route("/api/embed", _ollama(embed), methods=["POST"]),
            Route("/api/embeddings", _ollama(embed_legacy), methods=["POST"])]
