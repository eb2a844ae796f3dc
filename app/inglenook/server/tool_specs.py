"""Tools a client offers and the calls a history carries, in every dialect's shape, as the
chat template reads them (OpenAI-style function specs, core.messages.ToolCallTurn).

The model's calls come back through the window's own parsers (tools/parsers.py): this module
only checks what a client sends. `tool_choice` "auto" and "none" give the template the tools,
or not; "required" and a named function also force the reply to be a call, by a grammar made
from the tools' schemas (core.messages.ForcedCall, engine/host/tool_grammar.py), which is
also where `strict` functions are enforced whole.
"""

from __future__ import annotations

import json
import re
from typing import Any

from inglenook.core.messages import ForcedCall, ToolCallTurn
from inglenook.server.errors import ApiError
from inglenook.server.fields import listed, obj

MAX_TOOLS = 128
MAX_ARGUMENTS = 256 * 1024
_NAME = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")


def function_spec(name: Any, description: Any, parameters: Any, where: str) -> dict[str, Any]:
    """One tool as templates read it: {"type": "function", "function": {...}}."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise ApiError(400, f"'{where}.name' must be 1 to 64 letters, digits, '_', '-', '.' or "
                       "':'.", param=f"{where}.name")
    if description is not None and not isinstance(description, str):
        raise ApiError(400, f"'{where}.description' must be text.", param=f"{where}.description")
    if parameters is not None and not isinstance(parameters, dict):
        raise ApiError(400, f"'{where}' parameters must be a JSON schema object.", param=where)
    function: dict[str, Any] = {"name": name}
    if description:
        function["description"] = description
    function["parameters"] = parameters if parameters is not None else {
        "type": "object", "properties": {}}
    return {"type": "function", "function": function}


def openai_tools(raw: Any, strict: list[str] | None = None) -> tuple[dict[str, Any], ...]:
    """The function specs; the names of `strict` ones are added to `strict` (refused when
    None: a dialect without forced calls)."""
    if raw is None:
        return ()
    specs = []
    for i, item in enumerate(listed(raw, "tools", MAX_TOOLS)):
        where = f"tools[{i}]"
        tool = obj(item, where)
        if tool.get("type") != "function":
            raise ApiError(400, f"'{where}.type' must be \"function\": only function tools are "
                           "supported.", param=f"{where}.type")
        function = obj(tool.get("function"), f"{where}.function")
        if function.get("strict") not in (None, False):
            if strict is None or function.get("strict") is not True:
                raise ApiError(400, f"'{where}.function.strict' is not supported here.",
                               param=f"{where}.function.strict")
            strict.append(str(function.get("name")))
        specs.append(function_spec(function.get("name"), function.get("description"),
                                   function.get("parameters"), f"{where}.function"))
    return tuple(specs)


def openai_tool_choice(raw: Any, tools: tuple[dict[str, Any], ...], strict: list[str],
                       parallel: bool) -> tuple[tuple[dict[str, Any], ...], ForcedCall | None]:
    """The tools the template is given (all, or none for "none") and the call the reply must
    be ("required", a named function), if any. `strict` functions are enforced only in a
    forced call: with "auto" the model may write text, which no grammar here constrains."""
    if raw == "none":
        return (), None
    forced: ForcedCall | None = None
    if raw == "required":
        if not tools:
            raise ApiError(400, "'tool_choice' \"required\" needs 'tools'.", param="tool_choice")
        forced = ForcedCall("", parallel, tuple(strict))
    elif isinstance(raw, dict):
        function = obj(raw.get("function"), "tool_choice.function")
        name = function.get("name")
        if raw.get("type") != "function" or name not in {t["function"]["name"] for t in tools}:
            raise ApiError(400, "'tool_choice.function.name' must name a function in 'tools'.",
                           param="tool_choice.function.name")
        forced = ForcedCall(str(name), parallel, tuple(strict))
    elif raw not in (None, "auto"):
        raise ApiError(400, "'tool_choice' must be \"auto\", \"none\", \"required\" or a "
                       "function.", param="tool_choice")
    if strict and forced is None:
        i = next(i for i, t in enumerate(tools) if t["function"]["name"] == strict[0])
        raise ApiError(400, f"'tools[{i}].function.strict' is enforced only when a call is "
                       "forced ('tool_choice' \"required\" or a named function).",
                       param=f"tools[{i}].function.strict")
    return tools, forced


def openai_calls(raw: Any, where: str) -> tuple[ToolCallTurn, ...]:
    """An assistant turn's `tool_calls`, read back for the template."""
    if raw is None:
        return ()
    turns = []
    for j, item in enumerate(listed(raw, f"{where}.tool_calls", MAX_TOOLS)):
        at = f"{where}.tool_calls[{j}]"
        call = obj(item, at)
        function = obj(call.get("function"), f"{at}.function")
        name, arguments, call_id = function.get("name"), function.get("arguments"), call.get("id")
        if not isinstance(name, str) or not name:
            raise ApiError(400, f"'{at}.function.name' must be text.", param=f"{at}.function.name")
        if isinstance(arguments, dict):
            arguments = json.dumps(arguments, ensure_ascii=False)
        turns.append(ToolCallTurn(call_id if isinstance(call_id, str) else "", name,
                                  checked_arguments(arguments, f"{at}.function.arguments")))
    return tuple(turns)


def checked_arguments(arguments: Any, where: str) -> str:
    """Arguments as JSON text of an object (the template is given the object)."""
    if arguments is None or arguments == "":
        return "{}"
    if not isinstance(arguments, str) or len(arguments) > MAX_ARGUMENTS:
        raise ApiError(400, f"'{where}' must be JSON text of an object.", param=where)
    try:
        value = json.loads(arguments)
    except (ValueError, RecursionError):
        raise ApiError(400, f"'{where}' is not valid JSON.", param=where) from None
    if not isinstance(value, dict):
        raise ApiError(400, f"'{where}' must be a JSON object.", param=where)
    return arguments


def name_of_call(call_id: str, earlier: list[ToolCallTurn]) -> str:
    """The function a tool result answers, from the call with its id."""
    return next((c.name for c in reversed(earlier) if c.id == call_id), "")
