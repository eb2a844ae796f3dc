"""How a model writes tool calls, read from its chat template (never from the model's name),
and the messages that carry calls and results back to the template.

  hermes   `<tool_call>{"name": …, "arguments": {…}}</tool_call>` (Qwen 2.5/3, Hermes, QwQ…).
  llama    a reply that is one JSON object `{"name": …, "parameters": {…}}`, maybe after
           `<|python_tag|>` (Llama 3.1–3.3 with custom tools).
  mistral  `[TOOL_CALLS][{"name": …, "arguments": {…}}]` (Nemo, v3 tokenizers) or
           `[TOOL_CALLS]name[ARGS]{…}` (Small 3.2, Devstral, Magistral).
  harmony  gpt-oss: `<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>`,
           the arguments, `<|call|>` (the recipient may also come before the channel).
"""

from __future__ import annotations

import secrets
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

ToolFormat = Literal["hermes", "llama", "mistral", "harmony"]
TOOL_FORMATS: tuple[ToolFormat, ...] = ("hermes", "llama", "mistral", "harmony")
_ID_CHARS = string.ascii_letters + string.digits


def tool_format(template_source: str) -> ToolFormat | None:
    """The tool-call format a chat template teaches, or None when it has no tool support (or
    one we cannot read): the UI then says so instead of offering tools."""
    src = template_source
    # `<function=…>` calls (Qwen3-Coder's XML inside <tool_call>, Functionary) are not JSON.
    if "tools" not in src or "<function=" in src:
        return None
    if "<tool_call>" in src:
        return "hermes"
    if "[TOOL_CALLS]" in src:
        return "mistral"
    if "<|channel|>" in src and "<|call|>" in src:
        return "harmony"
    if "<|start_header_id|>" in src and ("<|python_tag|>" in src or '"parameters"' in src):
        return "llama"
    return None


def new_call_id() -> str:
    """Nine letters and digits: Mistral's templates refuse any other tool-call id."""
    return "".join(secrets.choice(_ID_CHARS) for _ in range(9))


@dataclass(frozen=True)
class ToolCall:
    """One call the model wrote. `id` is the model's own when it gave one (Mistral v3 does),
    else a new one: templates pair each result with its call by id."""

    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    id: str = field(default_factory=new_call_id)


def assistant_turn(content: str, calls: Sequence[ToolCall]) -> dict[str, Any]:
    """The assistant message that made `calls`, as templates read it (`message.tool_calls`).
    `content` is the reply text around the calls, without them: the template writes the calls
    back in its own syntax. Arguments stay a mapping: templates apply `tojson` themselves."""
    return {"role": "assistant", "content": content,
            "tool_calls": [{"id": c.id, "type": "function",
                            "function": {"name": c.name, "arguments": dict(c.arguments)}}
                           for c in calls]}


def tool_turn(call: ToolCall, text: str) -> dict[str, Any]:
    """A tool's result for the model (role `tool`): `tool_call_id` for Mistral, `name` for
    templates that print whose result it is."""
    return {"role": "tool", "content": text, "tool_call_id": call.id, "name": call.name}
