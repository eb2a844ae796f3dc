"""A tool call as the transcript keeps it: what was asked, what the user decided, what came
back. Plain data with a JSON form, so the store can keep cards with their message and exports
can show them; the window draws one per call.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal, cast, get_args

from inglenook.tools.approval import DECISIONS, Decision
from inglenook.tools.catalog import ToolCatalog
from inglenook.tools.formats import ToolCall, tool_turn
from inglenook.tools.results import ToolResult, ToolStatus, unknown_tool

CardState = Literal["awaiting", "running", "done"]
_STATUSES: tuple[str, ...] = get_args(ToolStatus)


@dataclass(frozen=True)
class ToolCard:
    call: ToolCall
    server: str = ""  # "" when the model named a tool the chat does not have
    tool: str = ""  # the server's own name for it
    state: CardState = "awaiting"
    decision: Decision | None = None
    result: ToolResult | None = None

    @classmethod
    def for_call(cls, call: ToolCall, catalog: ToolCatalog) -> ToolCard:
        info = catalog.find(call.name)
        return cls(call, info.server, info.name) if info else cls(call)

    @property
    def known(self) -> bool:
        return bool(self.server)

    @property
    def model_text(self) -> str:
        """What the model is told about this call: templates expect an answer to every call,
        even one that never ran (the app quit while it waited)."""
        if self.result is not None:
            return self.result.text
        return unknown_tool(self.call.name).text if not self.known else "The call was not run."

    def tool_message(self) -> dict[str, Any]:
        """The `tool` message for the template (see formats.tool_turn)."""
        return tool_turn(self.call, self.model_text)

    def decided(self, decision: Decision) -> ToolCard:
        return replace(self, decision=decision, state="running" if decision != "deny" else "done")

    def finished(self, result: ToolResult) -> ToolCard:
        return replace(self, state="done", result=result)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": self.call.id, "function": self.call.name, "arguments": dict(self.call.arguments),
            "server": self.server, "tool": self.tool, "state": self.state}
        if self.decision:
            data["decision"] = self.decision
        if self.result:
            data["result"] = {"status": self.result.status, "text": self.result.text,
                              "detail": self.result.detail}
        return data

    @classmethod
    def from_json(cls, data: object) -> ToolCard | None:
        """None for a record that is not a card. A card stored while it awaited approval or
        ran (the app quit) reads as done without a result: it will not run again."""
        if not isinstance(data, Mapping) or not isinstance(data.get("function"), str):
            return None
        args = data.get("arguments")
        call = ToolCall(data["function"], args if isinstance(args, dict) else {},
                        str(data.get("id") or ""))
        result = _result(data.get("result"))
        decision = data.get("decision")
        return cls(call, _text(data.get("server")), _text(data.get("tool")), "done",
                   cast(Decision, decision) if decision in DECISIONS else None, result)


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _result(data: object) -> ToolResult | None:
    if not isinstance(data, Mapping) or data.get("status") not in _STATUSES:
        return None
    status = cast(ToolStatus, data["status"])
    return ToolResult(status, _text(data.get("text")), _text(data.get("detail")))
