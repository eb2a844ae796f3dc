"""One choice of an API reply told apart as it streams: reasoning, answer text, tool calls.

The same splitter and tool-call parsers the window reads replies with (tools/stream.py), from
the model's chat template traits. Calls are looked for only when the request offered tools; a
call the parser cannot read comes back as text, as the model wrote it, so nothing is lost,
except a call the token limit cut: that is the template's markup half written, never an
answer, and the reply says "length" (a forced call with a small max_tokens).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from inglenook.core.load import ModelInfo
from inglenook.core.replies import TokenLogprob
from inglenook.tools.formats import TOOL_FORMATS, ToolCall
from inglenook.tools.parsing import CallMalformed, CallParsed, TextDelta
from inglenook.tools.stream import ReasoningDelta, ReplyEvent, ReplyStream

ReaderEvent = ReasoningDelta | TextDelta | CallParsed


@dataclass
class Choice:
    """What one choice said, whole."""

    text: str = ""
    reasoning: str = ""
    calls: list[ToolCall] = field(default_factory=list)
    finish: str = ""  # the engine's reason: "stop" or "length"
    stop: str = ""  # the client's stop string that ended it, if one did
    logprobs: list[TokenLogprob] | None = None  # None: not asked for


class ChoiceReader:
    def __init__(self, info: ModelInfo | None, tools_offered: bool, parallel: bool = True,
                 split: bool = True, logprobs: bool = False) -> None:
        """`split`: reasoning told apart from the answer (off for raw completions)."""
        reasoning = info.traits.reasoning if info is not None and split else None
        fmt = info.tool_format if info is not None and tools_offered else ""
        tools = next((f for f in TOOL_FORMATS if f == fmt), None)
        self._stream = ReplyStream(reasoning, tools)
        self._parallel = parallel
        self.choice = Choice(logprobs=[] if logprobs else None)

    def feed(self, text: str) -> list[ReaderEvent]:
        return self._take(self._stream.feed(text))

    def flush(self, finish: str = "") -> list[ReaderEvent]:
        """The end of the choice; `finish` "length": a call left open was cut, not said."""
        events = self._stream.flush()
        if finish == "length":
            events = [e for e in events if not isinstance(e, CallMalformed)]
        return self._take(events)

    def _take(self, events: list[ReplyEvent]) -> list[ReaderEvent]:
        out: list[ReaderEvent] = []
        c = self.choice
        for event in events:
            if isinstance(event, ReasoningDelta):
                text = event.text if c.reasoning else event.text.lstrip()
                if text:
                    c.reasoning += text
                    out.append(ReasoningDelta(text))
            elif isinstance(event, TextDelta):
                c.text += event.text
                out.append(event)
            elif isinstance(event, CallParsed):
                calls = event.calls if self._parallel else event.calls[:max(0, 1 - len(c.calls))]
                if calls:
                    c.calls += calls
                    out.append(CallParsed(tuple(calls), event.raw))
            elif isinstance(event, CallMalformed) and event.raw:
                c.text += event.raw
                out.append(TextDelta(event.raw))
        return out
