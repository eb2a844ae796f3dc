"""Which tools a chat may use and which run without asking: data kept with the chat.

A tool runs only after the user approves its call: once, or always for this tool in this chat
(never across chats: a tool trusted for one task is not trusted for every task). A chat turns
servers on by name; a server switched off in mcp.json stays off whatever a chat says.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from inglenook.tools.results import ToolResult, denied

Decision = Literal["once", "always", "deny"]
DECISIONS: tuple[Decision, ...] = ("once", "always", "deny")


@dataclass(frozen=True)
class ChatToolPolicy:
    enabled_servers: frozenset[str] = frozenset()
    always_allowed: frozenset[tuple[str, str]] = field(default_factory=frozenset)  # (server, tool)

    def uses(self, server: str) -> bool:
        return server in self.enabled_servers

    def needs_approval(self, server: str, tool: str) -> bool:
        return (server, tool) not in self.always_allowed

    def with_server(self, server: str, enabled: bool) -> ChatToolPolicy:
        servers = self.enabled_servers | {server} if enabled else self.enabled_servers - {server}
        return replace(self, enabled_servers=frozenset(servers))

    def decide(self, server: str, tool: str, decision: Decision) -> ChatToolPolicy:
        """The policy after the user answered a call's approval ("always" remembers it)."""
        if decision not in DECISIONS:
            raise ValueError(f"Unknown decision {decision!r}.")
        if decision != "always":
            return self
        return replace(self, always_allowed=self.always_allowed | {(server, tool)})

    def forget(self, server: str, tool: str) -> ChatToolPolicy:
        """Ask again for this tool from now on."""
        return replace(self, always_allowed=self.always_allowed - {(server, tool)})

    def to_json(self) -> dict[str, Any]:
        return {"servers": sorted(self.enabled_servers),
                "always": [{"server": s, "tool": t} for s, t in sorted(self.always_allowed)]}

    @classmethod
    def from_json(cls, data: object) -> ChatToolPolicy:
        """Leniently: what is not understood is dropped, so a damaged record asks the user
        again rather than allowing anything."""
        if not isinstance(data, Mapping):
            return cls()
        pairs = [(a.get("server"), a.get("tool")) for a in _items(data.get("always"))]
        always = {(s, t) for s, t in pairs if isinstance(s, str) and isinstance(t, str)}
        return cls(frozenset(_strings(data.get("servers"))), frozenset(always))


def _strings(value: object) -> Iterable[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _items(value: object) -> Iterable[Mapping[str, object]]:
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


def result_of_decision(decision: Decision) -> ToolResult | None:
    """The result a refused call gets instead of running (None: run it)."""
    return denied() if decision == "deny" else None
