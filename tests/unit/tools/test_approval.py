"""Approval as data: what a chat allows, what the user decided, the text the model gets for
each outcome of a call, and the card that keeps it all with the reply."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from inglenook.tools import results
from inglenook.tools.approval import ChatToolPolicy, result_of_decision
from inglenook.tools.cards import ToolCard
from inglenook.tools.catalog import ToolCatalog, ToolInfo
from inglenook.tools.formats import ToolCall


def test_every_tool_asks_until_the_user_says_always_for_this_chat() -> None:
    policy = ChatToolPolicy().with_server("calc", True)
    assert policy.uses("calc") and not policy.uses("web")
    assert policy.needs_approval("calc", "add")
    assert policy.decide("calc", "add", "once") == policy  # once: nothing remembered
    always = policy.decide("calc", "add", "always")
    assert not always.needs_approval("calc", "add")
    assert always.needs_approval("calc", "sub") and always.needs_approval("web", "add")
    assert always.forget("calc", "add").needs_approval("calc", "add")
    assert not always.with_server("calc", False).uses("calc")
    with pytest.raises(ValueError):
        policy.decide("calc", "add", "sometimes")  # type: ignore[arg-type]


def test_the_policy_is_stored_with_the_chat_as_json() -> None:
    policy = (ChatToolPolicy().with_server("calc", True).with_server("web", True)
              .decide("calc", "add", "always"))
    stored = json.loads(json.dumps(policy.to_json()))
    assert ChatToolPolicy.from_json(stored) == policy


@pytest.mark.parametrize("damaged", [
    None, "calc", [], {"servers": "calc"}, {"always": [{"server": "calc"}]},
    {"always": ["calc/add"], "servers": [1, "calc"]},
])
def test_a_damaged_record_asks_again_rather_than_allowing(damaged: object) -> None:
    policy = ChatToolPolicy.from_json(damaged)
    assert policy.always_allowed == frozenset()
    assert policy.enabled_servers <= {"calc"}


def test_each_outcome_becomes_the_text_the_model_gets() -> None:
    assert result_of_decision("deny") == results.ToolResult("denied", "The user denied this call.")
    assert result_of_decision("once") is None and result_of_decision("always") is None
    assert results.timed_out(30).text == "The tool did not answer within 30 s."
    assert results.timed_out(2.5).status == "timeout"
    assert "'calc'" in results.unavailable("calc", "it is turned off").text
    assert results.unknown_tool("sub").text == "There is no tool named 'sub'."


def block(kind: str, **fields: object) -> SimpleNamespace:
    return SimpleNamespace(type=kind, **fields)


def test_tool_content_becomes_text() -> None:
    content = [block("text", text="Two lines"), block("image", mime_type="image/png", data="…"),
               block("resource", resource=SimpleNamespace(uri="file:///a", text="A's text")),
               block("resource", resource=SimpleNamespace(uri="file:///b.bin", blob="AA==")),
               block("resource_link", uri="file:///c")]
    result = results.from_content(content)
    assert result.ok and result.text.splitlines() == [
        "Two lines", "[image (image/png) not shown]", "A's text",
        "[resource file:///b.bin not shown]", "[resource file:///c]"]
    assert results.from_content([], {"result": 5}).text == '{"result": 5}'
    failed = results.from_content([block("text", text="No such city")], is_error=True)
    assert (failed.status, failed.text) == ("error", "No such city")


def test_a_huge_result_is_cut_and_says_so() -> None:
    text = "x" * (results.MAX_RESULT_CHARS + 500)
    result = results.from_content([block("text", text=text)])
    assert len(result.text) < results.MAX_RESULT_CHARS + 100
    assert result.text.endswith("[… 500 more characters not shown]")


ADD_INFO = ToolInfo("calc", "add", "Add two numbers.")


def test_a_card_follows_its_call_from_approval_to_result_and_back_from_json() -> None:
    call = ToolCall("add", {"a": 2, "b": 3}, "Ab3dE6gH9")
    card = ToolCard.for_call(call, ToolCatalog([ADD_INFO]))
    assert (card.server, card.tool, card.state, card.known) == ("calc", "add", "awaiting", True)
    running = card.decided("always")
    assert running.state == "running"
    done = running.finished(results.ToolResult("ok", "5.0"))
    stored = json.loads(json.dumps(done.to_json()))
    assert ToolCard.from_json(stored) == done
    assert done.tool_message() == {"role": "tool", "content": "5.0",
                                   "tool_call_id": "Ab3dE6gH9", "name": "add"}
    refused = card.decided("deny")
    assert refused.state == "done" and refused.result is None  # the caller adds denied()


def test_cards_that_never_finished_still_answer_the_model() -> None:
    unknown = ToolCard.for_call(ToolCall("sub", {}), ToolCatalog([ADD_INFO]))
    assert not unknown.known and unknown.model_text == "There is no tool named 'sub'."
    waiting = ToolCard.for_call(ToolCall("add", {"a": 1}), ToolCatalog([ADD_INFO]))
    reread = ToolCard.from_json(waiting.to_json())
    assert reread is not None and reread.state == "done"  # never runs again after a restart
    assert reread.model_text == "The call was not run."
    assert ToolCard.from_json({"arguments": {}}) is None
    damaged = ToolCard.from_json({"function": "add", "arguments": "x", "decision": "maybe",
                                  "result": {"status": "weird", "text": "?"}})
    assert damaged is not None and damaged.call.arguments == {}
    assert damaged.decision is None and damaged.result is None
