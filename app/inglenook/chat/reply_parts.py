"""A reply as it streams, told apart: what the model thought, what it answers, which tools it
calls, and when it started and stopped thinking ("Thought for N s").

Qt-free. The formats come from the model's chat template (ModelInfo.traits, tool_format); tool
calls are looked for only when the chat offered tools, so a model that writes `<tool_call>`
unasked is read as text.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from inglenook.core.reasoning import ReasoningFormat
from inglenook.tools.cards import ToolCard
from inglenook.tools.catalog import ToolCatalog
from inglenook.tools.formats import TOOL_FORMATS, ToolCall
from inglenook.tools.parsing import CallMalformed, CallParsed, CallStarted, TextDelta
from inglenook.tools.results import ToolResult
from inglenook.tools.stream import ReasoningDelta, ReplyEvent, ReplyStream


def unreadable_call(name: str, raw: str, error: str) -> ToolCard:
    """A call the model wrote but we cannot read: never run; the model is told why."""
    result = ToolResult("error", f"The call could not be read ({error}). Write it again in "
                                 "the format the tool instructions give.", detail=raw)
    return ToolCard(ToolCall(name or "unknown"), state="done", result=result)


class ReplyParts:
    def __init__(self, reasoning: ReasoningFormat | None = None, tool_format: str = "",
                 catalog: ToolCatalog | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        offered = catalog is not None and len(catalog) > 0
        fmt = next((f for f in TOOL_FORMATS if f == tool_format), None) if offered else None
        self._stream = ReplyStream(reasoning, fmt)
        self._catalog = catalog or ToolCatalog(())
        self._clock = clock
        self._call_name = ""
        self.reasoning = ""
        self.answer = ""
        self.cards: list[ToolCard] = []
        self.calling = False  # the model is writing a call: its card comes when it ends
        self.reasoning_started_at: float | None = None  # seconds since 1970
        self.reasoning_ended_at: float | None = None

    @property
    def thinking(self) -> bool:
        return self.reasoning_started_at is not None and self.reasoning_ended_at is None

    def feed(self, text: str) -> None:
        self._take(self._stream.feed(text))

    def finish(self) -> None:
        """The reply ended: what was held back, and the end of its thinking."""
        self._take(self._stream.flush())
        self._stop_thinking()
        self.reasoning = self.reasoning.strip()
        if self.cards:  # the text around the calls: what stood between them is gone
            self.answer = self.answer.strip()

    def _stop_thinking(self) -> None:
        if self.thinking:
            self.reasoning_ended_at = self._clock()

    def _take(self, events: list[ReplyEvent]) -> None:
        for event in events:
            if isinstance(event, ReasoningDelta):
                if self.reasoning_started_at is None:
                    self.reasoning_started_at = self._clock()
                # The newline after <think> is not a thought.
                self.reasoning += event.text if self.reasoning else event.text.lstrip()
            elif isinstance(event, TextDelta):
                if event.text.strip():
                    self._stop_thinking()
                self.answer += event.text
            elif isinstance(event, CallStarted):
                self._stop_thinking()
                self.calling, self._call_name = True, event.name
            elif isinstance(event, CallParsed):
                self.calling = False
                self.cards += [ToolCard.for_call(c, self._catalog) for c in event.calls]
            elif isinstance(event, CallMalformed):
                self.calling = False
                self.cards.append(unreadable_call(self._call_name, event.raw, event.error))
