"""The tool calls of one reply, from the end of the reply until each has its answer.

Qt-free. A call runs only once the user approved it (once, or always for that tool in that
chat: ChatToolPolicy); a denied call, one the user stopped, and one naming a tool the chat does
not have are answered without running. When every card is done, their results go back to the
model as `tool` messages and it continues (ChatSession.begin_reply(continuing=True)).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from inglenook.core.messages import Message, ToolCallTurn
from inglenook.tools.approval import ChatToolPolicy, Decision
from inglenook.tools.cards import ToolCard
from inglenook.tools.catalog import ToolCatalog
from inglenook.tools.results import ToolResult, denied, unknown_tool

STOPPED = ToolResult("denied", "The user stopped before this call ran.")
MAX_TOOL_ROUNDS = 10  # replies in a row that call tools before the chat waits for the user


@dataclass
class ToolRound:
    message_id: int  # the reply that made the calls
    cards: list[ToolCard]
    catalog: ToolCatalog = field(default_factory=lambda: ToolCatalog(()))

    @classmethod
    def after_reply(cls, message_id: int, cards: Sequence[ToolCard], ran_to_end: bool,
                    catalog: ToolCatalog | None = None) -> ToolRound:
        """The cards of a reply that ended: a call to a tool the chat does not have is answered
        at once; calls of a reply that was stopped or failed never run."""
        settled = [c.finished(unknown_tool(c.call.name)) if c.state == "awaiting"
                   and not c.known else c for c in cards]
        if not ran_to_end:
            settled = [replace(c, state="done") for c in settled]
        return cls(message_id, settled, catalog or ToolCatalog(()))

    @property
    def done(self) -> bool:
        return all(c.state == "done" for c in self.cards)

    def awaiting(self) -> list[int]:
        return [i for i, c in enumerate(self.cards) if c.state == "awaiting"]

    def allowed(self, policy: ChatToolPolicy) -> list[int]:
        """Cards awaiting approval that the chat allows without asking."""
        return [i for i in self.awaiting()
                if not policy.needs_approval(self.cards[i].server, self.cards[i].tool)]

    def decide(self, index: int, decision: Decision) -> ToolCard:
        card = self.cards[index].decided(decision)
        if decision == "deny":
            card = card.finished(denied())
        self.cards[index] = card
        return card

    def finished(self, index: int, result: ToolResult) -> None:
        self.cards[index] = self.cards[index].finished(result)

    def stop(self) -> None:
        """The user stopped: what has not run is answered so, and never runs."""
        self.cards = [c if c.state == "done" else c.finished(STOPPED) for c in self.cards]


def as_turns(content: str, reasoning: str, cards: Sequence[ToolCard]) -> list[Message]:
    """A reply that called tools, as the template reads it: the assistant turn with its calls,
    then one `tool` message per call."""
    calls = tuple(ToolCallTurn(c.call.id, c.call.name,
                               json.dumps(dict(c.call.arguments), ensure_ascii=False))
                  for c in cards)
    return [Message("assistant", content, reasoning, calls),
            *(Message("tool", c.model_text, tool_call_id=c.call.id, name=c.call.name)
              for c in cards)]

