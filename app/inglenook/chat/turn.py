"""A reply's turn: what it gathers before it starts, and what follows it (Qt-free).

Before a reply is begun, three things may take time, and none of them may on the thread that
owns the window: listing the chat's tools (an MCP server may have to start), hashing the
history's images and checking their files (20 photos took ~190 ms), and searching the chat's
collections (the question's vector may wait for the embedding model to load). So a reply goes:

    turn = Turn.take(session, options_for(model), servers)  # the store's thread: a snapshot
    gathered = turn.gather(list_tools, open_index)  # any thread: all three, one trip
    session.begin_reply(rid, gathered.options, continuing=turn.continuing)  # the store's

`gather` never raises and never gives up on the reply: a server that cannot list its tools, an
image that cannot be written and an index that cannot be read each leave the reply to go on
without them, and say so (`Gathered.notices`, the knowledge record's notice). begin_reply does
not search: what it is given is what the reply uses.

After a reply ends, its tool calls (chat/tool_round.py) decide what follows: `after_reply`,
`decided` and `call_finished` answer with a `Next` (the calls to run now, then: ask the user,
wait for the calls, let the model go on, or stop). The window runs the calls and binds the cards;
the decisions are made here. GPT4All's `Chat` (gpt4all-chat/src/chat.cpp) drives its turn the
same way, with retrieval on the worker's thread before prompting.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from inglenook.chat import images as chat_images
from inglenook.chat import knowledge_turn, tool_round
from inglenook.chat.history import images_sent
from inglenook.chat.knowledge_turn import KnowledgeTurn, OpenIndex
from inglenook.chat.session import ChatSession, ReplyOptions
from inglenook.core.attachments import Attachment
from inglenook.core.load import ModelInfo
from inglenook.store import StoreError
from inglenook.tools.approval import DECISIONS, Decision
from inglenook.tools.catalog import ToolCatalog
from inglenook.tools.results import ToolResult

# The tools of these servers as one catalog, and why any could not be listed (server → why;
# "" names no server). It may block: gather calls it off the window's thread.
ListTools = Callable[[Sequence[str]], tuple[ToolCatalog, Mapping[str, str]]]


def options_for(model: ModelInfo | None, extend: bool = False) -> ReplyOptions:
    """What the loaded model's template does, as a reply is asked of it (no model: none)."""
    if model is None:
        return ReplyOptions(extend=extend)
    return ReplyOptions(model.traits, model.tool_format, n_ctx=model.n_ctx,
                        vision=model.vision, extend=extend)


@dataclass(frozen=True)
class Gathered:
    """What a turn found: the options to begin the reply with (its catalog, its passages),
    and what to tell the user about what it could not find."""

    options: ReplyOptions
    continuing: bool = False
    notices: tuple[str, ...] = ()


@dataclass(frozen=True)
class Turn:
    """A snapshot of what a reply needs, taken on the thread that owns the chat's store."""

    options: ReplyOptions
    continuing: bool = False  # the model goes on after its tool calls' results
    servers: tuple[str, ...] = ()  # tool servers to list: the chat's, on, for a model that calls
    images: tuple[Attachment, ...] = ()  # the history's images, for a model that sees
    collections: tuple[str, ...] = ()  # searched for `question` unless `kept` answers
    question: str = ""
    kept: KnowledgeTurn | None = None  # the replaced reply's passages: given again, not searched

    @classmethod
    def take(cls, session: ChatSession, options: ReplyOptions, servers: Sequence[str] = (),
             *, continuing: bool = False) -> Turn:
        """`options`: the loaded model's (options_for); `servers`: the tool servers that are on
        (mcp.json), of which those the chat uses are listed when the model can call tools."""
        policy = session.settings.tools
        used = tuple(s for s in servers if policy.uses(s)) if options.tool_format else ()
        images = tuple(images_sent(session.path)) if options.vision else ()
        collections = tuple(session.settings.knowledge)
        kept = _kept_passages(session, collections, continuing)
        question = session.question() if collections and kept is None else ""
        return cls(options, continuing, used, images, collections, question, kept)

    @property
    def idle(self) -> bool:
        """Nothing to gather that could wait: gather() returns at once on any thread."""
        return not self.servers and not self.images and (not self.collections or
                                                         self.kept is not None)

    def gather(self, list_tools: ListTools | None = None,
               open_index: OpenIndex = knowledge_turn.default_index) -> Gathered:
        """The tools listed, the images hashed and written, the passages found: on any
        thread, one after the other (each of them may wait; none of them raises)."""
        notices: list[str] = []
        catalog = None
        if self.servers and list_tools is not None:
            catalog, notice = _listed(list_tools, self.servers)
            notices += [notice] if notice else []
        if self.images:
            chat_images.ready(self.images)  # a file not written is said when the request is made
        knowledge = self.kept if self.kept is not None else _searched(
            self.collections, self.question, self.options.n_ctx, open_index)
        options = dataclasses.replace(self.options, catalog=catalog, knowledge=knowledge)
        return Gathered(options, self.continuing, tuple(notices))


def _kept_passages(session: ChatSession, collections: tuple[str, ...],
                   continuing: bool) -> KnowledgeTurn | None:
    """Regenerating (or continuing) a reply gives the new one the passages the replaced one
    was given while the chat uses the same collections, so the two differ by sampling alone;
    a notice, or other collections, search again."""
    outline = session.path.outline
    if continuing or not collections or not outline or outline.roles[-1] != "assistant":
        return None
    given = knowledge_turn.recorded(session.path[-1].provenance)
    if given is None or given.collections != collections or given.notice:
        return None
    return given


def _listed(list_tools: ListTools, servers: Sequence[str]) -> tuple[ToolCatalog | None, str]:
    try:
        catalog, errors = list_tools(servers)
    except Exception as exc:  # the tool servers are closing, or their thread is gone
        catalog, errors = ToolCatalog(()), {"": str(exc) or type(exc).__name__}
    notice = "Some tools are not available: " + "; ".join(
        f"{name}: {why}" if name else why for name, why in errors.items()) if errors else ""
    return catalog, notice


def _searched(collections: Sequence[str], question: str, n_ctx: int,
              open_index: OpenIndex) -> KnowledgeTurn | None:
    try:
        return knowledge_turn.for_question(collections, question, n_ctx, open_index)
    except Exception as exc:  # an embedder that failed, not only an unreadable index
        return KnowledgeTurn(tuple(collections), "",
                             notice=f"Answered without your documents: {exc}")


# ---- what follows a reply ------------------------------------------------------------------
Then = Literal["stop", "ask", "wait", "continue"]


@dataclass(frozen=True)
class Next:
    """What follows: start the calls `run` (their indices in the tool round), then `then`:
    stop (nothing follows), ask (a call waits for the user's answer), wait (calls are running),
    continue (every call is answered: ask the model to go on). `notice`: what to tell the user,
    an "error" (the store refused a write) or "info" (the round stopped at the limit)."""

    run: tuple[int, ...] = ()
    then: Then = "stop"
    notice: str = ""
    kind: Literal["error", "info"] = "error"


def after_reply(session: ChatSession) -> Next:
    """A reply ended: run what the chat allows without asking; go on if nothing is asked."""
    tools = session.tool_round
    if tools is None:
        return Next()
    notice = _written(session, session.allow_calls)
    # Allowed calls run even when the store refused to record it (it is written again with
    # the next card that changes).
    return _settled(session, tuple(i for i, c in enumerate(tools.cards) if c.state == "running"),
                    notice)


def decided(session: ChatSession, message_id: int, index: int, answer: str) -> Next:
    """The user answered a card of the reply `message_id`: run it when allowed."""
    tools = session.tool_round
    if tools is None or tools.message_id != message_id or answer not in DECISIONS:
        return Next()
    decision: Decision = answer  # one of DECISIONS (narrowed by the check)
    notice = _written(session, lambda: session.decide_call(index, decision))
    run = (index,) if decision != "deny" and tools.cards[index].state == "running" else ()
    return _settled(session, run, notice)


def call_finished(session: ChatSession, tools: tool_round.ToolRound, index: int,
                  result: ToolResult) -> Next:
    """A call of the round `tools` answered; nothing when the user moved on meanwhile."""
    if session.tool_round is not tools:
        return Next()
    notice = _written(session, lambda: session.call_finished(index, result))
    return _settled(session, (), notice)


def stop_calls(session: ChatSession) -> str:
    """Esc while calls wait: none of them runs, and the model does not go on. What to tell
    the user ("" when all went well)."""
    return _written(session, session.stop_calls)


def _settled(session: ChatSession, run: tuple[int, ...], notice: str) -> Next:
    tools = session.tool_round
    if tools is None:
        return Next(run, notice=notice)
    if not tools.done:
        return Next(run, "ask" if tools.awaiting() else "wait", notice)
    if not session.tools_may_go_on():
        if notice:
            return Next(run, notice=notice)
        return Next(run, notice=f"«{session.title}» stopped after {tool_round.MAX_TOOL_ROUNDS} "
                    "replies in a row that called tools. Send a message to let the model go "
                    "on.", kind="info")
    return Next(run, "continue", notice)


def _written(session: ChatSession, write: Callable[[], object]) -> str:
    """Make a write of the tool round; what to tell the user when the store refused it."""
    try:
        write()
    except StoreError as exc:
        return f"Could not save the tool call in «{session.title}»: {exc}"
    return ""
