"""Continue a cut or stopped reply, and edit a reply by hand: both new versions of the reply
(siblings, like Regenerate), over a real SQLite store."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from inglenook.chat.reply_edits import can_continue, is_edited, written
from inglenook.chat.session import ChatSession, ReplyOptions
from inglenook.core.messages import Message
from inglenook.core.reasoning import ReasoningFormat, TemplateTraits
from inglenook.core.replies import Finish
from inglenook.store import Store

CONTINUE = ReplyOptions(extend=True)


@pytest.fixture
def store(tmp_path: Path):
    s = Store(tmp_path / "test.db")
    yield s
    s.close()


def answer(session: ChatSession, rid: int, text: str, finish: str = "stop",
           extend: bool = False, options: ReplyOptions | None = None) -> None:
    options = options or ReplyOptions()
    assert session.begin_reply(rid, dataclasses.replace(options, extend=extend)) is not None
    session.reply_started()
    session.reply_delta(text)
    session.finish_reply(Finish(finish), None)  # type: ignore[arg-type]


def test_continue_goes_on_from_a_cut_reply_as_a_new_version(store: Store) -> None:
    session = ChatSession(store)
    session.add_user("Count to ten.")
    answer(session, 1, "One, two, three,", finish="length")
    cut = session.path[-1]
    assert can_continue(cut)
    request = session.begin_reply(2, CONTINUE)
    assert request is not None
    # The same conversation, the reply so far as the start of the assistant turn.
    assert [m.role for m in request.messages] == ["system", "user"]
    assert request.prefill == "One, two, three,"
    assert session.path[-1].content == "One, two, three,"  # shown at once, then grows
    session.reply_delta(" four.")
    session.finish_reply(Finish("stop"), None)
    last = session.path[-1]
    assert last.content == "One, two, three, four." and not can_continue(last)
    assert (last.sibling_index, last.sibling_count) == (2, 2)  # the cut one stays, one ‹ away
    session.select_sibling(last.id, -1)
    assert session.path[-1].content == "One, two, three,"


def test_continue_is_only_for_a_reply_cut_or_stopped(store: Store) -> None:
    session = ChatSession(store)
    session.add_user("Hi")
    answer(session, 1, "Hello!")  # complete: nothing to continue
    assert not can_continue(session.path[-1])
    assert session.begin_reply(2, CONTINUE) is None
    answer(session, 3, "", finish="cancelled")  # stopped before a word: nothing to go on from
    assert session.begin_reply(4, CONTINUE) is None
    answer(session, 5, "It was", finish="error")
    assert session.begin_reply(6, CONTINUE) is None
    session.add_user("Again")
    assert session.begin_reply(7, CONTINUE) is None  # the last message is a question
    answer(session, 8, "Stopped here", finish="cancelled")
    assert session.begin_reply(9, CONTINUE) is not None


def test_a_reply_interrupted_by_a_crash_can_be_continued(store: Store) -> None:
    session = ChatSession(store)
    session.add_user("Hi")
    assert session.begin_reply(1) is not None
    session.reply_delta("Half a rep")
    session.reply = None  # the app ended here: the row stays 'streaming' with what was saved
    store.update_message(session.path[-1].id, "Half a rep")
    store.close()
    again = Store(store.path)  # next start: marked interrupted
    try:
        assert session.conv_id is not None
        reopened = ChatSession.open(again, session.conv_id, again.presets(), session.settings)
        assert reopened.path[-1].status == "interrupted" and can_continue(reopened.path[-1])
        request = reopened.begin_reply(2, CONTINUE)
        assert request is not None and request.prefill == "Half a rep"
    finally:
        again.close()


def test_continue_a_reply_cut_while_thinking_keeps_thinking() -> None:
    think = ReasoningFormat("think")
    assert written("", "Let me see", think) == "<think>\nLet me see"
    assert written("42", "Let me see", think) == "<think>\nLet me see\n</think>\n\n42"
    opened = ReasoningFormat("think", starts_open=True)  # the prompt opened <think> itself
    assert written("42", "", opened) == "\n\n</think>\n\n42"
    assert written("42", "", think) == "42" and written("42", "x", None) == "42"
    assert written("42", "x", ReasoningFormat("channels")) == "42"


def test_a_continued_reasoning_reply_is_read_apart_again(store: Store) -> None:
    session = ChatSession(store)
    options = ReplyOptions(traits=TemplateTraits(ReasoningFormat("think")))
    session.add_user("What is 6 x 7?")
    answer(session, 1, "<think>\nSix sevens", finish="length", options=options)
    assert (session.path[-1].reasoning, session.path[-1].content) == ("Six sevens", "")
    request = session.begin_reply(2, dataclasses.replace(options, extend=True))
    assert request is not None and request.prefill == "<think>\nSix sevens"
    session.reply_delta(" are 42.\n</think>\n\n42")
    session.finish_reply(Finish("stop"), None)
    assert (session.path[-1].reasoning, session.path[-1].content) == ("Six sevens are 42.", "42")


def test_an_edited_reply_is_a_branch_that_later_turns_use(store: Store) -> None:
    session = ChatSession(store)
    session.add_user("Name a colour.")
    answer(session, 1, "Blue.")
    original = session.path[-1]
    edited = session.edit_reply(original.id, "Green.")
    assert edited.id != original.id and edited.parent_id == original.parent_id
    assert (edited.sibling_index, edited.sibling_count) == (2, 2)
    assert is_edited(edited.provenance) and not is_edited(original.provenance)
    session.add_user("And another?")
    assert session.turns() == [Message("user", "Name a colour."),
                               Message("assistant", "Green."),
                               Message("user", "And another?")]
    with pytest.raises(KeyError):
        session.edit_reply(session.path[0].id, "not a reply")
    # Exported with its branches: both versions are there.
    assert session.conv_id is not None
    exported = store.export_json(session.conv_id)["messages"]
    assert [(m["content"], m["active"]) for m in exported if m["role"] == "assistant"] == [
        ("Blue.", False), ("Green.", True)]
    assert exported[2]["provenance"].get("edited") is True
    markdown = store.export_markdown(session.conv_id)
    assert "Green.\n\n*(edited)*" in markdown and "Blue." not in markdown
