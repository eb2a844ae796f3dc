"""Tools a client offers and the calls a history carries, in every dialect's shape, as the
chat template reads them (OpenAI-style function specs, core.messages.ToolCallTurn).

The model's calls come back through the window's own parsers (tools/parsers.py): this module
only checks what a client sends. `tool_choice` can be honoured for "auto" and "none" (the
template is given the tools, or not); "required" and a named function would need the reply
constrained by a grammar, which this server does not do yet: those are refused by name.
"""

from __future__ import annotations

import json
import re
from typing import Any

from inglenook.core.messages import ToolCallTurn
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


def openai_tools(raw: Any) -> tuple[dict[str, Any], ...]:
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
        if function.get("strict"):
            raise ApiError(400, f"'{where}.function.strict' needs grammar-constrained sampling, "
                           "which this server does not do yet.", param=f"{where}.function.strict")
        specs.append(function_spec(function.get("name"), function.get("description"),
                                   function.get("parameters"), f"{where}.function"))
    return tuple(specs)


def openai_tool_choice(raw: Any, tools: tuple[dict[str, Any], ...]) -> tuple[dict[str, Any], ...]:
    """The tools the template is given: all of them ("auto", omitted) or none ("none")."""
    if raw is None or raw == "auto":
        return tools
    if raw == "none":
        return ()
    if raw == "required" or isinstance(raw, dict):
        raise ApiError(400, "'tool_choice' can be \"auto\" or \"none\": forcing a call needs "
                       "grammar-constrained sampling, which this server does not do yet.",
                       param="tool_choice", code="unsupported_value")
    raise ApiError(400, "'tool_choice' must be \"auto\", \"none\", \"required\" or a function.",
                   param="tool_choice")


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
