"""Ollama's own API, off by default (a second open door: `inglenook serve --ollama`, on
Ollama's port 11434 unless --port says otherwise): /api/version, /api/tags, /api/show, /api/ps,
/api/chat and /api/generate (NDJSON streaming, Ollama's default), /api/embed and /api/embeddings
(embeddings.py: the same path as OpenAI's /v1/embeddings), /api/pull (ollama_pull.py: from the
Hugging Face Hub, where the user allows it). Same security middleware;
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

from inglenook.core.messages import JSON_OBJECT, ImageRef, Message, RawPrompt, ToolCallTurn
from inglenook.core.replies import Stats
from inglenook.core.sampling import SPECS, SamplingParams
from inglenook.server import embeddings, ollama_models, ollama_pull
from inglenook.server.errors import ApiError
from inglenook.server.fields import boolean, listed, number, obj, only_known, text
from inglenook.server.images import base64_image
from inglenook.server.ollama_models import load_or_unload, untagged
from inglenook.server.ollama_pull import Puller
from inglenook.server.reply_reader import Choice, ReaderEvent
from inglenook.server.replying import Serving
from inglenook.server.responses import Format
from inglenook.server.schemas import ApiCall, keep_alive, sampling, schema_text
from inglenook.server.tool_specs import name_of_call, openai_tools
from inglenook.tools.parsing import CallParsed, TextDelta

VERSION = "0.12.0"  # the Ollama API this follows; clients check it is recent enough
# Options that change what the model writes, as Ollama names them (mirostat: our mirostat_mode).
_SAMPLING = ("temperature", "top_p", "top_k", "min_p", "typical_p", "repeat_penalty",
             "repeat_last_n", "presence_penalty", "frequency_penalty", "mirostat_tau",
             "mirostat_eta")
_INTEGERS = {"top_k", "repeat_last_n"}
_OPTIONS = {*_SAMPLING, "seed", "num_predict", "stop", "mirostat", "tfs_z"}
# Options that say how a model is run, not what it writes (threads, memory, GPU layers, batch):
# the server's load settings decide those, so they are accepted and change nothing. Ollama's
# clients send them with every request (Continue: num_thread; Zed and Continue: num_ctx, read in
# context_window()).
LOAD_OPTIONS = {"num_ctx", "num_batch", "num_gpu", "main_gpu", "num_thread", "use_mmap",
                "use_mlock", "low_vram", "f16_kv", "numa", "vocab_only", "logits_all",
                "num_keep", "penalize_newline", "embedding_only"}
_COMMON = {"model", "stream", "options", "keep_alive", "think", "format"}
CHAT_FIELDS = _COMMON | {"messages", "tools"}
GENERATE_FIELDS = _COMMON | {"prompt", "system", "images", "raw", "suffix", "template",
                             "context"}


def _sampling(options: dict[str, Any]) -> SamplingParams:
    """Ollama's sampling options over the API's defaults."""
    values: dict[str, Any] = {}
    for name in _SAMPLING:
        spec = SPECS[name]
        value = number(options, name, spec.minimum, spec.maximum, integer=name in _INTEGERS,
                       shown=f"options.{name}")
        if value is not None:
            values[name] = value
    mirostat = number(options, "mirostat", 0, 2, integer=True, shown="options.mirostat")
    if mirostat is not None:
        values["mirostat_mode"] = int(mirostat)
    if options.get("tfs_z") not in (None, 1, 1.0):  # llama.cpp dropped tail-free sampling
        raise ApiError(400, "'options.tfs_z' is not supported (llama.cpp no longer has "
                       "tail-free sampling): leave it out or set it to 1.",
                       param="options.tfs_z")
    predict = options.get("num_predict")
    if isinstance(predict, int) and not isinstance(predict, bool) and predict < 0:
        predict = None  # Ollama's -1 (no limit) and -2 (fill the context): the default cap
    base = sampling({"seed": options.get("seed"), "stop": options.get("stop"),
                     "max_tokens": predict}, "max_tokens", -1, names=())
    return base.replace(**values)


def context_asked(body: dict[str, Any]) -> int:
    """`options.num_ctx`: the context a client wants (0: none named)."""
    options = body.get("options") or {}
    value = number(options, "num_ctx", 1, 2**31 - 1, integer=True, shown="options.num_ctx") \
        if isinstance(options, dict) else None
    return int(value or 0)


def _base(body: dict[str, Any]) -> dict[str, Any]:
    fmt = body.get("format")
    if fmt not in (None, "", "json") and not isinstance(fmt, dict):
        raise ApiError(400, "'format' must be \"json\" or a JSON schema.", param="format")
    reply_format = (JSON_OBJECT if fmt == "json" else
                    schema_text(fmt, "format") if isinstance(fmt, dict) else "")
    options = obj(body.get("options") or {}, "options")
    only_known(options, _OPTIONS | LOAD_OPTIONS, "options")
    context_asked(body)  # checked here, used by the route
    think = body.get("think")
    if think is not None and not isinstance(think, bool):
        raise ApiError(400, "'think' must be true or false.", param="think")
    return {"sampling": _sampling(options),
            "stream": boolean(body, "stream", default=True),
            "model": untagged(text(body, "model", 256)),
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
        raise ApiError(400, "'messages' must not be empty (an empty list loads the model: "
                       "that is answered before this).", param="messages")
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
    """/api/generate: a prompt in the model's chat template, or with `raw` (Continue's
    autocomplete) or a `suffix` (fill-in-the-middle), continued as it is."""
    body = obj(data)
    only_known(body, GENERATE_FIELDS)
    prompt = text(body, "prompt", 10**7)
    system = text(body, "system", 10**6)
    suffix = text(body, "suffix", 10**7)
    if text(body, "template", 10**6):
        raise ApiError(400, "'template' is not supported: the model's own chat template is "
                       "used (or send raw: true with the prompt as it should be read).",
                       param="template")
    if body.get("context"):
        raise ApiError(400, "'context' (the deprecated token list) is not supported: send the "
                       "conversation to /api/chat instead.", param="context")
    base = _base(body)
    if boolean(body, "raw") or suffix:
        if system or body.get("images"):
            raise ApiError(400, "'system' and 'images' need the chat template: leave them out "
                           "of a raw or fill-in-the-middle request.", param="raw")
        return ApiCall((Message("user", prompt + suffix),), raw=RawPrompt(prompt, suffix),
                       **base)
    head = (Message("system", system),) if system else ()
    return ApiCall((*head, Message("user", prompt, images=_images(body, "", "user"))),
                   **base)


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


def _no_prompt(data: Any, key: str) -> bool:
    """A request that only names a model: Ollama's load (or, with keep_alive 0, unload)."""
    if not isinstance(data, dict) or not data.get("model"):
        return False
    if key == "messages":
        return data.get("messages") == []
    return not data.get("prompt") and not data.get("images") and not data.get("suffix")


def routes(serving: Serving, puller: Puller) -> list[Route]:
    link = serving.link
    names = puller.names

    def named(data: Any) -> Any:
        """A request naming a model by the name it was pulled by names its file."""
        model = data.get("model") if isinstance(data, dict) else None
        found = names.file_of(model) if isinstance(model, str) and model else None
        return {**data, "model": found} if found else data

    async def answer(request: Request, key: str, parse: Callable[[Any], ApiCall],
                     fmt: Callable[[str], Format]) -> Any:
        data = named(await serving.body(request))
        if _no_prompt(data, key):
            base = _base(obj(data))
            model = base["model"]

            def done(reason: str) -> dict[str, Any]:
                head = {"model": model, "created_at": _now(), "done": True,
                        "done_reason": reason}
                return {**head, "message": {"role": "assistant", "content": ""}} \
                    if key == "messages" else {**head, "response": ""}

            return await load_or_unload(link, model, base["keep_alive"], done)
        response = await serving.reply(request, parse, fmt, data)
        asked = context_asked(obj(data))
        info = link.model_info(response.group)
        if asked and info is not None and asked > info.n_ctx:
            # Ollama would load the model again with the larger context; here the model stays
            # as loaded (the window may share it), and a prompt longer than its context is
            # refused rather than cut: said in a header, as no Ollama field carries it.
            response.headers["X-Inglenook-Warning"] = (
                f"num_ctx {asked} is larger than the {info.n_ctx} tokens this model is "
                "loaded with: replies use the loaded context.")
        return response

    async def chat(request: Request) -> Any:
        return await answer(request, "messages", parse_chat, ChatFormat)

    async def generate(request: Request) -> Any:
        return await answer(request, "prompt", parse_generate, GenerateFormat)

    embed, embed_legacy = embeddings.ollama_routes(serving, named)
    pull = ollama_pull.route(serving.config, puller, serving.body)

    wrapped = [Route(r.path, _ollama(r.endpoint), methods=list(r.methods or []))
               for r in ollama_models.routes(link, serving.body, names)]
    return [Route("/api/version", _ollama(version), methods=["GET"]),
            *wrapped,
            Route("/api/pull", _ollama(pull), methods=["POST"]),
            Route("/api/chat", _ollama(chat), methods=["POST"]),
            Route("/api/generate", _ollama(generate), methods=["POST"]),
            Route("/api/embed", _ollama(embed), methods=["POST"]),
            Route("/api/embeddings", _ollama(embed_legacy), methods=["POST"])]


async def version(_request: Request) -> JSONResponse:
    return JSONResponse({"version": VERSION})
