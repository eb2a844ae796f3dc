"""Chat messages and the requests that carry them to the engine."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from inglenook.core.sampling import SamplingParams

Role = Literal["system", "user", "assistant", "tool"]
ROLES: tuple[Role, ...] = ("system", "user", "assistant", "tool")
# What to leave out when a conversation outgrows the context (see core/context.py).
OverflowPolicy = Literal["stop", "middle", "rolling"]
OVERFLOW_POLICIES: tuple[OverflowPolicy, ...] = ("stop", "middle", "rolling")
DEFAULT_OVERFLOW: OverflowPolicy = "middle"


@dataclass(frozen=True)
class Message:
    """One turn. The role is one of ROLES and nothing else: templates branch on it and print it
    between control tokens, so a free-form role would be a way to write markup."""

    role: Role
    content: str

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"Unknown message role {self.role!r} (one of {', '.join(ROLES)}).")
        if not isinstance(self.content, str):
            raise TypeError(f"A message's content must be text, not {type(self.content).__name__}.")


@dataclass(frozen=True)
class GenerationRequest:
    """One reply to generate. `messages` is the whole conversation the model should see.

    `conversation` names the conversation (the window: its scheduler owner, "chat:12"), so the
    engine keeps its KV-cache state when another conversation runs and restores it when this
    one continues; "" keeps none. `overflow` is what to leave out when it outgrows the context:
    "stop" (nothing: the reply fails with a message), "middle" (the oldest turns after the
    system prompt and the first exchange, unless that takes over half the room) or "rolling"
    (the oldest turns after the system prompt); anything else is read as the default."""

    request_id: int
    messages: tuple[Message, ...]
    sampling: SamplingParams = field(default_factory=SamplingParams)
    conversation: str = ""
    overflow: OverflowPolicy = DEFAULT_OVERFLOW


def build_messages(system_prompt: str, turns: list[Message]) -> tuple[Message, ...]:
    """The conversation as sent to the model: the system prompt (if any) first."""
    head = (Message("system", system_prompt),) if system_prompt.strip() else ()
    return head + tuple(turns)
