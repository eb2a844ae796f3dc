"""Tool calls in a chat session: the chat's tools offered in the request, calls read from the
reply as cards kept with it, run only once approved (once, or always for that tool in that
chat), denied or stopped calls answered without running, and the model continuing from the
results as `tool` messages after the reply that called."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from inglenook.chat import tool_round
from inglenook.chat.session import ChatSession, ChatSettings, ReplyOptions
from inglenook.core.reasoning import ReasoningFormat, TemplateTraits
from inglenook.core.replies import Finish
from inglenook.store import Store
from inglenook.tools.approval import ChatToolPolicy
from inglenook.tools.catalog import ToolCatalog, ToolInfo
from inglenook.tools.results import ToolResult

ADD = ToolInfo("calc", "add", "Add two numbers.",
               {"type": "object", "properties": {"a": {"type": "number"}}})
CATALOG = ToolCatalog([ADD])
QWEN = ReplyOptions(TemplateTraits(ReasoningFormat("think")), "hermes", CATALOG)
CALL = '<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call>'


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store(tmp_path / "test.db") as s:
        yield s


def called(store: Store, reply: str = f"<think>Use the tool.</think>Adding.\n{CALL}",
           settings: ChatSettings | None = None) -> ChatSession:
    session = ChatSession(store, settings or ChatSettings(tools=ChatToolPolicy(
        frozenset({"calc"}))))
    session.add_user("What is 2 + 3?")
    request = session.begin_reply(1, QWEN)
    assert request is not None
    assert [t["function"]["name"] for t in request.tools] == ["add"]
    session.reply_delta(reply)
    session.finish_reply(Finish("stop"), None)
    return session


def test_a_call_becomes_a_card_that_waits_for_approval(store: Store) -> None:
    session = called(store)
    reply = session.path[-1]
    assert (reply.content, reply.reasoning) == ("Adding.", "Use the tool.")
    assert session.tool_round is not None and session.tool_round.awaiting() == [0]
    card = session.tool_round.cards[0]
    assert (card.server, card.tool, dict(card.call.arguments)) == ("calc", "add",
                                                                   {"a": 2, "b": 3})
    assert [c.call for c in reply.tool_cards] == [card.call]  # kept with the reply
    assert session.allow_calls() == []  # nothing is allowed without asking yet
    assert session.begin_reply(2, QWEN, continuing=True) is None  # not answered yet


def test_approved_once_the_result_goes_back_and_the_model_continues(store: Store) -> None:
    session = called(store)
    session.decide_call(0, "once")
    assert session.tool_round is not None and session.tool_round.cards[0].state == "running"
    session.call_finished(0, ToolResult("ok", "5.0"))
    assert session.tool_round.done
    request = session.begin_reply(2, QWEN, continuing=True)
    assert request is not None and session.tool_round is None
    assistant, tool = request.messages[-2:]
    assert (assistant.content, [(c.name, c.arguments) for c in assistant.tool_calls]) == (
        "Adding.", [("add", '{"a": 2, "b": 3}')])
    assert (tool.role, tool.content, tool.tool_call_id, tool.name) == (
        "tool", "5.0", assistant.tool_calls[0].id, "add")
    session.reply_delta("2 + 3 = 5.")
    message = session.finish_reply(Finish("stop"), None)
    assert message is not None and message.parent_id == session.path[-2].id
    assert session.tool_round is None
    assert session.path[-2].tool_cards[0].result == ToolResult("ok", "5.0")


def test_always_allowed_tools_run_without_asking_in_this_chat_only(store: Store) -> None:
    session = called(store)
    session.decide_call(0, "always")
    assert ("calc", "add") in session.settings.tools.always_allowed
    reopened = ChatSession.open(store, session.conv_id, [], ChatSettings())  # type: ignore[arg-type]
    assert ("calc", "add") in reopened.settings.tools.always_allowed  # kept with the chat
    session.call_finished(0, ToolResult("ok", "5.0"))
    session.begin_reply(2, QWEN, continuing=True)
    session.reply_delta(CALL)
    session.finish_reply(Finish("stop"), None)
    assert session.allow_calls() == [0]  # runs at once
    other = called(store)  # another chat asks again
    assert other.allow_calls() == []


def test_a_denied_call_is_answered_without_running(store: Store) -> None:
    session = called(store)
    session.decide_call(0, "deny")
    assert session.tool_round is not None and session.tool_round.done
    request = session.begin_reply(2, QWEN, continuing=True)
    assert request is not None and request.messages[-1].content == "The user denied this call."


def test_calls_of_a_stopped_reply_never_run(store: Store) -> None:
    session = ChatSession(store)
    session.add_user("What is 2 + 3?")
    session.begin_reply(1, QWEN)
    session.reply_delta(CALL)
    session.finish_reply(Finish("cancelled"), None)
    assert session.tool_round is None
    assert session.path[-1].tool_cards[0].model_text == "The call was not run."


def test_moving_on_answers_waiting_calls_as_stopped(store: Store) -> None:
    session = called(store)
    session.add_user("Never mind.")
    assert session.tool_round is None
    request = session.begin_reply(2, QWEN)
    assert request is not None
    assert [m.role for m in request.messages[1:]] == ["user", "assistant", "tool", "user"]
    assert request.messages[-2].content == "The user stopped before this call ran."


@pytest.mark.parametrize(("reply", "told"), [
    ('<tool_call>{"name": "delete_everything", "arguments": {}}</tool_call>',
     "There is no tool named 'delete_everything'."),
    ("<tool_call>{not json</tool_call>", "The call could not be read"),
])
def test_unknown_and_unreadable_calls_are_answered_at_once(store: Store, reply: str,
                                                           told: str) -> None:
    session = called(store, reply)
    assert session.tool_round is not None and session.tool_round.done
    request = session.begin_reply(2, QWEN, continuing=True)
    assert request is not None and request.messages[-1].content.startswith(told)


def test_no_tools_offered_means_calls_are_text(store: Store) -> None:
    session = ChatSession(store)
    session.add_user("What is 2 + 3?")
    request = session.begin_reply(1, ReplyOptions(tool_format="hermes"))  # no catalog
    assert request is not None and request.tools == ()
    session.reply_delta(CALL)
    message = session.finish_reply(Finish("stop"), None)
    assert message is not None and message.content == CALL and session.tool_round is None


def test_regenerating_a_reply_that_called_tools_starts_from_the_question(store: Store) -> None:
    session = called(store)
    request = session.begin_reply(2, QWEN)
    assert request is not None and request.messages[-1].content == "What is 2 + 3?"
    assert session.tool_round is None


def test_replies_in_a_row_that_call_tools_are_counted(store: Store,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    session = called(store)
    assert session.tool_rounds() == 1
    session.decide_call(0, "once")
    session.call_finished(0, ToolResult("ok", "5.0"))
    session.begin_reply(2, QWEN, continuing=True)
    session.reply_delta(CALL)
    session.finish_reply(Finish("stop"), None)
    assert session.tool_rounds() == 2 and session.tools_may_go_on()
    monkeypatch.setattr(tool_round, "MAX_TOOL_ROUNDS", 2)
    assert not session.tools_may_go_on()  # the limit: the round ends, the model waits
    assert session.tool_round is None
    session.add_user("Thanks.")
    assert session.tool_rounds() == 0
