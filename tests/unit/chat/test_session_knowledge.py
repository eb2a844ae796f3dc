"""A reply in a chat that uses collections, through its turn (chat/turn.py gathers the passages)
and ChatSession over a real store and the real knowledge index at its place (INGLENOOK_HOME is
per test): the request holds the passages, the reply records its sources, and the inspector
replays what was sent after the index changed."""

from __future__ import annotations

from pathlib import Path

import pytest

from inglenook import paths
from inglenook.chat.knowledge_turn import recorded
from inglenook.chat.session import ChatSession, ChatSettings, ReplyOptions
from inglenook.chat.turn import Turn
from inglenook.core.messages import GenerationRequest
from inglenook.core.replies import Finish
from inglenook.knowledge.fts import SqliteFtsIndex
from inglenook.knowledge.index import Chunk, Document
from inglenook.store import Store

QUESTION = "Where does the barn owl nest?"
OWL = "The barn owl nests in the old mill."


@pytest.fixture
def store(tmp_path: Path):
    s = Store(tmp_path / "test.db")
    yield s
    s.close()


def index_notes() -> None:
    index = SqliteFtsIndex()  # the default place, as the app's reply opens it
    index.create_collection("Notes", ["/n"])
    index.add_document("Notes", Document("/n/owl.md", 1, 1, "a", "markdown"),
                       [Chunk(OWL, 3, 3)])
    index.close()


def begin(session: ChatSession, rid: int) -> GenerationRequest | None:
    """The reply's turn gathered (here on one thread), then begun."""
    gathered = Turn.take(session, ReplyOptions(n_ctx=2048)).gather()
    return session.begin_reply(rid, gathered.options)


def reply(session: ChatSession, text: str = "In the mill [1].") -> None:
    session.reply_started()
    session.reply_delta(text)
    session.finish_reply(Finish("stop"), None)


def test_the_request_holds_the_passage_and_the_reply_its_sources(store: Store) -> None:
    index_notes()
    session = ChatSession(store, ChatSettings(knowledge=("Notes",)))
    session.add_user(QUESTION)
    request = begin(session, 1)
    assert request is not None
    question = request.messages[-1]
    assert question.role == "user" and f"[1] /n/owl.md, line 3\n```text\n{OWL}" in \
        question.content and question.content.endswith(QUESTION)
    assert session.reply is not None and session.reply.knowledge is not None
    reply(session)
    assert session.path[-2].content == QUESTION  # the transcript keeps what the user typed
    again = ChatSession.open(store, session.conv_id or 0, [], ChatSettings())
    assert again.settings.knowledge == ("Notes",)
    given = recorded(again.path[-1].provenance)
    assert given is not None and [(s.path, s.location) for s in given.sources] == \
        [("/n/owl.md", "line 3")]
    # The inspector shows what was sent, even once the document left the index.
    index = SqliteFtsIndex()
    index.remove_document("Notes", "/n/owl.md")
    index.close()
    replay = again.request_for(again.path[-1].id, 2, 2048)
    assert replay is not None and replay.messages == request.messages


def test_an_unreadable_index_lets_the_reply_go_on_and_says_so(store: Store) -> None:
    paths.knowledge_database_file().parent.mkdir(parents=True, exist_ok=True)
    paths.knowledge_database_file().write_bytes(b"not a database " * 100)
    session = ChatSession(store, ChatSettings(knowledge=("Notes",)))
    session.add_user(QUESTION)
    request = begin(session, 1)
    assert request is not None and request.messages[-1].content == QUESTION
    assert session.reply is not None and session.reply.knowledge is not None
    assert "cannot be opened" in session.reply.knowledge.notice
    reply(session, "I cannot see your notes.")
    given = recorded(session.path[-1].provenance)
    assert given is not None and "cannot be opened" in given.notice


def test_a_chat_without_collections_never_opens_the_index(store: Store) -> None:
    session = ChatSession(store)
    session.add_user(QUESTION)
    request = begin(session, 1)
    assert request is not None and request.messages[-1].content == QUESTION
    assert not paths.knowledge_database_file().exists()
    reply(session)
    assert recorded(session.path[-1].provenance) is None


def test_regenerating_gives_the_same_passages_until_the_collections_change(
        store: Store) -> None:
    index_notes()
    session = ChatSession(store, ChatSettings(knowledge=("Notes",)))
    session.add_user(QUESTION)
    first = begin(session, 1)
    reply(session)
    index = SqliteFtsIndex()  # the document changes after the first reply
    index.add_document("Notes", Document("/n/owl.md", 2, 2, "b", "markdown"),
                       [Chunk("The barn owl moved to the church tower.", 1, 1)])
    index.create_collection("Birds", ["/b"])
    index.add_document("Birds", Document("/b/owl.md", 1, 1, "c", "markdown"),
                       [Chunk("A barn owl nests in hollow trees.", 9, 9)])
    index.close()
    again = begin(session, 2)
    assert first is not None and again is not None and again.messages == first.messages
    reply(session)
    session.set_settings(session.settings.replace(knowledge=("Birds",)))
    other = begin(session, 3)
    assert other is not None and "hollow trees" in other.messages[-1].content
    assert OWL not in other.messages[-1].content
