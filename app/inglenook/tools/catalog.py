"""The tools a chat offers the model, under names the model can write.

MCP tools are named per server, so two servers may both have `search`; the model sees one flat
list of functions. A tool keeps its own name when it is the only one so called, and becomes
`<server>_<tool>` when several are; names are cut down to what chat templates and the OpenAI
function-name rule accept (letters, digits, `_` and `-`, at most 64).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

MAX_FUNCTION_NAME = 64
_NOT_NAME = re.compile(r"[^A-Za-z0-9_-]+")


@dataclass(frozen=True)
class ToolInfo:
    """One tool of one MCP server, as listed by it."""

    server: str
    name: str
    description: str = ""
    input_schema: Mapping[str, Any] = field(default_factory=lambda: {"type": "object"})
    title: str = ""

    @property
    def label(self) -> str:
        """How a card or a list names it."""
        return self.title or self.name


def _function_name(text: str) -> str:
    return _NOT_NAME.sub("_", text).strip("_")[:MAX_FUNCTION_NAME] or "tool"


class ToolCatalog:
    """A chat's tools: the `tools` list for its chat template, and the tool a call names."""

    def __init__(self, tools: Iterable[ToolInfo]) -> None:
        tools = list(tools)
        counts: dict[str, int] = {}
        for tool in tools:
            key = _function_name(tool.name)
            counts[key] = counts.get(key, 0) + 1
        self._by_name: dict[str, ToolInfo] = {}
        for tool in tools:
            base = _function_name(tool.name)
            name = base if counts[base] == 1 else _function_name(f"{tool.server}_{tool.name}")
            unique, n = name, 1
            while unique in self._by_name:  # still equal after cutting: number them
                n += 1
                unique = f"{name[:MAX_FUNCTION_NAME - len(str(n)) - 1]}_{n}"
            self._by_name[unique] = tool

    def __len__(self) -> int:
        return len(self._by_name)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._by_name)

    def find(self, function_name: str) -> ToolInfo | None:
        """The tool a model's call names, or None (the model made one up)."""
        return self._by_name.get(function_name)

    def function_name(self, tool: ToolInfo) -> str:
        return next(name for name, t in self._by_name.items() if t == tool)

    def template_tools(self) -> list[dict[str, Any]]:
        """The value of a chat template's `tools` variable: OpenAI-style function specs, the
        shape Hugging Face templates (Qwen, Llama 3.x, Mistral, gpt-oss…) are written for."""
        return [{"type": "function",
                 "function": {"name": name, "description": tool.description,
                              "parameters": _parameters(tool.input_schema)}}
                for name, tool in self._by_name.items()]


def _parameters(schema: Mapping[str, Any]) -> dict[str, Any]:
    """An object schema: templates walk `parameters.properties` (gpt-oss renders them as a
    TypeScript type) and fail on a schema without them."""
    params = dict(schema)
    params.setdefault("type", "object")
    if params.get("type") == "object":
        params.setdefault("properties", {})
    params.pop("title", None)  # pydantic's "addArguments": noise in the prompt
    return params
