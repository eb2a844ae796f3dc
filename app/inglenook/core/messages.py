"""Chat messages and the requests that carry them to the engine."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from inglenook.core.sampling import SamplingParams

Role = Literal["system", "user", "assistant"]


@dataclass(frozen=True)
class Message:
    role: Role
    content: str


@dataclass(frozen=True)
class GenerationRequest:
    """One reply to generate. `messages` is the whole conversation the model should see."""

    request_id: int
    messages: tuple[Message, ...]
    sampling: SamplingParams = field(default_factory=SamplingParams)


def build_messages(system_prompt: str, turns: list[Message]) -> tuple[Message, ...]:
    """The conversation as sent to the model: the system prompt (if any) first."""
    head = (Message("system", system_prompt),) if system_prompt.strip() else ()
    return head + tuple(turns)
