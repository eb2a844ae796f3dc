"""OpenAI's Responses API (what Codex speaks): POST /v1/responses with `input` items
(messages, function calls and their outputs, reasoning), `instructions`, function `tools`,
streamed as Responses events or whole. A response is kept in the profile unless `store: false`
(response_store.py), so the next request may name it as `previous_response_id` and send only
what is new, and GET/DELETE /v1/responses/{id} and its input_items serve it; `background` and
every field this server cannot honour are refused by name. The response echoes the `tools`,
`tool_choice` and `previous_response_id` it was asked with, and a stream's events are numbered
from 0 in the order they are sent.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable
from typing import Any, cast

from starlette.responses import JSONResponse
from starlette.routing import Route

from inglenook.core.messages import JSON_OBJECT, ForcedCall, ImageRef, Message, Role, ToolCallTurn
from inglenook.core.replies import Stats
from inglenook.server.errors import ApiError
from inglenook.server.fields import boolean, listed, number, obj, only_known, text
from inglenook.server.images import DETAILS, url_image
from inglenook.server.reply_reader import Choice, ReaderEvent
from inglenook.server.replying import Serving, principal_of
from inglenook.server.response_store import MAX_RESPONSES as MAX_KEPT
from inglenook.server.response_store import Items, ResponseStore
from inglenook.server.responses import Format, arguments_text, sse
from inglenook.server.schemas import EFFORTS, ApiCall, sampling, schema_text
from inglenook.server.tool_specs import checked_arguments, function_spec, name_of_call
from inglenook.tools.formats import ToolCall
from inglenook.tools.parsing import CallParsed, TextDelta

FIELDS = {"model", "input", "instructions", "tools", "tool_choice", "max_output_tokens",
          "temperature", "top_p", "stream", "parallel_tool_calls", "store", "metadata",
          "user", "reasoning", "text", "include", "truncation", "service_tier",
          "prompt_cache_key", "previous_response_id", "background", "safety_identifier"}
_TEXT_PARTS = ("input_text", "output_text", "text")


def parse_responses(data: Any, earlier: Callable[[str], Items | None] = (
        lambda _id: None)) -> ApiCall:
    """The request as a call; `earlier(id)` is a kept response's conversation as input items
    (its turns come after the instructions, before this request's input)."""
    body = obj(data)
    only_known(body, FIELDS)
    boolean(body, "store", default=True)
    for name, allowed in (("background", (None, False)), ("truncation", (None, "disabled")),
                          ("service_tier", (None, "auto", "default"))):
        if body.get(name) not in allowed:
            raise ApiError(400, f"'{name}' is not supported: this server keeps no responses "
                           "and answers each request whole.", param=name)
    reply_format = text_format(body.get("text"))
    include = listed(body.get("include") or [], "include")
    if not all(isinstance(i, str) for i in include):
        raise ApiError(400, "'include' must be a list of names.", param="include")
    reasoning = obj(body.get("reasoning") or {}, "reasoning")
    only_known(reasoning, {"effort", "summary"}, "reasoning")
    effort = text(reasoning, "effort", 16, "reasoning.effort")
    if effort and effort not in EFFORTS:
        raise ApiError(400, f"'reasoning.effort' must be one of {', '.join(EFFORTS)}.",
                       param="reasoning.effort")
    head = [Message("system", text(body, "instructions", 10**6))] if body.get(
        "instructions") else []
    history = _earlier(body.get("previous_response_id"), earlier)
    tools, forced = _tools(body.get("tools"), body.get("tool_choice"),
                           boolean(body, "parallel_tool_calls", default=True))
    number(body, "max_output_tokens", 1, 2**31 - 1, integer=True)
    values = sampling(body, "max_output_tokens", -1, ("temperature", "top_p"))
    off = effort in ("none", "minimal")
    return ApiCall((*head, *history, *_items(body.get("input"))), values,
                   boolean(body, "stream"),
                   model=text(body, "model", 256), user=text(body, "user", 64), tools=tools,
                   parallel_tool_calls=boolean(body, "parallel_tool_calls", default=True),
                   enable_thinking=False if off else None,
                   reasoning_effort="" if off else effort,
                   thinking_field="reasoning.effort", forced_call=forced,
                   reply_format=reply_format)


def text_format(raw: Any) -> str:
    """The Responses API's `text.format` (what `responses.parse()` and langchain's
    structured output send): text, any JSON object, or a JSON schema, the schema beside
    `type` rather than under `json_schema` as on the chat route. The same grammar enforces
    it. `verbosity` only asks for shorter or longer prose: accepted, and left to the model."""
    if raw is None:
        return ""
    holder = obj(raw, "text")
    only_known(holder, {"format", "verbosity"}, "text")
    if holder.get("verbosity") not in (None, "low", "medium", "high"):
        raise ApiError(400, "'text.verbosity' must be low, medium or high.",
                       param="text.verbosity")
    if holder.get("format") is None:
        return ""
    fmt = obj(holder["format"], "text.format")
    kind = fmt.get("type")
    if kind in ("text", "json_object"):
        only_known(fmt, {"type"}, "text.format")
        return JSON_OBJECT if kind == "json_object" else ""
    if kind == "json_schema":
        only_known(fmt, {"type", "name", "schema", "strict", "description"}, "text.format")
        return schema_text(fmt.get("schema", {}), "text.format.schema")
    raise ApiError(400, "'text.format.type' must be \"text\", \"json_object\" or "
                   "\"json_schema\".", param="text.format.type")


def _earlier(previous: Any, earlier: Callable[[str], Items | None]) -> list[Message]:
    if previous is None:
        return []
    found = earlier(previous) if isinstance(previous, str) else None
    if found is None:
        raise ApiError(400, f"Previous response with id '{str(previous)[:80]}' not found: "
                       "responses are kept for the token that made them (the most recent "
                       f"{MAX_KEPT} of each), unless sent with store: false or deleted.",
                       param="previous_response_id", code="previous_response_not_found")
    return _items(found)


def input_items(raw: Any) -> Items:
    """The request's `input` as items, each with an id (as `input_items.list` gives them)."""
    if isinstance(raw, str):
        raw = [{"type": "message", "role": "user",
                "content": [{"type": "input_text", "text": raw}]}]
    out = []
    for item in raw if isinstance(raw, list) else []:
        entry = dict(item)
        entry.setdefault("type", "message")
        if entry["type"] == "message":
            entry.setdefault("id", _id("msg"))
            entry.setdefault("status", "completed")
        out.append(entry)
    return out


def _tools(raw: Any, choice: Any, parallel: bool
           ) -> tuple[tuple[dict[str, Any], ...], ForcedCall | None]:
    """The function tools, and the call the reply must be ("required", a named function)."""
    specs = []
    for i, item in enumerate(listed(raw or [], "tools", 128)):
        tool = obj(item, f"tools[{i}]")
        if tool.get("type") != "function":
            raise ApiError(400, f"'tools[{i}].type' must be \"function\": this server has no "
                           "built-in tools.", param=f"tools[{i}].type")
        if tool.get("strict"):
            raise ApiError(400, f"'tools[{i}].strict' needs grammar-constrained sampling, "
                           "which this server does not do yet.", param=f"tools[{i}].strict")
        specs.append(function_spec(tool.get("name"), tool.get("description"),
                                   tool.get("parameters"), f"tools[{i}]"))
    if choice in (None, "auto"):
        return tuple(specs), None
    if choice == "none":
        return (), None
    names = {t["function"]["name"] for t in specs}
    if choice == "required" and specs:
        return tuple(specs), ForcedCall("", parallel)
    if (isinstance(choice, dict) and choice.get("type") == "function"
            and choice.get("name") in names):
        return tuple(specs), ForcedCall(str(choice["name"]), parallel)
    raise ApiError(400, "'tool_choice' must be \"auto\", \"none\", \"required\" (with "
                   "tools) or {\"type\": \"function\", \"name\": …} naming one of 'tools'.",
                   param="tool_choice")


def _items(raw: Any) -> list[Message]:
    if isinstance(raw, str):
        return [Message("user", raw)]
    out: list[Message] = []
    calls: list[ToolCallTurn] = []
    thought = ""
    for i, item in enumerate(listed(raw, "input")):
        where = f"input[{i}]"
        entry = obj(item, where)
        kind = entry.get("type", "message")
        if kind == "message":
            role = entry.get("role")
            role = "system" if role == "developer" else role
            if role not in ("system", "user", "assistant"):
                raise ApiError(400, f"'{where}.role' must be system, developer, user or "
                               "assistant.", param=f"{where}.role")
            content, images = _content(entry.get("content"), where, role == "user")
            out.append(Message(cast(Role, role), content,
                               thought if role == "assistant" else "", images=images))
            thought = "" if role == "assistant" else thought
        elif kind == "function_call":
            call = ToolCallTurn(text(entry, "call_id", 256, f"{where}.call_id"),
                                text(entry, "name", 64, f"{where}.name"),
                                checked_arguments(entry.get("arguments"),
                                                  f"{where}.arguments"))
            calls.append(call)
            last = out[-1] if out else None
            if last is not None and last.role == "assistant":
                out[-1] = Message("assistant", last.content, last.reasoning,
                                  (*last.tool_calls, call))
            else:
                out.append(Message("assistant", "", thought, (call,)))
                thought = ""
        elif kind == "function_call_output":
            call_id = text(entry, "call_id", 256, f"{where}.call_id")
            output = entry.get("output")
            result = output if isinstance(output, str) else _content(
                output, f"{where}.output", False)[0]
            out.append(Message("tool", result, tool_call_id=call_id,
                                name=name_of_call(call_id, calls)))
        elif kind == "reasoning":
            summary = listed(entry.get("summary") or [], f"{where}.summary")
            thought += "".join(s.get("text", "") for s in summary if isinstance(s, dict))
        else:
            raise ApiError(400, f"'{where}' is a {str(kind)[:40]} item: messages, "
                           "function_call, function_call_output and reasoning are supported.",
                           param=where)
    if not out:
        raise ApiError(400, "'input' must hold at least one message.", param="input")
    return out


def _content(raw: Any, where: str, user: bool) -> tuple[str, tuple[ImageRef, ...]]:
    """The text of a message's parts, and a user message's `input_image` parts as images (a
    data: URL, or an http(s) URL under the server's fetching rules: server/images.py)."""
    if isinstance(raw, str):
        return raw, ()
    parts: list[str] = []
    images: list[ImageRef] = []
    for j, part in enumerate(listed(raw, f"{where}.content")):
        at = f"{where}.content[{j}]"
        block = obj(part, at)
        if block.get("type") == "input_image" and user:
            images.append(_image(block, at))
            continue
        if block.get("type") not in _TEXT_PARTS or not isinstance(block.get("text"), str):
            shown = "text or input_image" if user else "text"
            raise ApiError(400, f"'{at}' must be {shown}.", param=at)
        parts.append(block["text"])
    return "".join(parts), tuple(images)


def _image(block: dict[str, Any], at: str) -> ImageRef:
    """`{"type": "input_image", "image_url": "data:image/png;base64,…", "detail": "auto"}`."""
    only_known(block, {"type", "image_url", "file_id", "detail"}, at)
    if block.get("detail") not in (None, *DETAILS):
        raise ApiError(400, f"'{at}.detail' must be one of {', '.join(DETAILS)}.",
                       param=f"{at}.detail")
    if block.get("file_id") is not None:
        raise ApiError(400, f"'{at}.file_id': this server keeps no files; send the image as "
                       "'image_url' (a data: URL).", param=f"{at}.file_id")
    return url_image(block.get("image_url"), f"{at}.image_url", at)


def _id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(12)}"


class ResponseFormat(Format):
    """One `response`, or its stream of events: an output item for each part of the reply
    (reasoning, the message, each function call), opened as it begins."""

    def __init__(self, model: str,
                 keep: Callable[[str, Items, dict[str, Any]], None] | None = None,
                 asked: dict[str, Any] | None = None) -> None:
        """`keep(id, output items, response)`: called once the response is done; `asked`:
        what the response echoes of its request (tools, tool_choice, …)."""
        super().__init__(model)
        self.id = _id("resp")
        self._keep = keep
        self._asked = asked or {}
        self._items: list[dict[str, Any]] = []
        self._open: dict[str, Any] | None = None
        self._seq = 2  # begin()'s two events, sent first once the first text is known, are 0, 1
        self._incomplete = False

    def _response(self, status: str, stats: list[Stats]) -> dict[str, Any]:
        """In progress with no output: begin() is sent with the first event, after it."""
        s = stats[0] if stats else None
        return {"id": self.id, "object": "response", "created_at": self.created,
                "status": status, "model": self.model,
                "output": [] if status == "in_progress" else self._items,
                "error": None, "incomplete_details": {"reason": "max_output_tokens"}
                if self._incomplete else None, "parallel_tool_calls": True,
                "tool_choice": "auto", "tools": [], "previous_response_id": None,
                "instructions": None, "max_output_tokens": None, "store": True,
                **self._asked,
                "usage": None if s is None else {
                    "input_tokens": s.prompt_tokens,
                    "input_tokens_details": {"cached_tokens": s.cached_tokens},
                    "output_tokens": s.generated_tokens,
                    "output_tokens_details": {"reasoning_tokens": s.reasoning_tokens},
                    "total_tokens": s.prompt_tokens + s.generated_tokens}}

    def complete(self, choices: list[Choice], stats: list[Stats]) -> dict[str, Any]:
        c = choices[0]
        if c.reasoning:
            self._items.append(_reasoning(c.reasoning.strip()))
        if c.text.strip() or not c.calls:
            self._items.append(_message(c.text.strip() if c.calls else c.text, "completed"))
        self._items += [_call(call) for call in c.calls]
        self._incomplete = c.finish == "length"
        return self._kept(self._response("incomplete" if self._incomplete else "completed",
                                         stats))

    def _kept(self, response: dict[str, Any]) -> dict[str, Any]:
        """Hand the output on (its items read back as input items would be) with the
        response as sent."""
        if self._keep is not None:
            self._keep(self.id, list(self._items), response)
        return response

    def _event(self, kind: str, at: int | None = None, **data: Any) -> bytes:
        if at is None:
            at, self._seq = self._seq, self._seq + 1
        return sse({"type": kind, "sequence_number": at, **data}, kind)

    def begin(self) -> list[bytes]:
        return [self._event("response.created", 0, response=self._response("in_progress", [])),
                self._event("response.in_progress", 1,
                            response=self._response("in_progress", []))]

    def event(self, index: int, event: ReaderEvent) -> list[bytes]:
        if isinstance(event, CallParsed):
            out = self._close()
            for call in event.calls:
                item = _call(call)
                at = len(self._items)
                self._items.append(item)
                out += [self._event("response.output_item.added", output_index=at,
                                    item={**item, "arguments": "", "status": "in_progress"}),
                        self._event("response.function_call_arguments.delta", output_index=at,
                                    item_id=item["id"], delta=item["arguments"]),
                        self._event("response.function_call_arguments.done", output_index=at,
                                    item_id=item["id"], arguments=item["arguments"]),
                        self._event("response.output_item.done", output_index=at, item=item)]
            return out
        kind = "message" if isinstance(event, TextDelta) else "reasoning"
        if not event.text or (kind == "message" and self._kind() != "message"
                              and not event.text.strip()):
            return []
        out = [] if self._kind() == kind else [*self._close(), *self._start(kind)]
        item, at = self._items[-1], len(self._items) - 1  # the one just opened
        if kind == "message":
            item["content"][0]["text"] += event.text
            return [*out, self._event("response.output_text.delta", item_id=item["id"],
                                      output_index=at, content_index=0, delta=event.text)]
        item["summary"][0]["text"] += event.text
        return [*out, self._event("response.reasoning_summary_text.delta", item_id=item["id"],
                                  output_index=at, summary_index=0, delta=event.text)]

    def _kind(self) -> str:
        return self._open["type"] if self._open else ""

    def _start(self, kind: str) -> list[bytes]:
        item = _message("", "in_progress") if kind == "message" else _reasoning("")
        at = len(self._items)
        self._items.append(item)
        self._open = item
        added = self._event("response.output_item.added", output_index=at, item={
            **item, "content": [], "summary": []} if kind == "reasoning" else {
            **item, "content": []})
        if kind == "message":
            return [added, self._event("response.content_part.added", item_id=item["id"],
                                       output_index=at, content_index=0,
                                       part={"type": "output_text", "text": "",
                                             "annotations": []})]
        return [added, self._event("response.reasoning_summary_part.added", item_id=item["id"],
                                   output_index=at, summary_index=0,
                                   part={"type": "summary_text", "text": ""})]

    def _close(self) -> list[bytes]:
        item, at = self._open, len(self._items) - 1
        if item is None:
            return []
        self._open = None
        if item["type"] == "message":
            item["status"] = "completed"
            part = item["content"][0]
            return [self._event("response.output_text.done", item_id=item["id"],
                                output_index=at, content_index=0, text=part["text"]),
                    self._event("response.content_part.done", item_id=item["id"],
                                output_index=at, content_index=0, part=part),
                    self._event("response.output_item.done", output_index=at, item=item)]
        part = item["summary"][0]
        return [self._event("response.reasoning_summary_text.done", item_id=item["id"],
                            output_index=at, summary_index=0, text=part["text"]),
                self._event("response.reasoning_summary_part.done", item_id=item["id"],
                            output_index=at, summary_index=0, part=part),
                self._event("response.output_item.done", output_index=at, item=item)]

    def end(self, index: int, choice: Choice) -> list[bytes]:
        self._incomplete = choice.finish == "length"
        return self._close()

    def close(self, stats: list[Stats], include_usage: bool) -> list[bytes]:
        status = "incomplete" if self._incomplete else "completed"
        return [self._event(f"response.{status}",
                            response=self._kept(self._response(status, stats)))]

    def error_event(self, error: ApiError) -> bytes:
        return self._event("error", code=error.code, message=error.message, param=error.param)


def _message(content: str, status: str) -> dict[str, Any]:
    return {"type": "message", "id": _id("msg"), "status": status, "role": "assistant",
            "content": [{"type": "output_text", "text": content, "annotations": []}]}


def _reasoning(summary: str) -> dict[str, Any]:
    return {"type": "reasoning", "id": _id("rs"),
            "summary": [{"type": "summary_text", "text": summary}]}


def _call(call: ToolCall) -> dict[str, Any]:
    return {"type": "function_call", "id": _id("fc"), "call_id": f"call_{call.id}",
            "name": call.name, "arguments": arguments_text(call), "status": "completed"}


def _asked(data: Any) -> dict[str, Any]:
    """What a response echoes of its request, as it was sent."""
    if not isinstance(data, dict):
        return {}
    return {k: data[k] for k in ("tools", "tool_choice", "previous_response_id", "instructions",
                                 "max_output_tokens", "parallel_tool_calls", "store",
                                 "temperature", "top_p", "metadata", "user")
            if data.get(k) is not None}


def routes(serving: Serving, store: ResponseStore | None = None) -> list[Route]:
    """`store`: the profile's unless given."""
    kept = store if store is not None else ResponseStore()

    async def responses(request: Any) -> Any:
        principal = [principal_of(request, serving.config)]
        turns: list[Items] = []  # this request's input items, those it continues first
        asked: dict[str, Any] = {}

        def parse(data: Any) -> ApiCall:
            user = data.get("user") if isinstance(data, dict) else None
            if isinstance(user, str) and user:  # a principal of its own with isolate_clients
                principal[0] = principal_of(request, serving.config, user)
            call = parse_responses(data, lambda rid: kept.get(principal[0], rid))
            asked.update(_asked(data))
            if data.get("store") is not False:
                previous = data.get("previous_response_id")
                before = kept.get(principal[0], previous) if previous else None
                turns.append([*(before or []), *input_items(data.get("input"))])
            return call

        def keep(rid: str, output: Items, response: dict[str, Any]) -> None:
            if turns:
                kept.put(principal[0], rid, [*turns[0], *output], len(turns[0]), response)

        return await serving.reply(request, parse,
                                   lambda model: ResponseFormat(model, keep, asked))

    def _found(request: Any) -> tuple[str, str]:
        principal = principal_of(request, serving.config)
        rid = request.path_params["rid"]
        return principal, rid

    def _missing(rid: str) -> ApiError:
        return ApiError(404, f"No response with id '{rid[:80]}' is kept for this token.",
                        param="response_id", code="response_not_found")

    async def one(request: Any) -> Any:
        principal, rid = _found(request)
        if request.method == "DELETE":
            if not await asyncio.to_thread(kept.delete, principal, rid):
                raise _missing(rid)
            return JSONResponse({"id": rid, "object": "response.deleted", "deleted": True})
        body = await asyncio.to_thread(kept.response, principal, rid)
        if body is None:
            raise _missing(rid)
        return JSONResponse(body)

    async def items(request: Any) -> Any:
        principal, rid = _found(request)
        found = await asyncio.to_thread(kept.inputs, principal, rid)
        if found is None:
            raise _missing(rid)
        listed_items = [item if "id" in item else {**item, "id": f"item_{n}"}
                        for n, item in enumerate(found)]
        if request.query_params.get("order", "desc") != "asc":
            listed_items.reverse()
        after = request.query_params.get("after")
        if after:
            ids = [item["id"] for item in listed_items]
            listed_items = listed_items[ids.index(after) + 1:] if after in ids else []
        limit = request.query_params.get("limit", "20")
        count = min(max(int(limit), 1), 100) if limit.isdigit() else 20
        page = listed_items[:count]
        return JSONResponse({"object": "list", "data": page,
                             "first_id": page[0]["id"] if page else None,
                             "last_id": page[-1]["id"] if page else None,
                             "has_more": len(listed_items) > count})

    return [Route("/v1/responses", responses, methods=["POST"]),
            Route("/v1/responses/{rid}", one, methods=["GET", "DELETE"]),
            Route("/v1/responses/{rid}/input_items", items, methods=["GET"])]
