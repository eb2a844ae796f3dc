"""A reply's reasoning, stored apart from its answer: the Store API, its times in the
provenance, search, and JSON and Markdown export and import."""

from __future__ import annotations

import copy
import math
import sqlite3
from collections.abc import Iterator

import pytest

from inglenook.core.provenance import Provenance, format_seconds
from inglenook.store import CONVERSATION_FORMAT, Store

THOUGHT = "The user wants eggs boiled soft: six minutes."


@pytest.fixture
def store() -> Iterator[Store]:
    with Store() as s:
        yield s


def fts_is_sound(store: Store) -> None:
    conn = sqlite3.connect(store.path)
    try:
        conn.execute("INSERT INTO messages_fts (messages_fts) VALUES ('integrity-check')")
    finally:
        conn.close()


def thinking_reply(store: Store, *, status: str = "complete", answer: str = "Six minutes.",
                   reasoning: str = THOUGHT) -> tuple[int, int]:
    conv = store.create_conversation("Eggs")
    user = store.add_message(conv, "user", "How long for a soft egg?", None)
    reply = store.add_message(conv, "assistant", answer, user, status=status,
                              reasoning=reasoning, provenance=Provenance(
                                  reasoning_started_at=100.0, reasoning_ended_at=112.5))
    return conv, reply


# -- the store ------------------------------------------------------------------------------

def test_a_reply_streams_its_reasoning_then_its_answer(store: Store) -> None:
    conv = store.create_conversation()
    user = store.add_message(conv, "user", "How long for a soft egg?", None)
    reply = store.add_message(conv, "assistant", "", user, status="streaming")
    assert store.active_path(conv)[-1].reasoning == ""
    store.update_message(reply, "", reasoning="The user wants eggs")
    assert store.search("eggs") == []  # indexed once it stops streaming
    store.update_message(reply, "Six")  # reasoning None: kept as it was
    store.update_message(reply, "Six minutes.", status="complete",
                         provenance=Provenance(reasoning_started_at=100.0,
                                               reasoning_ended_at=112.5))
    last = store.active_path(conv)[-1]
    assert (last.reasoning, last.content) == ("The user wants eggs", "Six minutes.")
    assert last.provenance.thinking_s == 12.5
    assert [(h.message_id, h.in_reasoning) for h in store.search("eggs")] == [(reply, True)]
    assert [(h.message_id, h.in_reasoning) for h in store.search("minutes")] == [(reply, False)]
    store.update_message(reply, "Six minutes.", reasoning="")  # "" clears it
    assert store.active_path(conv)[-1].reasoning == ""
    assert store.search("eggs") == []
    fts_is_sound(store)


def test_a_deleted_reply_leaves_no_reasoning_in_the_index(store: Store) -> None:
    _, reply = thinking_reply(store)
    assert [h.message_id for h in store.search("soft")] == [reply, reply - 1]
    store.delete_from(reply)
    assert [h.in_reasoning for h in store.search("soft")] == [False]  # the prompt
    fts_is_sound(store)


def test_other_messages_have_no_reasoning(store: Store) -> None:
    conv, _ = thinking_reply(store)
    assert [m.reasoning for m in store.active_path(conv)] == ["", THOUGHT]
    assert [m.reasoning for m in store.siblings(store.active_path(conv)[-1].id)] == [THOUGHT]


# -- the reasoning's times in the provenance ------------------------------------------------

def test_provenance_keeps_the_reasoning_times() -> None:
    made = Provenance(reasoning_started_at=100.0, reasoning_ended_at=112.5)
    assert made.to_dict() == {"reasoning_started_at": 100.0, "reasoning_ended_at": 112.5}
    assert Provenance.from_dict(made.to_dict()) == made
    assert made.thinking_s == 12.5
    assert ("Reasoning", "thought for 12 s") in made.describe()
    assert Provenance(reasoning_started_at=100.0).thinking_s is None  # still thinking
    assert Provenance(reasoning_started_at=9.0, reasoning_ended_at=5.0).thinking_s == 0.0


def test_provenance_without_reasoning_is_written_as_before() -> None:
    old = {"model": {"name": "m"}, "seed": 3, "finish": "stop", "error": "", "custom": [1]}
    read = Provenance.from_dict(old)
    assert (read.reasoning_started_at, read.reasoning_ended_at, read.thinking_s) == (
        None, None, None)
    assert "reasoning_started_at" not in read.to_dict()
    assert "Reasoning" not in [label for label, _ in read.describe()]
    assert Provenance().to_dict() == {}


@pytest.mark.parametrize("bad", ["soon", True, None, math.nan, math.inf, [1.0]])
def test_unreadable_reasoning_times_are_left_out(bad: object) -> None:
    read = Provenance.from_dict({"reasoning_started_at": bad, "reasoning_ended_at": 5})
    assert (read.reasoning_started_at, read.reasoning_ended_at) == (None, 5.0)
    assert read.extra == {} and read.thinking_s is None


@pytest.mark.parametrize(("seconds", "said"), [
    (0.0, "0.0 s"), (0.44, "0.4 s"), (9.96, "10 s"), (12.4, "12 s"), (59.4, "59 s"),
    (59.6, "1 min"), (125.0, "2 min 5 s"), (3600.0, "60 min")])
def test_thinking_times_read_as_people_say_them(seconds: float, said: str) -> None:
    assert format_seconds(seconds) == said


# -- search ---------------------------------------------------------------------------------

def test_a_match_in_the_reasoning_is_marked(store: Store) -> None:
    _, reply = thinking_reply(store)
    (hit,) = store.search("six")  # in both: the answer is shown
    assert (hit.message_id, hit.in_reasoning, hit.snippet) == (reply, False,
                                                               "<b>Six</b> minutes.")
    (hit,) = store.search("boiled")
    assert hit.in_reasoning
    assert hit.snippet == ("<i>Reasoning:</i> The user wants eggs <b>boiled</b> soft: six "
                           "minutes.")
    assert [h.message_id for h in store.search("minutes boiled")] == [reply]  # both columns


def test_reasoning_snippets_escape_html(store: Store) -> None:
    thinking_reply(store, reasoning="Is <b>bold</b> & safe? find me")
    (hit,) = store.search("find")
    assert hit.snippet == ("<i>Reasoning:</i> Is &lt;b&gt;bold&lt;/b&gt; &amp; safe? "
                           "<b>find</b> me")


# -- export and import ----------------------------------------------------------------------

def test_json_export_has_reasoning_only_where_there_is_some(store: Store) -> None:
    conv, _ = thinking_reply(store)
    prompt, reply = store.export_json(conv)["messages"]
    assert "reasoning" not in prompt
    assert reply["reasoning"] == THOUGHT and reply["content"] == "Six minutes."
    assert reply["provenance"] == {"reasoning_started_at": 100.0, "reasoning_ended_at": 112.5}


def test_reasoning_survives_export_and_import(store: Store) -> None:
    conv, _ = thinking_reply(store)
    original = store.export_json(conv)
    again = store.import_json(copy.deepcopy(original))
    assert store.export_json(again) == original
    last = store.active_path(again)[-1]
    assert (last.reasoning, last.content, last.provenance.thinking_s) == (
        THOUGHT, "Six minutes.", 12.5)
    with Store(store.path.with_name("other.db")) as fresh:
        (copied,) = fresh.import_all(store.export_some([again]))
        assert fresh.export_json(copied) == original


def exported(*messages: dict) -> dict:
    return {"format": CONVERSATION_FORMAT, "version": 1, "messages": [
        {"id": n, "parent": n - 1 or None, **m} for n, m in enumerate(messages, start=1)]}


def test_imported_replies_that_open_with_a_think_block_are_split(store: Store) -> None:
    conv = store.import_json(exported(
        {"role": "user", "content": "<think>mine</think> Why?"},
        {"role": "assistant", "content": "<think>\nBecause.\n</think>\n\nIt is so."},
        {"role": "assistant", "content": "<think>taken at its word</think>x",
         "reasoning": ""},
        {"role": "assistant", "content": "answer", "reasoning": "given", "status": "error"},
        {"role": "assistant", "content": "<think>never closed"}))
    assert [(m.reasoning, m.content) for m in store.active_path(conv)] == [
        ("", "<think>mine</think> Why?"), ("Because.", "It is so."),
        ("", "<think>taken at its word</think>x"), ("given", "answer"),
        ("", "<think>never closed")]


def test_imported_reasoning_must_be_text(store: Store) -> None:
    before = len(store.conversations())
    with pytest.raises(ValueError, match="message 2: its reasoning must be text, not 5"):
        store.import_json(exported({"role": "user", "content": "q"},
                                   {"role": "assistant", "content": "a", "reasoning": 5}))
    assert len(store.conversations()) == before
    conv = store.import_json(exported({"role": "assistant", "content": "a",
                                       "reasoning": "bad \ud800 half"}))
    assert store.active_path(conv)[0].reasoning == "bad \ufffd half"


def test_markdown_shows_the_reasoning_above_the_answer(store: Store) -> None:
    conv, reply = thinking_reply(store, reasoning="First line.\n\nSecond line.")
    assert store.export_markdown(conv) == (
        "# Eggs\n\n## You\n\nHow long for a soft egg?\n\n## Assistant\n\n"
        "> **Reasoning** · thought for 12 s\n>\n> First line.\n>\n> Second line.\n\n"
        "Six minutes.\n")
    store.add_message(conv, "assistant", "", reply - 1, status="interrupted",
                      reasoning="Cut short")
    assert store.export_markdown(conv).endswith(
        "## Assistant\n\n> **Reasoning**\n>\n> Cut short\n\n*(interrupted)*\n")
