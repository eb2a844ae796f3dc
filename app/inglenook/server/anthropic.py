"""Anthropic's Messages API (what Claude Code speaks): POST /v1/messages, streamed with
Anthropic's event types, and /v1/messages/count_tokens.

A request becomes the same ApiCall as OpenAI's: `system` a system turn, content blocks text,
`tool_use` blocks an assistant turn's calls, `tool_result` blocks `tool` turns, `thinking`
blocks the turn's reasoning; `thinking` switches the template's thinking where it has a
switch. The reply's reasoning (split by the engine's template traits) comes back as a
`thinking` block, its calls as `tool_use` blocks. Fields this server cannot honour are
refused by name.
"""

from __future__ import annotations

import json
import secrets
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from inglenook.core.messages import ForcedCall, GenerationRequest, Message, ToolCallTurn
from inglenook.core.replies import Stats
from inglenook.engine.client import EngineError
from inglenook.server.engine_link import next_request_id
from inglenook.server.errors import ApiError
from inglenook.server.fields import boolean, listed, number, obj, only_known, text
from inglenook.server.images import anthropic_image
from inglenook.server.reply_reader import Choice, ReaderEvent
from inglenook.server.replying import Serving
from inglenook.server.responses import Format, arguments_text, sse
from inglenook.server.schemas import ApiCall, sampling, schema_text
from inglenook.server.tool_specs import MAX_TOOLS, function_spec, name_of_call
from inglenook.tools.parsing import CallParsed, TextDelta

FIELDS = {"model", "messages", "max_tokens", "system", "stop_sequences", "stream",
          "temperature", "top_p", "top_k", "metadata", "tools", "tool_choice", "thinking",
          "service_tier", "output_config", "output_format"}
STOP_REASONS = {"stop": "end_turn", "length": "max_tokens"}
_BLOCK_FIELDS = {"type", "text", "cache_control", "citations", "id", "name", "input",
                 "tool_use_id", "content", "is_error", "thinking", "signature",
                 "caller", "source"}  # caller: who made a tool_use; source: of an image


def parse_messages(data: Any, counting: bool = False) -> ApiCall:
    body = obj(data)
    only_known(body, FIELDS - {"max_tokens", "stream", "stop_sequences", "temperature",
                               "top_p", "top_k", "metadata", "service_tier"}
               if counting else FIELDS)
    model = text(body, "model", 256)
    if not counting and number(body, "max_tokens", 1, 2**31 - 1, integer=True) is None:
        raise ApiError(400, "'max_tokens' is required.", param="max_tokens")
    messages = [*_system(body.get("system")), *_turns(body.get("messages"))]
    tools, forced, parallel = _tools(body.get("tools"), body.get("tool_choice"))
    thinking = _thinking(body.get("thinking"))
    metadata = obj(body.get("metadata") or {}, "metadata")
    only_known(metadata, {"user_id"}, "metadata")
    if body.get("service_tier") not in (None, "auto", "standard_only"):
        raise ApiError(400, "'service_tier' must be \"auto\" or \"standard_only\".",
                       param="service_tier")
    values = sampling(body, "max_tokens", -1, ("temperature", "top_p", "top_k"),
                      stop_field="stop_sequences")
    return ApiCall(tuple(messages), values, boolean(body, "stream"), model=model,
                   reply_format=output_format(body),
                   user=text(metadata, "user_id", 64, "metadata.user_id"), tools=tools,
                   enable_thinking=thinking, thinking_field="thinking", forced_call=forced,
                   parallel_tool_calls=parallel)


def output_format(body: dict[str, Any]) -> str:
    """Anthropic's structured outputs: `output_config.format` (and the beta's
    `output_format`), a JSON schema the reply must match, by the same grammar as OpenAI's
    `response_format`. `output_config.effort` is refused: no model here reads it."""
    config = obj(body.get("output_config") or {}, "output_config")
    only_known(config, {"format"}, "output_config")
    raw, where = config.get("format"), "output_config.format"
    if raw is None and body.get("output_format") is not None:
        raw, where = body["output_format"], "output_format"
    if raw is None:
        return ""
    fmt = obj(raw, where)
    only_known(fmt, {"type", "schema"}, where)
    if fmt.get("type") != "json_schema":
        raise ApiError(400, f"'{where}.type' must be \"json_schema\".", param=f"{where}.type")
    return schema_text(fmt.get("schema"), f"{where}.schema")


def _system(raw: Any) -> list[Message]:
    if raw is None:
        return []
    if isinstance(raw, str):
        return [Message("system", raw)] if raw else []
    return [Message("system", "".join(_texts(raw, "system")))]


def _texts(raw: Any, where: str) -> list[str]:
    out = []
    for j, item in enumerate(listed(raw, where)):
        block = obj(item, f"{where}[{j}]")
        only_known(block, {"type", "text", "cache_control", "citations"}, f"{where}[{j}]")
        if block.get("type") != "text" or not isinstance(block.get("text"), str):
            raise ApiError(400, f"'{where}[{j}]' must be a text block: only text is "
                           "supported here.", param=f"{where}[{j}]")
        out.append(block["text"])
    return out


def _turns(raw: Any) -> list[Message]:
    if not isinstance(raw, list) or not raw:
        raise ApiError(400, "'messages' must be a non-empty list.", param="messages")
    turns: list[Message] = []
    calls: list[ToolCallTurn] = []
    for i, item in enumerate(raw):
        where = f"messages[{i}]"
        message = obj(item, where)
        only_known(message, {"role", "content"}, where)
        role = message.get("role")
        if role not in ("user", "assistant"):
            raise ApiError(400, f"'{where}.role' must be user or assistant.",
                           param=f"{where}.role")
        content = message.get("content")
        if isinstance(content, str):
            turns.append(Message(role, content))
            continue
        texts, reasoning, made, results, images = [], [], [], [], []
        for j, part in enumerate(listed(content, f"{where}.content")):
            at = f"{where}.content[{j}]"
            # Clients echo a block back as they got it, with empty fields: those mean nothing.
            block = {k: v for k, v in obj(part, at).items() if v is not None}
            only_known(block, _BLOCK_FIELDS, at)
            kind = block.get("type")
            if kind == "text" and isinstance(block.get("text"), str):
                texts.append(block["text"])
            elif kind == "image" and role == "user":
                images.append(anthropic_image(block, at))
            elif kind == "thinking" and role == "assistant":
                reasoning.append(text(block, "thinking", 10**7, f"{at}.thinking"))
            elif kind == "tool_use" and role == "assistant":
                made.append(ToolCallTurn(text(block, "id", 256, f"{at}.id"),
                                         text(block, "name", 64, f"{at}.name"),
                                         json.dumps(obj(block.get("input", {}), f"{at}.input"),
                                                    ensure_ascii=False)))
            elif kind == "tool_result" and role == "user":
                call_id = text(block, "tool_use_id", 256, f"{at}.tool_use_id")
                inner = block.get("content")
                result = inner if isinstance(inner, str) else "".join(
                    _texts(inner or [], f"{at}.content"))
                if block.get("is_error"):
                    result = f"Error: {result}"
                results.append(Message("tool", result, tool_call_id=call_id,
                                       name=name_of_call(call_id, calls)))
            else:
                raise ApiError(400, f"'{at}' is a {str(kind)[:40]!s} block, which a {role} "
                               "turn cannot carry here (text, image, thinking, tool_use and "
                               "tool_result are supported).", param=at)
        calls += made
        turns += results
        if role == "assistant":
            turns.append(Message("assistant", "".join(texts), "".join(reasoning),
                                 tool_calls=tuple(made)))
        elif texts or images or not results:
            turns.append(Message("user", "".join(texts), images=tuple(images)))
    return turns


def _tools(raw: Any, choice: Any
           ) -> tuple[tuple[dict[str, Any], ...], ForcedCall | None, bool]:
    """The tools, the call the reply must be (`any`, a named `tool`) and whether several
    calls may come (not with `disable_parallel_tool_use`)."""
    tools = []
    for i, item in enumerate(listed(raw or [], "tools", MAX_TOOLS)):
        tool = obj(item, f"tools[{i}]")
        if tool.get("type") not in (None, "custom"):
            raise ApiError(400, f"'tools[{i}]' is a server tool ({str(tool.get('type'))[:40]}),"
                           " which this server does not have.", param=f"tools[{i}].type")
        only_known(tool, {"type", "name", "description", "input_schema", "cache_control"},
                   f"tools[{i}]")
        tools.append(function_spec(tool.get("name"), tool.get("description"),
                                   tool.get("input_schema"), f"tools[{i}]"))
    if choice is None:
        return tuple(tools), None, True
    choice = obj(choice, "tool_choice")
    only_known(choice, {"type", "name", "disable_parallel_tool_use"}, "tool_choice")
    kind, parallel = choice.get("type"), not boolean(
        choice, "disable_parallel_tool_use", "tool_choice.disable_parallel_tool_use")
    if kind == "none":
        return (), None, True
    if kind == "auto":
        return tuple(tools), None, parallel
    if kind == "any" and tools:
        return tuple(tools), ForcedCall("", parallel), parallel
    if kind == "tool" and choice.get("name") in {t["function"]["name"] for t in tools}:
        return tuple(tools), ForcedCall(str(choice["name"]), parallel), parallel
    raise ApiError(400, "'tool_choice' must be auto, none, any (with tools) or a tool in "
                   "'tools' by name.", param="tool_choice")


def _thinking(raw: Any) -> bool | None:
    if raw is None:
        return None
    kind = obj(raw, "thinking").get("type")
    if kind not in ("enabled", "disabled"):
        raise ApiError(400, "'thinking.type' must be enabled or disabled.",
                       param="thinking.type")
    return kind == "enabled"  # budget_tokens: the model thinks as long as it does


def usage(stats: list[Stats]) -> dict[str, int]:
    s = stats[0] if stats else None
    return {"input_tokens": s.prompt_tokens - s.cached_tokens if s else 0,
            "cache_read_input_tokens": s.cached_tokens if s else 0,
            "cache_creation_input_tokens": 0, "output_tokens": s.generated_tokens if s else 0}


class MessageFormat(Format):
    """One `message`, or its stream of events. Blocks are opened as the reply's parts come:
    thinking, text, tool_use; each closed before the next opens."""

    id_prefix = "msg"

    def __init__(self, model: str) -> None:
        super().__init__(model)
        self.id = f"msg_{secrets.token_hex(12)}"
        self._block = -1
        self._kind = ""
        self._stop_reason = "end_turn"
        self._stop_sequence: str | None = None

    def complete(self, choices: list[Choice], stats: list[Stats]) -> dict[str, Any]:
        c = choices[0]
        content: list[dict[str, Any]] = []
        if c.reasoning:
            content.append({"type": "thinking", "thinking": c.reasoning.strip(),
                            "signature": ""})
        if c.text.strip() or not c.calls:
            content.append({"type": "text", "text": c.text.strip() if c.calls else c.text})
        content += [{"type": "tool_use", "id": f"toolu_{call.id}", "name": call.name,
                     "input": dict(call.arguments)} for call in c.calls]
        return {**self._message(content, self._stop(c)), "stop_sequence": self._sequence(c),
                "usage": usage(stats)}

    def _message(self, content: list[dict[str, Any]], stop: str | None) -> dict[str, Any]:
        return {"id": self.id, "type": "message", "role": "assistant", "model": self.model,
                "content": content, "stop_reason": stop, "stop_sequence": None}

    @staticmethod
    def _sequence(c: Choice) -> str | None:
        return c.stop if c.stop and c.finish == "stop" else None

    @staticmethod
    def _stop(c: Choice) -> str:
        """The limit said before the calls (one may have been cut after them), and which of
        `stop_sequences` ended the text."""
        if c.stop and c.finish == "stop":
            return "stop_sequence"
        return "tool_use" if c.calls and c.finish != "length" else STOP_REASONS[c.finish]

    def begin(self) -> list[bytes]:
        return [_event("message_start", {"type": "message_start", "message": {
            **self._message([], None), "usage": usage([])}})]

    def event(self, index: int, event: ReaderEvent) -> list[bytes]:
        if isinstance(event, CallParsed):
            out = []
            for call in event.calls:
                out += self._open("tool_use", {"type": "tool_use", "id": f"toolu_{call.id}",
                                               "name": call.name, "input": {}}, force=True)
                out.append(self._delta({"type": "input_json_delta",
                                        "partial_json": arguments_text(call)}))
            return out
        if isinstance(event, TextDelta):
            if not event.text or (self._kind != "text" and not event.text.strip()):
                return []  # the blank between thinking and the answer opens no block
            return [*self._open("text", {"type": "text", "text": ""}),
                    self._delta({"type": "text_delta", "text": event.text})]
        return [*self._open("thinking", {"type": "thinking", "thinking": ""}),
                self._delta({"type": "thinking_delta", "thinking": event.text})]

    def _open(self, kind: str, block: dict[str, Any], force: bool = False) -> list[bytes]:
        if self._kind == kind and not force:
            return []
        out = self._close_block()
        self._block += 1
        self._kind = kind
        return [*out, _event("content_block_start", {
            "type": "content_block_start", "index": self._block, "content_block": block})]

    def _close_block(self) -> list[bytes]:
        if not self._kind:
            return []
        self._kind = ""
        return [_event("content_block_stop", {"type": "content_block_stop",
                                              "index": self._block})]

    def _delta(self, delta: dict[str, Any]) -> bytes:
        return _event("content_block_delta", {"type": "content_block_delta",
                                              "index": self._block, "delta": delta})

    def end(self, index: int, choice: Choice) -> list[bytes]:
        self._stop_reason = self._stop(choice)
        self._stop_sequence = self._sequence(choice)
        opened = [] if self._block >= 0 else self._open("text", {"type": "text", "text": ""})
        return [*opened, *self._close_block()]

    def close(self, stats: list[Stats], include_usage: bool) -> list[bytes]:
        return [_event("message_delta", {"type": "message_delta", "delta": {
            "stop_reason": self._stop_reason, "stop_sequence": self._stop_sequence},
            "usage": usage(stats)}),
            _event("message_stop", {"type": "message_stop"})]

    def error_event(self, error: ApiError) -> bytes:
        return _event("error", error.body())


def _event(name: str, data: dict[str, Any]) -> bytes:
    return sse(data, name)


def routes(serving: Serving) -> list[Route]:
    async def messages(request: Request) -> Any:
        return await serving.reply(request, parse_messages, MessageFormat)

    async def count_tokens(request: Request) -> JSONResponse:
        """The prompt's tokens as the loaded model's template renders them."""
        try:
            call = await serving.parse(request, lambda body: parse_messages(body, counting=True),
                                       await serving.body(request))
            if serving.link.resolve(call.model) or serving.link.model_info("") is None:
                raise ApiError(400, "Tokens can be counted for the loaded model only.",
                               param="model")
            ask = GenerationRequest(next_request_id(), call.messages, call.sampling,
                                    overflow="stop", tools=call.tools,
                                    enable_thinking=call.enable_thinking)
            view = await anyio.to_thread.run_sync(serving.link.client.inspect, ask)
        except EngineError as exc:
            serving.board.refused(str(exc))
            raise ApiError(400, str(exc), param="messages") from None
        except ApiError as exc:
            serving.board.refused(exc.message)
            raise
        return JSONResponse({"input_tokens": len(view.tokens)})

    return [Route("/v1/messages", messages, methods=["POST"]),
            Route("/v1/messages/count_tokens", count_tokens, methods=["POST"])]
