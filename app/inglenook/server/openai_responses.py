"""OpenAI's Responses API (what Codex speaks): POST /v1/responses with `input` items
(messages, function calls and their outputs, reasoning), `instructions`, function `tools`,
streamed as Responses events or whole. A response is kept in memory unless `store: false`
(response_store.py), so the next request may name it as `previous_response_id` and send only
what is new; `background` and every field this server cannot honour are refused by name.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Any, cast

from starlette.routing import Route

from inglenook.core.messages import ForcedCall, ImageRef, Message, Role, ToolCallTurn
from inglenook.core.replies import Stats
from inglenook.server.errors import ApiError
from inglenook.server.fields import boolean, listed, number, obj, only_known, text
from inglenook.server.images import DETAILS, url_image
from inglenook.server.reply_reader import Choice, ReaderEvent
from inglenook.server.replying import Serving, principal_of
from inglenook.server.response_store import ResponseStore
from inglenook.server.responses import Format, arguments_text, sse
from inglenook.server.schemas import EFFORTS, ApiCall, sampling
from inglenook.server.tool_specs import checked_arguments, function_spec, name_of_call
from inglenook.tools.formats import ToolCall
from inglenook.tools.parsing import CallParsed, TextDelta

FIELDS = {"model", "input", "instructions", "tools", "tool_choice", "max_output_tokens",
          "temperature", "top_p", "stream", "parallel_tool_calls", "store", "metadata",
          "user", "reasoning", "text", "include", "truncation", "service_tier",
          "prompt_cache_key", "previous_response_id", "background"}
_TEXT_PARTS = ("input_text", "output_text", "text")


def parse_responses(data: Any, earlier: Callable[[str], tuple[Message, ...] | None] = (
        lambda _id: None)) -> ApiCall:
    """The request as a call; `earlier(id)` is a kept response's conversation (its turns
    come after the instructions, before this request's input)."""
    body = obj(data)
    only_known(body, FIELDS)
    boolean(body, "store", default=True)
    for name, allowed in (("background", (None, False)), ("truncation", (None, "disabled")),
                          ("service_tier", (None, "auto", "default"))):
        if body.get(name) not in allowed:
            raise ApiError(400, f"'{name}' is not supported: this server keeps no responses "
                           "and answers each request whole.", param=name)
    if body.get("text") not in (None, {}, {"format": {"type": "text"}}):
        raise ApiError(400, "Only text output is supported.", param="text")
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
                   thinking_field="reasoning.effort", forced_call=forced)


def _earlier(previous: Any, earlier: Callable[[str], tuple[Message, ...] | None]
            ) -> tuple[Message, ...]:
    if previous is None:
        return ()
    found = earlier(previous) if isinstance(previous, str) else None
    if found is None:
        raise ApiError(400, f"Previous response with id '{str(previous)[:80]}' not found: "
                       "responses are kept in memory while the server runs, for the token "
                       "that made them, unless sent with store: false.",
                       param="previous_response_id", code="previous_response_not_found")
    return found


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
                 keep: Callable[[str, tuple[Message, ...]], None] | None = None) -> None:
        super().__init__(model)
        self.id = _id("resp")
        self._keep = keep  # given this response's id and output as turns, once it is done
        self._items: list[dict[str, Any]] = []
        self._open: dict[str, Any] | None = None
        self._seq = 0
        self._incomplete = False

    def _response(self, status: str, stats: list[Stats]) -> dict[str, Any]:
        """In progress with no output: begin() is sent with the first event, after it."""
        s = stats[0] if stats else None
        return {"id": self.id, "object": "response", "created_at": self.created,
                "status": status, "model": self.model,
                "output": [] if status == "in_progress" else self._items,
                "error": None, "incomplete_details": {"reason": "max_output_tokens"}
                if self._incomplete else None, "parallel_tool_calls": True,
                "tool_choice": "auto", "tools": [],
                "usage": None if s is None else {
                    "input_tokens": s.prompt_tokens,
                    "input_tokens_details": {"cached_tokens": s.cached_tokens},
                    "output_tokens": s.generated_tokens,
                    "output_tokens_details": {"reasoning_tokens": 0},
                    "total_tokens": s.prompt_tokens + s.generated_tokens}}

    def complete(self, choices: list[Choice], stats: list[Stats]) -> dict[str, Any]:
        c = choices[0]
        if c.reasoning:
            self._items.append(_reasoning(c.reasoning.strip()))
        if c.text.strip() or not c.calls:
            self._items.append(_message(c.text.strip() if c.calls else c.text, "completed"))
        self._items += [_call(call) for call in c.calls]
        self._incomplete = c.finish == "length"
        self._kept()
        return self._response("incomplete" if self._incomplete else "completed", stats)

    def _kept(self) -> None:
        """Hand the output on as turns (the items read back as input items would be)."""
        if self._keep is None:
            return
        try:
            output = tuple(_items(self._items)) if self._items else ()
        except ApiError:  # reasoning alone, nothing said: there is no turn to keep
            output = ()
        self._keep(self.id, output)

    def _event(self, kind: str, **data: Any) -> bytes:
        self._seq += 1
        return sse({"type": kind, "sequence_number": self._seq, **data}, kind)

    def begin(self) -> list[bytes]:
        return [self._event("response.created", response=self._response("in_progress", [])),
                self._event("response.in_progress", response=self._response("in_progress",
                                                                            []))]

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
        self._kept()
        if self._incomplete:
            return [self._event("response.incomplete",
                                response=self._response("incomplete", stats))]
        return [self._event("response.completed", response=self._response("completed", stats))]

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


def routes(serving: Serving) -> list[Route]:
    store = ResponseStore()

    async def responses(request: Any) -> Any:
        principal = [principal_of(request, serving.config)]
        turns: list[tuple[Message, ...]] = []  # this request's, without its instructions

        def parse(data: Any) -> ApiCall:
            user = data.get("user") if isinstance(data, dict) else None
            if isinstance(user, str) and user:  # a principal of its own with isolate_clients
                principal[0] = principal_of(request, serving.config, user)
            call = parse_responses(data, lambda rid: store.get(principal[0], rid))
            if data.get("store") is not False:
                turns.append(call.messages[1:] if data.get("instructions") else call.messages)
            return call

        def keep(rid: str, output: tuple[Message, ...]) -> None:
            if turns:
                store.put(principal[0], rid, (*turns[0], *output))

        return await serving.reply(request, parse, lambda model: ResponseFormat(model, keep))

    return [Route("/v1/responses", responses, methods=["POST"])]
