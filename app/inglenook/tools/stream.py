"""One object that splits a streamed reply into reasoning, answer text and tool calls.

The order matters and differs by format. With think tags (`<think>`, `[THINK]`) a call is
part of the answer, and a `<tool_call>` the model muses about while thinking is not one: the
reasoning splitter goes first and only the answer is searched for calls. gpt-oss names a
call's recipient in the message header, which the reasoning splitter consumes: there the tool
parser goes first and passes every other header on to the splitter untouched.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from inglenook.core.reasoning import ReasoningFormat, ReasoningSplitter
from inglenook.tools.formats import ToolFormat
from inglenook.tools.parsers import make_parser
from inglenook.tools.parsing import CallMalformed, CallParsed, CallStarted, ParseEvent, TextDelta


@dataclass(frozen=True)
class ReasoningDelta:
    text: str


ReplyEvent = ReasoningDelta | TextDelta | CallStarted | CallParsed | CallMalformed
_AnswerTo = Callable[[str], list[ParseEvent]] | None  # where answer text goes next


class ReplyStream:
    """feed(delta) / flush() → events in reply order. Either format may be None."""

    def __init__(self, reasoning: ReasoningFormat | None, tools: ToolFormat | None) -> None:
        self._splitter = ReasoningSplitter(reasoning) if reasoning else None
        self._parser = make_parser(tools) if tools else None
        self._tools_first = tools == "harmony" or (reasoning is not None
                                                   and reasoning.kind == "channels")

    def feed(self, text: str) -> list[ReplyEvent]:
        if self._parser is None:
            return self._split(text)
        if self._tools_first:
            return self._through_splitter(self._parser.feed(text))
        return self._split(text, self._parser.feed)

    def flush(self) -> list[ReplyEvent]:
        if self._parser is None:
            return self._split_flush()
        if self._tools_first:
            events = self._through_splitter(self._parser.flush())
            return events + self._split_flush()
        events = self._split_flush(self._parser.feed)
        return events + list(self._parser.flush())

    def _split(self, text: str, answer_to: _AnswerTo = None) -> list[ReplyEvent]:
        if self._splitter is None:
            reasoning, answer = "", text
        else:
            reasoning, answer = self._splitter.feed(text)
        return self._out(reasoning, answer, answer_to)

    def _split_flush(self, answer_to: _AnswerTo = None) -> list[ReplyEvent]:
        if self._splitter is None:
            return []
        reasoning, answer = self._splitter.flush()
        return self._out(reasoning, answer, answer_to)

    @staticmethod
    def _out(reasoning: str, answer: str, answer_to: _AnswerTo) -> list[ReplyEvent]:
        events: list[ReplyEvent] = [ReasoningDelta(reasoning)] if reasoning else []
        if answer and answer_to is not None:
            events += answer_to(answer)
        elif answer:
            events.append(TextDelta(answer))
        return events

    def _through_splitter(self, parsed: list[ParseEvent]) -> list[ReplyEvent]:
        events: list[ReplyEvent] = []
        for event in parsed:
            if isinstance(event, TextDelta):
                events += self._split(event.text)
            else:
                events.append(event)
        return events
