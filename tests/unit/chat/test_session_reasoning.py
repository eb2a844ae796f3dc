"""A thinking model's reply in a chat session: reasoning and answer split as they stream, for
every format, saved apart (in batches) with when the model started and stopped thinking; the
next prompt gets earlier reasoning only where the template reads it back, and says which; the
thinking switch and effort go to templates that read them, and are kept with the chat."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from inglenook.chat.session import ChatSession, ChatSettings, ReplyOptions
from inglenook.core.reasoning import ReasoningFormat, TemplateTraits
from inglenook.core.replies import Finish
from inglenook.store import Store

THINK = TemplateTraits(ReasoningFormat("think"), thinking_switch=True, reads_reasoning=True)
OPENED = TemplateTraits(ReasoningFormat("think", starts_open=True))
BRACKET = TemplateTraits(ReasoningFormat("bracket"))
CHANNELS = TemplateTraits(ReasoningFormat("channels"), effort=True)


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store(tmp_path / "test.db") as s:
        yield s


def session_on(store: Store, settings: ChatSettings | None = None
               ) -> tuple[ChatSession, Clock, Clock]:
    """A session with a question asked; its save clock and its wall clock."""
    ticks, wall = Clock(0.0), Clock(1_700_000_000.0)
    session = ChatSession(store, settings, clock=ticks)
    session.wall_clock = wall
    session.add_user("How many r's in strawberry?")
    return session, ticks, wall


@pytest.mark.parametrize(("traits", "pieces"), [
    (THINK, ["<think>\nSpell it: s-t-r", "-a-w.</th", "ink>\n\nThree."]),
    (OPENED, ["Spell it: s-t-r", "-a-w.\n</think>", "\n\nThree."]),
    (BRACKET, ["[THINK]Spell it: s-t-r", "-a-w.[/THI", "NK]Three."]),
    (CHANNELS, ["<|channel|>analysis<|message|>Spell it: s-t-r", "-a-w.<|end|><|start|>assi",
                "stant<|channel|>final<|message|>Three.<|return|>"]),
])
def test_reasoning_and_answer_are_split_and_saved_apart_for_every_format(
        store: Store, traits: TemplateTraits, pieces: list[str]) -> None:
    session, ticks, wall = session_on(store)
    session.begin_reply(1, ReplyOptions(traits))
    for piece in pieces:
        wall.now += 2.0
        ticks.now += 1.0  # every delta is saved
        session.reply_delta(piece)
        stored = store.active_path(session.conv_id)[-1]  # type: ignore[arg-type]
        assert "think" not in (stored.content + stored.reasoning).casefold()
        assert "<|" not in stored.content + stored.reasoning
        assert bool(stored.reasoning) == bool(stored.provenance.reasoning_started_at)
    assert session.reply is not None and session.reply.reasoning.startswith("Spell it")
    message = session.finish_reply(Finish("stop"), None)
    assert message is not None
    assert (message.reasoning, message.content) == ("Spell it: s-t-r-a-w.", "Three.")
    assert message.provenance.thinking_s == 4.0  # from the first delta to the answer's


def test_a_reply_stopped_while_thinking_keeps_its_reasoning_and_its_time(store: Store) -> None:
    session, _, wall = session_on(store)
    session.begin_reply(1, ReplyOptions(THINK))
    session.reply_delta("<think>Let me count")
    wall.now += 5.0
    message = session.finish_reply(Finish("cancelled"), None)
    assert message is not None
    assert (message.reasoning, message.content) == ("Let me count", "")
    assert message.provenance.thinking_s == 5.0
    assert session.turns() == []  # no answer: left out with its question, as before


def test_a_model_without_a_reasoning_format_keeps_its_text_as_written(store: Store) -> None:
    session, _, _ = session_on(store)
    session.begin_reply(1)
    session.reply_delta("<think>x</think>Done.")
    message = session.finish_reply(Finish("stop"), None)
    assert message is not None and (message.reasoning, message.content) == (
        "", "<think>x</think>Done.")


def reasoned_then_asked(store: Store, traits: TemplateTraits) -> ChatSession:
    session, _, _ = session_on(store)
    session.begin_reply(1, ReplyOptions(traits))
    session.reply_delta("<think>Spell it.</think>Three.")
    session.finish_reply(Finish("stop"), None)
    session.add_user("And in raspberry?")
    return session


def test_earlier_reasoning_goes_back_only_where_the_template_reads_it(store: Store) -> None:
    reads = reasoned_then_asked(store, THINK)
    request = reads.begin_reply(2, ReplyOptions(THINK))
    assert request is not None
    assert [(m.role, m.content, m.reasoning) for m in request.messages[1:]] == [
        ("user", "How many r's in strawberry?", ""), ("assistant", "Three.", "Spell it."),
        ("user", "And in raspberry?", "")]
    assert reads.finish_reply(Finish("stop"), None).provenance.history_reasoning == "sent"  # type: ignore[union-attr]
    strips = reasoned_then_asked(store, TemplateTraits(ReasoningFormat("think")))
    request = strips.begin_reply(2, ReplyOptions(TemplateTraits(ReasoningFormat("think"))))
    assert request is not None and all(not m.reasoning for m in request.messages)
    message = strips.finish_reply(Finish("stop"), None)
    assert message is not None and message.provenance.history_reasoning == "left out"
    rows = dict(message.provenance.describe())
    assert rows["Earlier reasoning"].startswith("left out of the prompt")


def test_the_thinking_switch_and_effort_reach_only_templates_that_read_them(
        store: Store) -> None:
    settings = ChatSettings(thinking=False, reasoning_effort="high")
    session, _, _ = session_on(store, settings)
    request = session.begin_reply(1, ReplyOptions(THINK))
    assert request is not None
    assert (request.enable_thinking, request.reasoning_effort) == (False, "")
    message = session.finish_reply(Finish("stop"), None)
    assert message is not None and dict(message.provenance.describe())["Thinking"] == "off"
    request = session.begin_reply(2, ReplyOptions(CHANNELS))
    assert request is not None
    assert (request.enable_thinking, request.reasoning_effort) == (None, "high")
    session.finish_reply(Finish("stop"), None)
    request = session.begin_reply(3)  # a template with neither
    assert request is not None and (request.enable_thinking, request.reasoning_effort) == (
        None, "")


def test_the_switch_and_effort_are_kept_with_the_chat(store: Store) -> None:
    session, _, _ = session_on(store, ChatSettings(thinking=False, reasoning_effort="low"))
    reopened = ChatSession.open(store, session.conv_id, [], ChatSettings())  # type: ignore[arg-type]
    assert (reopened.settings.thinking, reopened.settings.reasoning_effort) == (False, "low")
    values = ChatSettings().to_dict()
    assert "thinking" not in values and "reasoning_effort" not in values  # as before
    broken = ChatSettings.stored(None, {"thinking": "yes", "reasoning_effort": "max"}, [],
                                 ChatSettings())
    assert (broken.thinking, broken.reasoning_effort) == (None, "")
