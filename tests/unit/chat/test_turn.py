"""A reply's turn without Qt (chat/turn.py), over a real store and the real knowledge index at its
place (INGLENOOK_HOME is per test): the snapshot taken where the store lives, one gather on
another thread that lists the chat's tools, hashes its images and finds its passages, a
begin_reply that searches nothing, and what follows a reply that called tools (run, ask,
continue, stop). The tool servers are a function here (the window's are MCP servers:
tests/gui/test_tools_window.py runs them)."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from inglenook import paths
from inglenook.chat import images as chat_images
from inglenook.chat import tool_round, turn
from inglenook.chat.session import ChatSession, ChatSettings, ReplyOptions
from inglenook.chat.turn import Turn
from inglenook.core.attachments import Attachment
from inglenook.core.reasoning import ReasoningFormat, TemplateTraits
from inglenook.core.replies import Finish
from inglenook.knowledge.fts import SqliteFtsIndex
from inglenook.knowledge.index import Chunk, Document
from inglenook.store import Store, StoreError
from inglenook.tools.approval import ChatToolPolicy
from inglenook.tools.catalog import ToolCatalog, ToolInfo
from inglenook.tools.results import ToolResult
from tests.unit.core.test_images import png_bytes

QUESTION = "Where does the barn owl nest?"
OWL = "The barn owl nests in the old mill."
ADD = ToolInfo("calc", "add", "Add two numbers.",
               {"type": "object", "properties": {"a": {"type": "number"}}})
QWEN = ReplyOptions(TemplateTraits(ReasoningFormat("think")), "hermes", n_ctx=2048)
CALL = '<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call>'
CALC = ChatToolPolicy(frozenset({"calc"}))


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store(tmp_path / "test.db") as s:
        yield s


def index_notes() -> None:
    index = SqliteFtsIndex()  # the default place, as a reply opens it
    index.create_collection("Notes", ["/n"])
    index.add_document("Notes", Document("/n/owl.md", 1, 1, "a", "markdown"),
                       [Chunk(OWL, 3, 3)])
    index.close()


class Servers:
    """The tool servers as the turn lists them: the thread each listing ran on."""

    def __init__(self, errors: Mapping[str, str] | None = None) -> None:
        self.listed_on: list[str] = []
        self.asked: list[tuple[str, ...]] = []
        self.errors = dict(errors or {})

    def __call__(self, servers: Sequence[str]) -> tuple[ToolCatalog, Mapping[str, str]]:
        self.listed_on.append(threading.current_thread().name)
        self.asked.append(tuple(servers))
        return ToolCatalog([ADD] if "calc" in servers else []), self.errors


def off_thread(reply_turn: Turn, servers: Servers | None = None) -> turn.Gathered:
    with ThreadPoolExecutor(1, thread_name_prefix="turn") as pool:
        return pool.submit(reply_turn.gather, servers).result()


def finish(session: ChatSession, text: str) -> None:
    session.reply_started()
    session.reply_delta(text)
    session.finish_reply(Finish("stop"), None)


# ---- before the reply ------------------------------------------------------------------------
def test_one_gather_off_the_thread_lists_tools_hashes_images_and_finds_passages(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    index_notes()
    session = ChatSession(store, ChatSettings(knowledge=("Notes",), tools=CALC))
    data = png_bytes((4, 4), "RGB", (9, 8, 7))
    photo = Attachment("owl.png", "image", len(data), mime="image/png", data=data)
    session.add_user(QUESTION, [photo])
    chat_images._hashes.clear()  # as after a restart
    chat_images._checked.clear()
    hashed_on: list[str] = []
    real = chat_images.hashlib.sha256

    def sha256(*args: bytes) -> object:
        hashed_on.append(threading.current_thread().name)
        return real(*args)

    monkeypatch.setattr(chat_images.hashlib, "sha256", sha256)
    servers = Servers()
    reply_turn = Turn.take(session, ReplyOptions(QWEN.traits, "hermes", n_ctx=2048,
                                                 vision=True), ["calc", "other"])
    assert not reply_turn.idle and reply_turn.servers == ("calc",)  # the chat's, not all
    assert hashed_on == []  # the snapshot only reads
    gathered = off_thread(reply_turn, servers)
    assert servers.asked == [("calc",)] and servers.listed_on[0].startswith("turn")
    assert hashed_on and all(name.startswith("turn") for name in hashed_on)
    assert gathered.notices == () and gathered.options.catalog is not None
    knowledge = gathered.options.knowledge
    assert knowledge is not None and [s.path for s in knowledge.sources] == ["/n/owl.md"]
    hashed_on.clear()
    request = session.begin_reply(1, gathered.options)  # the store's thread: nothing waits
    assert request is not None and hashed_on == []
    assert [t["function"]["name"] for t in request.tools] == ["add"]
    assert len(request.messages[-1].images) == 1 and OWL in request.messages[-1].content


def test_begin_reply_never_searches_what_it_was_not_given(store: Store) -> None:
    """Once, when the background search failed or the chat's collections changed, the window
    searched again on its own thread, inside begin_reply."""
    index_notes()
    session = ChatSession(store, ChatSettings(knowledge=("Notes",)))
    session.add_user(QUESTION)
    request = session.begin_reply(1, ReplyOptions(n_ctx=2048))
    assert request is not None and request.messages[-1].content == QUESTION
    assert session.reply is not None and session.reply.knowledge is None


def test_collections_changed_while_gathering_give_the_reply_what_was_found(
        store: Store) -> None:
    index_notes()
    session = ChatSession(store, ChatSettings(knowledge=("Notes",)))
    session.add_user(QUESTION)
    gathered = off_thread(Turn.take(session, ReplyOptions(n_ctx=2048)))
    session.set_settings(session.settings.replace(knowledge=()))  # while it searched
    request = session.begin_reply(1, gathered.options)
    assert request is not None and OWL in request.messages[-1].content
    finish(session, "In the mill [1].")
    given = session.path[-1].provenance.extra["knowledge"]
    assert given["collections"] == ["Notes"]  # the record says which were searched


def test_a_search_that_fails_lets_the_reply_go_on_and_says_why(store: Store) -> None:
    index_notes()
    session = ChatSession(store, ChatSettings(knowledge=("Notes",)))
    session.add_user(QUESTION)

    def embedder_gone(collections: Sequence[str]) -> Iterator[SqliteFtsIndex]:
        raise RuntimeError("the embedding model's engine stopped")

    gathered = Turn.take(session, ReplyOptions(n_ctx=2048)).gather(
        None, embedder_gone)  # type: ignore[arg-type]  # fails before it is entered
    knowledge = gathered.options.knowledge
    assert knowledge is not None and knowledge.text == ""
    assert knowledge.notice == "Answered without your documents: the embedding model's " \
        "engine stopped"
    request = session.begin_reply(1, gathered.options)
    assert request is not None and request.messages[-1].content == QUESTION


def test_regenerating_gives_the_kept_passages_without_searching(store: Store) -> None:
    index_notes()
    session = ChatSession(store, ChatSettings(knowledge=("Notes",)))
    session.add_user(QUESTION)
    first = session.begin_reply(1, Turn.take(session, ReplyOptions(n_ctx=2048)).gather()
                                .options)
    finish(session, "In the mill [1].")
    paths.knowledge_database_file().unlink()  # a search now would find nothing
    again = Turn.take(session, ReplyOptions(n_ctx=2048))
    assert again.kept is not None and again.idle and again.question == ""
    request = session.begin_reply(2, again.gather().options)
    assert first is not None and request is not None and request.messages == first.messages
    other = Turn.take(session, ReplyOptions(n_ctx=2048, extend=True), continuing=True)
    assert other.kept is None  # the model going on after its tools searches its question


def test_a_plain_chat_gathers_nothing_and_lists_no_tools(store: Store) -> None:
    session = ChatSession(store, ChatSettings(tools=CALC))
    session.add_user("Hello")
    blind = Turn.take(session, ReplyOptions(n_ctx=2048), ["calc"])  # a template with no tools
    assert blind.idle and blind.servers == () and blind.images == ()
    servers = Servers()
    assert blind.gather(servers).options.catalog is None and servers.asked == []
    assert not paths.knowledge_database_file().exists()


def test_tools_that_cannot_be_listed_are_named_and_the_reply_goes_on(store: Store) -> None:
    session = ChatSession(store, ChatSettings(tools=ChatToolPolicy(frozenset({"calc", "web"}))))
    session.add_user("What is 2 + 3?")
    reply_turn = Turn.take(session, QWEN, ["calc", "web"])
    gathered = off_thread(reply_turn, Servers({"web": "it is turned off"}))
    assert gathered.notices == ("Some tools are not available: web: it is turned off",)

    def closed(servers: Sequence[str]) -> tuple[ToolCatalog, Mapping[str, str]]:
        raise RuntimeError("The tool servers were stopped.")

    gone = reply_turn.gather(closed)
    assert gone.notices == ("Some tools are not available: The tool servers were stopped.",)
    request = session.begin_reply(1, gone.options)
    assert request is not None and request.tools == ()


# ---- after the reply -------------------------------------------------------------------------
def called(store: Store, settings: ChatSettings | None = None) -> ChatSession:
    session = ChatSession(store, settings or ChatSettings(tools=CALC))
    session.add_user("What is 2 + 3?")
    gathered = Turn.take(session, QWEN, ["calc"]).gather(Servers())
    assert session.begin_reply(1, gathered.options) is not None
    finish(session, f"Adding.\n{CALL}")
    return session


def test_a_call_that_needs_approval_asks_then_runs_then_the_model_goes_on(store: Store) -> None:
    session = called(store)
    assert turn.after_reply(session) == turn.Next((), "ask")
    tools = session.tool_round
    assert tools is not None
    assert turn.decided(session, tools.message_id + 1, 0, "once") == turn.Next()  # not its
    assert turn.decided(session, tools.message_id, 0, "maybe") == turn.Next()
    assert turn.decided(session, tools.message_id, 0, "once") == turn.Next((0,), "wait")
    assert turn.call_finished(session, tools, 0, ToolResult("ok", "5")) == \
        turn.Next((), "continue")
    request = session.begin_reply(2, QWEN, continuing=True)
    assert request is not None and request.messages[-1].role == "tool"


def test_an_allowed_call_runs_at_once_and_a_denied_one_goes_back_to_the_model(
        store: Store) -> None:
    allowed = called(store, ChatSettings(tools=CALC.decide("calc", "add", "always")))
    assert turn.after_reply(allowed) == turn.Next((0,), "wait")
    denied = called(store)
    tools = denied.tool_round
    assert tools is not None
    assert turn.decided(denied, tools.message_id, 0, "deny") == turn.Next((), "continue")


def test_a_call_answered_after_the_user_moved_on_is_let_go(store: Store) -> None:
    session = called(store)
    tools = session.tool_round
    assert tools is not None
    turn.decided(session, tools.message_id, 0, "once")
    assert turn.stop_calls(session) == "" and session.tool_round is None
    assert turn.call_finished(session, tools, 0, ToolResult("ok", "5")) == turn.Next()
    assert turn.after_reply(session) == turn.Next()  # no round: nothing follows


def test_the_round_stops_after_too_many_replies_in_a_row_that_called_tools(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tool_round, "MAX_TOOL_ROUNDS", 1)
    session = called(store, ChatSettings(tools=CALC.decide("calc", "add", "always")))
    tools = session.tool_round
    assert tools is not None and turn.after_reply(session).run == (0,)
    stopped = turn.call_finished(session, tools, 0, ToolResult("ok", "5"))
    assert stopped.then == "stop" and stopped.kind == "info"
    assert "stopped after 1 replies in a row" in stopped.notice and session.tool_round is None


def test_a_store_that_refuses_the_cards_is_said_and_the_allowed_call_still_runs(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    session = called(store, ChatSettings(tools=CALC.decide("calc", "add", "always")))

    def refused(*args: object, **kwargs: object) -> None:
        raise StoreError("database or disk is full")

    monkeypatch.setattr(store, "update_message", refused)
    after = turn.after_reply(session)
    assert after.run == (0,) and after.then == "wait" and after.kind == "error"
    assert after.notice == "Could not save the tool call in «What is 2 + 3?»: database or " \
        "disk is full"
