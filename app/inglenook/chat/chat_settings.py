"""What one chat is answered with, kept with the chat (store: conversations.settings)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from inglenook.core.messages import (
    DEFAULT_OVERFLOW,
    JSON_OBJECT,
    OVERFLOW_POLICIES,
    OverflowPolicy,
)
from inglenook.core.sampling import SamplingParams
from inglenook.core.settings import DEFAULT_SYSTEM_PROMPT
from inglenook.store import Preset
from inglenook.tools.approval import ChatToolPolicy

EFFORTS = ("low", "medium", "high")  # gpt-oss's reasoning_effort values
MAX_SCHEMA = 64 * 1024  # characters of a chat's reply schema
MAX_MODEL_PATH = 4096


@dataclass(frozen=True)
class ChatSettings:
    """What one chat is answered with. `preset` names the preset the values came from; None
    once the user edited them by hand (shown as "Custom"). `thinking` and `reasoning_effort`
    are sent to templates that read them (None, "": the template's own default); `tools`
    says which tool servers the chat uses and which tools run without asking; `knowledge`
    names the collections its replies search (chat/knowledge_turn.py). `reply_json`: replies
    are JSON, matching `reply_schema` when it is set (the text as typed, kept even when it is
    not a schema yet: the reply then fails with the reason, and nothing typed is lost).
    `model`: the path of the model the chat was last answered with ("": none yet; see
    chat/chat_model.py)."""

    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    sampling: SamplingParams = field(default_factory=SamplingParams)
    preset: str | None = None
    overflow: OverflowPolicy = DEFAULT_OVERFLOW  # what to leave out when the context is full
    thinking: bool | None = None
    reasoning_effort: str = ""
    tools: ChatToolPolicy = field(default_factory=ChatToolPolicy)
    knowledge: tuple[str, ...] = ()
    reply_json: bool = False
    reply_schema: str = ""
    model: str = ""

    @property
    def reply_format(self) -> str:
        """GenerationRequest.reply_format: "" free text, JSON_OBJECT, or the schema."""
        if not self.reply_json:
            return ""
        return self.reply_schema.strip() or JSON_OBJECT

    def replace(self, **changes: Any) -> ChatSettings:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        data: dict[str, object] = {"system_prompt": self.system_prompt,
                                   "sampling": self.sampling.to_dict(),
                                   "overflow": self.overflow}
        if self.thinking is not None:
            data["thinking"] = self.thinking
        if self.reasoning_effort:
            data["reasoning_effort"] = self.reasoning_effort
        if self.tools != ChatToolPolicy():
            data["tools"] = self.tools.to_json()
        if self.knowledge:
            data["knowledge"] = list(self.knowledge)
        if self.reply_json:
            data["reply_json"] = True
        if self.reply_schema:
            data["reply_schema"] = self.reply_schema
        if self.model:
            data["model"] = self.model
        return data

    @classmethod
    def of_preset(cls, preset: Preset) -> ChatSettings:
        return cls(preset.system_prompt, preset.sampling, preset.name)  # overflow: default

    @classmethod
    def stored(cls, preset: str | None, values: dict | None, presets: Sequence[Preset],
               fallback: ChatSettings) -> ChatSettings:
        """A chat's settings as the store holds them: its own values when it has them, else
        its preset's (chats from before v2), else `fallback` (the defaults for new chats)."""
        if isinstance(values, dict):
            prompt = values.get("system_prompt")
            sampling = values.get("sampling")
            overflow = values.get("overflow")
            thinking, effort = values.get("thinking"), values.get("reasoning_effort")
            knowledge = values.get("knowledge")
            schema = values.get("reply_schema")
            model = values.get("model")
            return cls(prompt if isinstance(prompt, str) else fallback.system_prompt,
                       SamplingParams.from_dict(sampling) if isinstance(sampling, dict)
                       else fallback.sampling, preset,
                       overflow if overflow in OVERFLOW_POLICIES else fallback.overflow,
                       thinking if isinstance(thinking, bool) else None,
                       effort if effort in EFFORTS else "",
                       ChatToolPolicy.from_json(values.get("tools")),
                       tuple(k for k in knowledge if isinstance(k, str))
                       if isinstance(knowledge, list) else (),
                       reply_json=values.get("reply_json") is True,
                       reply_schema=schema[:MAX_SCHEMA] if isinstance(schema, str) else "",
                       model=model[:MAX_MODEL_PATH] if isinstance(model, str) else "")
        named = next((p for p in presets if preset and p.name.casefold() == preset.casefold()),
                     None)
        if named is None:
            return fallback
        return cls.of_preset(named).replace(overflow=fallback.overflow)

    def matching_preset(self, presets: Sequence[Preset]) -> str | None:
        """The preset whose values these are, if any (values typed back by hand count)."""
        if self.preset and any(p.name == self.preset for p in presets):
            return self.preset
        return next((p.name for p in presets if p.sampling == self.sampling
                     and p.system_prompt == self.system_prompt), None)
