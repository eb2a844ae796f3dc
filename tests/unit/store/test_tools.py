"""Tool-call cards in the store (schema v5): kept with the reply that made the calls, updated
as the user decides and the tools answer, carried by exports and imports only when a reply has
them, and readable in the Markdown export."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from inglenook.store import Store
from inglenook.store.checks import InvalidImport
from inglenook.tools.cards import ToolCard
from inglenook.tools.formats import ToolCall
from inglenook.tools.results import ToolResult, denied

ADD = ToolCard(ToolCall("add", {"a": 2, "b": 3}, "Ab3dE6gH9"), "calc", "add")


@pytest.fixture
def store() -> Iterator[Store]:
    with Store() as s:
        yield s


def conversation(store: Store) -> tuple[int, int]:
    conv = store.create_conversation()
    question = store.add_message(conv, "user", "What is 2 + 3?", None)
    return conv, store.add_message(conv, "assistant", "Let me add.", question,
                                   tool_cards=[ADD])


def test_cards_are_kept_with_their_reply_and_replaced_as_they_change(store: Store) -> None:
    conv, reply = conversation(store)
    assert store.active_path(conv)[1].tool_cards[0].call == ADD.call
    ran = ADD.decided("once").finished(ToolResult("ok", "5.0"))
    store.update_message(reply, "Let me add.", tool_cards=[ran])
    question, stored = store.active_path(conv)
    assert stored.tool_cards == (ran,) and question.tool_cards == ()
    store.update_message(reply, "Let me add, again.")  # not given: kept
    assert store.active_path(conv)[1].tool_cards == (ran,)


def test_a_card_stored_while_it_waited_reads_as_not_run(store: Store) -> None:
    """The app quit while it waited for approval: it will never run on its own."""
    conv, _ = conversation(store)
    card = store.active_path(conv)[1].tool_cards[0]
    assert (card.state, card.result, card.model_text) == ("done", None, "The call was not run.")


def test_export_and_import_carry_cards_only_where_there_are_some(store: Store) -> None:
    conv, reply = conversation(store)
    store.update_message(reply, "Let me add.", tool_cards=[ADD.decided("deny").finished(
        denied())])
    exported = store.export_json(conv)
    question, called = exported["messages"]
    assert "tool_cards" not in question
    assert called["tool_cards"] == [{
        "id": "Ab3dE6gH9", "function": "add", "arguments": {"a": 2, "b": 3}, "server": "calc",
        "tool": "add", "state": "done", "decision": "deny",
        "result": {"status": "denied", "text": "The user denied this call.", "detail": ""}}]
    again = store.import_json(exported)
    assert store.export_json(again)["messages"] == exported["messages"]


@pytest.mark.parametrize("cards", [{"function": "add"}, [{"arguments": {}}]])
def test_an_import_with_unreadable_cards_is_refused(store: Store, cards: object) -> None:
    conv, _ = conversation(store)
    exported = store.export_json(conv)
    exported["messages"][1]["tool_cards"] = cards
    with pytest.raises(InvalidImport, match="message 2"):
        store.import_json(exported)


def test_markdown_names_each_call_and_what_came_of_it(store: Store) -> None:
    conv, reply = conversation(store)
    store.update_message(reply, "Let me add.", tool_cards=[
        ADD.decided("once").finished(ToolResult("ok", "5.0"))])
    text = store.export_markdown(conv)
    assert "Let me add.\n" in text
    assert "*Tool call: `add(a=2, b=3)` → ok*" in text
