"""Reasoning models think before they answer: telling the thinking from the answer.

How a model marks its reasoning is read from its chat template, never guessed from its name:
  think     `<think>…</think>` (DeepSeek-R1 distills, Qwen3, QwQ…); some templates open the tag
            themselves at the end of the generation prompt, so the reply starts inside it and
            only `</think>` is written (`starts_open`).
  bracket   `[THINK]…[/THINK]` (Magistral).
  channels  gpt-oss's harmony format: `<|channel|>analysis<|message|>…<|end|>` then
            `<|start|>assistant<|channel|>final<|message|>…` (the markers are control tokens;
            the engine passes their text through for such models).
Qt-free; ReasoningSplitter works on streamed text (a marker may arrive split over deltas).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

ReasoningKind = Literal["think", "bracket", "channels"]
_CHANNEL = re.compile(r"<\|channel\|>([a-z_]+)(?: to=[^<]*)?(?:<\|constrain\|>[^<]*)?<\|message\|>")
# Harmony markup that is neither reasoning nor answer: a header's role (up to the next marker)
# and the ends of messages.
_CHANNEL_NOISE = re.compile(r"<\|start\|>[^<]*(?=<)|<\|end\|>|<\|return\|>|<\|call\|>")
_CHANNEL_MARKERS = ("<|channel|>", "<|start|>", "<|end|>", "<|return|>", "<|call|>")


@dataclass(frozen=True)
class ReasoningFormat:
    kind: ReasoningKind
    starts_open: bool = False  # the generation prompt already opened the reasoning block

    @property
    def open(self) -> str:
        return {"think": "<think>", "bracket": "[THINK]", "channels": ""}[self.kind]

    @property
    def close(self) -> str:
        return {"think": "</think>", "bracket": "[/THINK]", "channels": ""}[self.kind]


@dataclass(frozen=True)
class TemplateTraits:
    """What a chat template does with reasoning."""

    reasoning: ReasoningFormat | None = None
    thinking_switch: bool = False  # reads `enable_thinking`: thinking can be turned off
    effort: bool = False  # reads `reasoning_effort` (gpt-oss: low / medium / high)
    reads_reasoning: bool = False  # writes earlier replies' `reasoning_content` back


def traits_of(source: str, generation_prompt: str = "") -> TemplateTraits:
    """From the template's source and the tail it renders for `add_generation_prompt` (what
    comes after the last user message): which reasoning format, and which switches."""
    reasoning: ReasoningFormat | None = None
    if "<|channel|>" in source:
        reasoning = ReasoningFormat("channels")
    elif "[THINK]" in source:
        reasoning = ReasoningFormat("bracket", _opened(generation_prompt, "[THINK]", "[/THINK]"))
    elif "<think>" in source or "</think>" in source:
        reasoning = ReasoningFormat("think", _opened(generation_prompt, "<think>", "</think>"))
    return TemplateTraits(reasoning, thinking_switch="enable_thinking" in source,
                          effort="reasoning_effort" in source,
                          reads_reasoning="reasoning_content" in source)


def _opened(tail: str, open_tag: str, close_tag: str) -> bool:
    """Whether the generation prompt leaves a reasoning block open for the model to fill."""
    return tail.rfind(open_tag) > tail.rfind(close_tag)


class ReasoningSplitter:
    """Splits a streamed reply into (reasoning, answer) deltas. Text that may be the start of
    a marker is held back until the next delta says. Only a reply that opens with a reasoning
    block has one: a tag the answer mentions later is answer text."""

    def __init__(self, fmt: ReasoningFormat) -> None:
        self.fmt = fmt
        self.in_reasoning = fmt.starts_open
        self.seen_reasoning = fmt.starts_open
        self._answering = False  # answer text has begun: no reasoning block can open now
        self._trim = False  # drop the whitespace between a reasoning block and the answer
        self._held = ""

    def feed(self, text: str) -> tuple[str, str]:
        buffer, self._held = self._held + text, ""
        reasoning: list[str] = []
        answer: list[str] = []
        while buffer:
            was_reasoning = self.in_reasoning
            step = (self._channel_step(buffer) if self.fmt.kind == "channels"
                    else self._tag_step(buffer))
            if step is None:
                keep = self._partial(buffer)
                buffer, self._held = buffer[:len(buffer) - keep], buffer[len(buffer) - keep:]
                step = (buffer, "")
            before, buffer = step
            if self._trim and not was_reasoning:
                before = before.lstrip()
                self._trim = not before
            if before:
                (reasoning if was_reasoning else answer).append(before)
                self._answering = self._answering or (not was_reasoning and bool(before.strip()))
        return "".join(reasoning), "".join(answer)

    def flush(self) -> tuple[str, str]:
        held, self._held = self._held, ""
        return (held, "") if self.in_reasoning else ("", held)

    def _tag_step(self, buffer: str) -> tuple[str, str] | None:
        """(text before a complete tag, text after it), or None: no complete tag in buffer."""
        if self.in_reasoning:
            at = buffer.find(self.fmt.close)
            if at < 0:
                return None
            self.in_reasoning = False
            self._trim = True
            return buffer[:at], buffer[at + len(self.fmt.close):]
        if self._answering:
            return buffer, ""
        stripped = buffer.lstrip()
        if stripped.startswith(self.fmt.open):
            self.in_reasoning = self.seen_reasoning = True
            return "", stripped[len(self.fmt.open):]
        if not stripped or self.fmt.open.startswith(stripped):
            return None  # whitespace, or the tag arriving piece by piece
        return buffer, ""

    def _channel_step(self, buffer: str) -> tuple[str, str] | None:
        channel = _CHANNEL.search(buffer)
        noise = _CHANNEL_NOISE.search(buffer)
        if channel is not None and (noise is None or channel.start() <= noise.start()):
            self.in_reasoning = channel.group(1) == "analysis"
            self.seen_reasoning = self.seen_reasoning or self.in_reasoning
            return buffer[:channel.start()], buffer[channel.end():]
        if noise is not None:
            return buffer[:noise.start()], buffer[noise.end():]
        return None

    def _partial(self, buffer: str) -> int:
        """How much of the end of `buffer` could still grow into a marker."""
        if self.fmt.kind == "channels":
            header = max(buffer.rfind("<|channel|>"), buffer.rfind("<|start|>"))
            if header >= 0:  # an unfinished header
                return len(buffer) - header
            markers: tuple[str, ...] = _CHANNEL_MARKERS
        elif self.in_reasoning:
            markers = (self.fmt.close,)
        elif not self._answering:
            stripped = buffer.lstrip()
            return len(buffer) if self.fmt.open.startswith(stripped) else 0
        else:
            return 0
        return max((n for m in markers for n in range(min(len(m) - 1, len(buffer)), 0, -1)
                    if buffer.endswith(m[:n])), default=0)


def split_reasoning(text: str, fmt: ReasoningFormat | None = None) -> tuple[str, str]:
    """A whole reply as (reasoning, answer): for imported or older messages whose text opens
    with a reasoning block (`<think>` when the format is unknown)."""
    splitter = ReasoningSplitter(fmt or ReasoningFormat("think"))
    reasoning, answer = splitter.feed(text)
    tail_reasoning, tail_answer = splitter.flush()
    reasoning, answer = reasoning + tail_reasoning, answer + tail_answer
    if splitter.in_reasoning and not (fmt and fmt.starts_open):
        return "", text  # an opening tag never closed: not a reasoning block after all
    return reasoning.strip(), answer.strip() if reasoning else answer


class ReasoningCount:
    """Counts a reply's tokens that are reasoning, fed each token's text as it is generated:
    those of a leading think block (its tags included), opened by the model or by the
    generation prompt (`starts_open`). gpt-oss's channels are not counted here (0)."""

    def __init__(self, fmt: ReasoningFormat | None, thinking: bool | None = None) -> None:
        self._fmt = fmt if fmt is not None and fmt.kind != "channels" else None
        self.count = 0
        self._inside = self._fmt is not None and fmt is not None and fmt.starts_open \
            and thinking is not False
        self._done = self._fmt is None
        self._seen = ""
        self._pending = 0  # tokens that may be the opening tag's start

    def feed(self, piece: str) -> None:
        fmt = self._fmt
        if self._done or fmt is None:
            return
        self._seen += piece
        if self._inside:
            self.count += 1
            if fmt.close in self._seen:
                self._done = True
            self._seen = self._seen[-len(fmt.close):]
            return
        head = self._seen.lstrip()
        if head.startswith(fmt.open):
            self._inside, self.count = True, self._pending + 1
            self._seen = head[len(fmt.open):]
            if fmt.close in self._seen:
                self._done = True
        elif fmt.open.startswith(head):
            self._pending += 1
        else:
            self._done = True
