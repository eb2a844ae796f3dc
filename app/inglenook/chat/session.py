"""A conversation as a session: its settings, its branch on screen, and its reply in flight.

Qt-free. The window binds the visible session to its views; sessions with a reply in flight live
on while the user looks at another chat (chat.sessions.Sessions keeps them). Everything a chat
owns is here and saved with it: the system prompt and sampling values (the preset they came
from, or none when edited by hand), the messages, and the reply as it streams — written in
batches (at most every SAVE_INTERVAL_S), so a crash keeps what the user saw; the store marks a
reply left 'streaming' as 'interrupted' when it next opens. A reply that ends while the store
cannot take it (a full disk) is kept whole in memory (UnsavedReply) and written when it can:
save_unsaved() (the window tries again every few seconds and when it closes), and before
anything else of the chat is written, so that what follows it never sees it empty.

A reply is read as it streams (chat/reply_parts.py): reasoning and answer apart, each saved in
its own column, and tool calls as cards. A reply that called tools is followed by its tool round
(chat/tool_round.py) until every call is answered; then the model continues (a new reply, the
child of the one that called).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from inglenook.chat import knowledge_turn, reply_edits, tool_round
from inglenook.chat.chat_settings import EFFORTS as EFFORTS  # re-exported: first defined here
from inglenook.chat.chat_settings import ChatSettings as ChatSettings
from inglenook.chat.history import NextPrompt, next_prompt, sent_turns, turn_rows
from inglenook.chat.reply_parts import ReplyParts
from inglenook.chat.tool_round import ToolRound
from inglenook.core.attachments import Attachment, estimate_tokens
from inglenook.core.context import reply_reserve
from inglenook.core.load import ModelInfo
from inglenook.core.messages import GenerationRequest, Message, build_messages
from inglenook.core.provenance import Provenance
from inglenook.core.reasoning import TemplateTraits
from inglenook.core.replies import Finish, Stats
from inglenook.store import Preset, Store, StoredMessage, StoreError
from inglenook.store.branch import Branch
from inglenook.tools.approval import Decision
from inglenook.tools.catalog import ToolCatalog
from inglenook.tools.results import ToolResult

SAVE_INTERVAL_S = 0.5
OWNER_PREFIX = "chat:"  # the engine scheduler's name for a chat: chats take turns by owner
TITLE_LENGTH = 48


def conversation_of(owner: str) -> int | None:
    """The conversation id of a scheduler owner, if it is a chat's."""
    rest = owner[len(OWNER_PREFIX):]
    return int(rest) if owner.startswith(OWNER_PREFIX) and rest.isdigit() else None


def title_from(text: str) -> str:
    """A conversation title from its first message: the first line, shortened at a word."""
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "New chat")
    if len(line) <= TITLE_LENGTH:
        return line
    cut = line[:TITLE_LENGTH].rsplit(" ", 1)[0] or line[:TITLE_LENGTH]
    return cut.rstrip(" ,.;:") + "…"


def unique_title(title: str, taken: set[str]) -> str:
    """The title, or "title (2)", "(3)"… when another conversation already has it."""
    n, candidate = 1, title
    while candidate in taken:
        n += 1
        candidate = f"{title} ({n})"
    return candidate


ReplyPhase = Literal["waiting", "streaming"]


@dataclass(frozen=True)
class UnsavedReply:
    """A reply that ended when the store refused to write it (`problem`: the store's words):
    what finish_reply would have written, kept until the store takes it."""

    message_id: int
    content: str
    status: str
    provenance: Provenance
    reasoning: str
    tool_cards: tuple
    problem: str = ""


@dataclass(frozen=True)
class ReplyOptions:
    """What the loaded model's template does (ModelInfo.traits, tool_format) and the tools the
    chat offers it (None or empty: none)."""

    traits: TemplateTraits = field(default_factory=TemplateTraits)
    tool_format: str = ""
    catalog: ToolCatalog | None = None
    n_ctx: int = 0  # the model's context: a long chat sends only what could fit (0: all)
    knowledge: knowledge_turn.KnowledgeTurn | None = None  # the passages (chat/turn.py gathers)
    vision: bool = False  # the model sees images: they are sent as images, not named
    extend: bool = False  # Continue: the last reply goes on from where it was cut or stopped

    @property
    def offers_tools(self) -> bool:
        return bool(self.tool_format) and self.catalog is not None and len(self.catalog) > 0


@dataclass
class Reply:
    """The reply in flight: queued behind another chat's, then streaming."""

    request: GenerationRequest
    message_id: int
    parts: ReplyParts = field(default_factory=ReplyParts)
    phase: ReplyPhase = "waiting"
    stats: Stats | None = None
    prompt_done: int = 0
    prompt_total: int = 0
    history_reasoning: str = ""  # Provenance.history_reasoning
    catalog: ToolCatalog | None = None
    left_behind: tuple[int, int] = (0, 0)  # (at, messages) not sent at all: see _history
    knowledge: knowledge_turn.KnowledgeTurn | None = None  # passages given, or why none

    @property
    def request_id(self) -> int:
        return self.request.request_id

    @property
    def text(self) -> str:
        """The answer so far (without the reasoning and the tool calls)."""
        return self.parts.answer

    @property
    def reasoning(self) -> str:
        return self.parts.reasoning


class ChatSession:
    """One conversation. Unsaved until its first message (conv_id None).

    Store failures come out as StoreError; the caller shows them and the session stays as it
    was before the call (every write reloads the branch from the store).
    """

    def __init__(self, store: Store, settings: ChatSettings | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.store = store
        self.settings = settings or ChatSettings()
        self.conv_id: int | None = None
        self.title = "New chat"
        self.path = Branch()  # the branch on screen, read page by page
        self.reply: Reply | None = None
        self.tool_round: ToolRound | None = None  # calls waiting for approval or answers
        self.unsaved: UnsavedReply | None = None  # an ended reply the store could not take yet
        self.settings_dirty = False
        self._clock = clock
        self.wall_clock: Callable[[], float] = time.time  # reasoning times are stored as dates
        self._saved: tuple[str, str, int] = ("", "", 0)
        self._saved_at = 0.0
        self._next_prompt: tuple[object, NextPrompt | None] = (None, None)

    @classmethod
    def open(cls, store: Store, conv_id: int, presets: Sequence[Preset],
             fallback: ChatSettings, clock: Callable[[], float] = time.monotonic
             ) -> ChatSession:
        preset, values = store.chat_settings(conv_id)
        session = cls(store, ChatSettings.stored(preset, values, presets, fallback), clock)
        session.conv_id = conv_id
        session.title = store.conversation(conv_id).title
        session.reload()
        return session

    def reload(self, from_index: int = 0) -> None:
        """Read the branch again from position `from_index` on (a write changed it there)."""
        if self.conv_id is None:
            return
        if self.path.conv_id != self.conv_id:
            self.path = Branch(self.store, self.conv_id)
        else:
            self.path.refresh_from(from_index)

    def _index_of(self, message_id: int) -> int:
        index = self.path.index_of(message_id)
        if index is None:
            raise KeyError(f"message {message_id} is not on the branch shown")
        return index

    @property
    def busy(self) -> bool:
        """A reply is in flight, or its tool calls are, or it is not saved yet: the session
        must be kept."""
        return self.reply is not None or self.tool_round is not None or self.unsaved is not None

    @property
    def owner(self) -> str:
        return f"{OWNER_PREFIX}{self.conv_id}"

    def context_used(self) -> tuple[int, bool]:
        """Tokens of this chat the model sees, and whether that is exact: the engine's count
        after the last reply, else an estimate from the text (until the next reply)."""
        reply = self.reply
        if reply is not None and reply.stats is not None:
            return reply.stats.context_used, True
        last = self.path[-1] if self.path else None
        if last is not None and last.provenance.stats is not None:
            return last.provenance.stats.context_used, True
        used = self._outline_tokens()
        return used, not used

    def _outline_tokens(self) -> int:
        """The whole chat estimated from the outline: a long chat is not read for it."""
        outline = self.path.outline
        chars = sum(outline.chars[i] + outline.attached[i] for i in turn_rows(outline))
        system = self.settings.system_prompt
        return estimate_tokens(system) + (chars + 3) // 4 if chars else estimate_tokens(system)

    def next_prompt(self, n_ctx: int) -> NextPrompt | None:
        """What the next request will hold when the chat has outgrown a context of `n_ctx`
        (chat.history.next_prompt: the messages it leaves out, its tokens estimated); None
        when it all fits or the chat stops at the limit. Kept until the branch or the
        settings change: it reads the recent part of the chat."""
        settings, outline = self.settings, self.path.outline
        if n_ctx <= 0 or settings.overflow == "stop" or not outline:
            return None
        key = (id(self.path), len(outline), outline.ids[-1], settings.system_prompt,
               settings.overflow, settings.sampling.max_tokens, n_ctx)
        if self._next_prompt[0] != key:
            budget = n_ctx - reply_reserve(n_ctx, settings.sampling.max_tokens)
            ahead = next_prompt(self.path, settings, n_ctx) \
                if self._outline_tokens() > budget else None
            self._next_prompt = (key, ahead)
        return self._next_prompt[1]

    # ---- settings -------------------------------------------------------------------------
    def set_settings(self, settings: ChatSettings) -> None:
        """Takes effect with the next reply; saved by save_settings() (the window debounces)."""
        if settings != self.settings:
            self.settings = settings
            self.settings_dirty = True

    def save_settings(self) -> None:
        if self.settings_dirty and self.conv_id is not None:
            self.store.set_chat_settings(self.conv_id, self.settings.preset,
                                         self.settings.to_dict())
        self.settings_dirty = self.conv_id is None and self.settings_dirty

    # ---- what the model sees --------------------------------------------------------------
    def turns(self, reads_reasoning: bool = False) -> list[Message]:
        """The branch on screen as chat turns. A reply that failed without writing anything is
        left out together with its question, so roles keep alternating. Earlier reasoning goes
        with its reply only for a template that reads it back (`reads_reasoning`); a reply
        that called tools is followed by their results."""
        return sent_turns(self.path, self.settings, len(self.path), reads_reasoning)[0]

    def left_out(self, reply_id: int) -> list[int]:
        """Ids of the messages the model did not see when it wrote this reply: the run its
        figures name (Stats.dropped_start/dropped_messages index the request's messages, the
        system prompt first when there is one)."""
        index = self.path.index_of(reply_id)
        if index is None:
            return []
        reply = self.path[index]
        stats = (self.reply.stats if self.reply is not None and self.reply.message_id == reply_id
                 else reply.provenance.stats)
        if stats is None or not stats.dropped_messages:
            return []
        system = reply.provenance.system_prompt if reply.provenance.sampling is not None \
            else self.settings.system_prompt
        offset = 1 if system.strip() else 0  # the request's messages start with it
        turns = turn_rows(self.path.outline, index)
        start = stats.dropped_start - offset
        ids = self.path.outline.ids
        return [ids[i] for i in turns[max(start, 0):start + stats.dropped_messages]]

    def request_for(self, message_id: int, request_id: int, n_ctx: int = 0,
                    vision: bool = False) -> GenerationRequest | None:
        """The request that made this reply (its system prompt and sampling as recorded, the
        branch before it as it was sent to a model of context `n_ctx`), for showing the exact
        prompt it was made from."""
        index = self.path.index_of(message_id)
        if index is None:
            return None
        reply = self.path[index]
        prov = reply.provenance
        system = prov.system_prompt if prov.sampling is not None else self.settings.system_prompt
        turns, _ = sent_turns(self.path, self.settings, index,
                              prov.history_reasoning == "sent", n_ctx, vision)
        messages = knowledge_turn.with_passages(build_messages(system, turns),
                                                knowledge_turn.recorded(prov))  # as given
        return GenerationRequest(request_id, messages,
                                 prov.sampling or self.settings.sampling,
                                 overflow=self.settings.overflow,
                                 enable_thinking=prov.enable_thinking,
                                 reasoning_effort=prov.reasoning_effort,
                                 reply_format=prov.reply_format)

    def messages(self) -> tuple[Message, ...]:
        """The conversation as it would be sent now: system prompt, then the turns."""
        return build_messages(self.settings.system_prompt, self.turns())

    # ---- writing --------------------------------------------------------------------------
    def add_user(self, text: str, attachments: Sequence[Attachment] = ()) -> StoredMessage:
        """The user's message: what was typed, and the files attached to it (inlined into
        what the model reads, shown apart in the transcript). Tool calls still waiting for
        approval are answered as stopped: the user moved on."""
        self.save_unsaved()  # first: the reply before this question must not read as empty
        self.stop_calls()
        if self.conv_id is None:
            first = text if text.strip() or not attachments else attachments[0].name
            self.title = unique_title(title_from(first), {c.title for c in
                                                          self.store.conversations()})
            self.conv_id = self.store.create_conversation(self.title, self.settings.preset)
            self.settings_dirty = True
            try:
                self.save_settings()
            except Exception:
                self.conv_id = None  # nothing was written that the user would miss
                raise
        at = len(self.path)
        parent = self.path[-1].id if self.path else None
        self.store.add_message(self.conv_id, "user", text, parent, attachments=attachments)
        self.reload(at)
        return self.path[-1]

    def edit_user(self, message_id: int, text: str,
                  attachments: Sequence[Attachment] | None = None) -> StoredMessage:
        """A new version of an earlier question: a sibling branch that becomes the one shown,
        with these of the original's attachments (None: all of them)."""
        at = self._index_of(message_id)
        original = self.path[at]
        assert self.conv_id is not None
        self.save_unsaved()
        self.stop_calls()
        self.store.add_message(self.conv_id, "user", text, original.parent_id,
                               attachments=original.attachments if attachments is None
                               else attachments)
        self.reload(at)
        return self.path[-1]

    def edit_reply(self, message_id: int, text: str) -> StoredMessage:
        """The user's version of a reply: a sibling branch, shown, that later turns build on
        (the original and what followed it stay one ‹ › away)."""
        at = self._index_of(message_id)
        original = self.path[at]
        if original.role != "assistant":
            raise KeyError(f"message {message_id} is not a reply")
        assert self.conv_id is not None
        self.stop_calls()
        self.store.add_message(self.conv_id, "assistant", text, original.parent_id,
                               provenance=reply_edits.edited(original.provenance),
                               reasoning=original.reasoning)
        self.reload(at)
        return self.path[-1]

    def select_sibling(self, message_id: int, step: int) -> None:
        """Show the version `step` away (‹ -1, › +1) of the message on screen."""
        self.stop_calls()  # another branch: what waits on this one is answered as stopped
        ids = [m.id for m in self.store.siblings(message_id)]
        target = ids.index(message_id) + step
        if 0 <= target < len(ids):
            at = self._index_of(message_id)
            self.store.show(ids[target])
            self.reload(at)

    def show_message(self, message_id: int) -> None:
        """Put a message (a search hit on another branch) on screen."""
        self.stop_calls()
        self.store.show(message_id)
        index = self.path.index_of(message_id)
        self.reload(0 if index is None else index)

    def delete_from(self, message_id: int) -> None:
        self.stop_calls()
        at = self._index_of(message_id)
        self.store.delete_from(message_id)
        self.reload(at)

    # ---- the reply ------------------------------------------------------------------------
    def question(self) -> str:
        """What a reply now searches the chat's collections for: the user's last message as
        typed (its attached files are not searched for)."""
        roles = self.path.outline.roles
        last = next((i for i in range(len(roles) - 1, -1, -1) if roles[i] == "user"), None)
        return self.path[last].content if last is not None else ""

    def begin_reply(self, request_id: int, options: ReplyOptions | None = None, *,
                    continuing: bool = False) -> GenerationRequest | None:
        """Start a reply to the last question (a new version when the last message is already
        a reply: Regenerate), or, `continuing`, the model's reply to the results of the tool
        calls the last reply made, or (`options.extend`) a new version of the last reply that
        goes on from where it was cut or stopped: Continue. Writes the reply (empty, or the
        text continued); None when there is nothing to answer. Its passages are those in
        `options` (chat/turn.py gathers them)."""
        if self.reply is not None or self.conv_id is None or not self.path:
            return None
        if continuing and (self.tool_round is None or not self.tool_round.done):
            return None
        self.save_unsaved()  # the history sent must hold the reply kept in memory
        options = options or ReplyOptions()
        extend = options.extend
        if extend and (continuing or not reply_edits.can_continue(self.path[-1])):
            return None
        traits, outline = options.traits, self.path.outline
        kept = len(outline) - (0 if continuing or outline.roles[-1] != "assistant" else 1)
        if kept == 0:
            return None
        turns, behind = sent_turns(self.path, self.settings, kept, traits.reads_reasoning,
                                   options.n_ctx, options.vision)
        # After tool results the model continues; regenerating that continuation does too.
        if not turns or turns[-1].role not in (("tool",) if continuing else ("user", "tool")):
            return None
        s = self.settings
        messages = build_messages(s.system_prompt, turns)
        replaced = self.path[-1] if kept < len(outline) and not continuing else None
        knowledge = options.knowledge  # never searched here: chat/turn.py did, off the GUI thread
        request = GenerationRequest(
            request_id, knowledge_turn.with_passages(messages, knowledge), s.sampling,
            conversation=self.owner, overflow=s.overflow,
            tools=tuple(options.catalog.template_tools()) if options.offers_tools
            and options.catalog is not None else (),
            enable_thinking=s.thinking if traits.thinking_switch else None,
            reasoning_effort=s.reasoning_effort if traits.effort else "",
            reply_format=s.reply_format)
        parts = ReplyParts(traits.reasoning, options.tool_format,
                           options.catalog if options.offers_tools else None, self.wall_clock)
        if extend and replaced is not None:  # read again as streamed, then continued
            prefill = reply_edits.written(replaced.content, replaced.reasoning,
                                          traits.reasoning)
            request = dataclasses.replace(request, prefill=prefill)
            parts.feed(prefill)
        parent = outline.ids[kept - 1]
        message_id = self.store.add_message(self.conv_id, "assistant", parts.answer, parent,
                                            status="streaming", reasoning=parts.reasoning)
        reasoned = any(outline.reasoning[i] for i in range(kept)
                       if outline.roles[i] == "assistant")
        self.reply = Reply(request, message_id, parts, catalog=options.catalog,
                           history_reasoning="" if not reasoned else "sent"
                           if traits.reads_reasoning else "left out", left_behind=behind,
                           knowledge=knowledge)
        self.tool_round = None
        self._saved, self._saved_at = ("", "", 0), self._clock()
        self.reload(kept)
        return request

    def reply_started(self) -> None:
        if self.reply is not None:
            self.reply.phase = "streaming"

    def reply_delta(self, text: str) -> bool:
        """New text of the reply; saved when SAVE_INTERVAL_S has passed. True when saved."""
        reply = self.reply
        if reply is None:
            return False
        reply.phase = "streaming"
        parts = reply.parts
        parts.feed(text)
        now = self._clock()
        state = (parts.answer, parts.reasoning, len(parts.cards))
        if state == self._saved or now - self._saved_at < SAVE_INTERVAL_S:
            return False
        self._saved, self._saved_at = state, now
        self.store.update_message(reply.message_id, parts.answer, reasoning=parts.reasoning,
                                  provenance=Provenance(
                                      reasoning_started_at=parts.reasoning_started_at),
                                  tool_cards=parts.cards)
        return True

    def reply_stats(self, stats: Stats) -> None:
        """The engine's figures; what was left behind unsent counts as left out (the run the
        engine left out of what was sent starts where it does, or right after it)."""
        reply = self.reply
        if reply is None:
            return
        at, count = reply.left_behind
        if count:
            stats = dataclasses.replace(stats, dropped_start=at,
                                        dropped_messages=stats.dropped_messages + count)
        reply.stats = stats

    def finish_reply(self, finish: Finish, model: ModelInfo | None,
                     sha256: str = "") -> StoredMessage | None:
        """Save the reply as it ended (stopped and failed replies are marked by `finish`)."""
        reply, self.reply = self.reply, None
        if reply is None:
            return None
        parts = reply.parts
        parts.finish()
        status = "error" if finish.reason == "error" else "complete"
        provenance = Provenance.of_reply(model, reply.request, reply.stats, finish, sha256
                                         ).replace(
            reasoning_started_at=parts.reasoning_started_at,
            reasoning_ended_at=parts.reasoning_ended_at,
            history_reasoning=reply.history_reasoning)
        provenance = knowledge_turn.recording(provenance, reply.knowledge)
        tools = ToolRound.after_reply(reply.message_id, parts.cards, finish.reason == "stop",
                                      reply.catalog) if parts.cards else None
        ended = UnsavedReply(reply.message_id, parts.answer, status, provenance, parts.reasoning,
                             tuple(tools.cards) if tools else ())
        try:
            self._write(ended)
        except StoreError as exc:
            # Kept whole until the store takes it; its tool calls are not run meanwhile.
            self.unsaved = dataclasses.replace(ended, problem=str(exc))
            raise
        finally:
            at = self.path.index_of(reply.message_id)
            self.reload(0 if at is None else at)
        # Every call answered at once (an unknown tool) still needs the model to go on.
        self.tool_round = tools if finish.reason == "stop" else None
        return self.path.find(reply.message_id)

    def save_unsaved(self) -> StoredMessage | None:
        """Write the reply kept since the store refused it, if there is one; the message as
        saved. StoreError (and the reply still kept) while the store refuses."""
        ended = self.unsaved
        if ended is None:
            return None
        try:
            self._write(ended)
        except StoreError as exc:
            self.unsaved = dataclasses.replace(ended, problem=str(exc))
            raise
        except KeyError:  # the reply (or its chat) was deleted meanwhile: nothing to save
            self.unsaved = None
            return None
        self.unsaved = None
        at = self.path.index_of(ended.message_id)
        self.reload(0 if at is None else at)
        return self.path.find(ended.message_id)

    def _write(self, ended: UnsavedReply) -> None:
        self.store.update_message(ended.message_id, ended.content, status=ended.status,
                                  provenance=ended.provenance, reasoning=ended.reasoning,
                                  tool_cards=ended.tool_cards)

    # ---- tool calls -----------------------------------------------------------------------
    def decide_call(self, index: int, decision: Decision) -> None:
        """The user's answer to a card awaiting approval; "always" is kept with the chat."""
        tools = self.tool_round
        if tools is None or tools.cards[index].state != "awaiting":
            return
        card = tools.decide(index, decision)
        if decision == "always":
            self.set_settings(self.settings.replace(
                tools=self.settings.tools.decide(card.server, card.tool, decision)))
            self.save_settings()
        self._save_cards()

    def allow_calls(self) -> list[int]:
        """Start the calls this chat allows without asking; their indices."""
        tools = self.tool_round
        if tools is None:
            return []
        allowed = tools.allowed(self.settings.tools)
        for index in allowed:
            tools.decide(index, "always")
        if allowed:
            self._save_cards()
        return allowed

    def call_finished(self, index: int, result: ToolResult) -> None:
        if self.tool_round is not None:
            self.tool_round.finished(index, result)
            self._save_cards()

    def stop_calls(self) -> None:
        """The user stopped (or moved on): calls not yet answered never run."""
        if self.tool_round is not None:
            self.tool_round.stop()
            self._save_cards()
            self.tool_round = None

    def tool_rounds(self) -> int:
        """How many replies in a row since the last question called tools."""
        outline, rounds = self.path.outline, 0
        for index in range(len(outline) - 1, -1, -1):
            if outline.roles[index] != "assistant" or not outline.calls_tools[index]:
                break
            rounds += 1
        return rounds

    def tools_may_go_on(self) -> bool:
        """Every call of the tool round is answered: may the model be asked to go on? Not
        after MAX_TOOL_ROUNDS replies in a row that called tools (a model that keeps calling
        tools it may run without asking is not let go on forever): the round then ends."""
        if self.tool_rounds() < tool_round.MAX_TOOL_ROUNDS:
            return True
        self.tool_round = None
        return False

    def _save_cards(self) -> None:
        tools = self.tool_round
        at = self.path.index_of(tools.message_id) if tools is not None else None
        if tools is not None and at is not None:
            message = self.path[at]
            try:
                self.store.update_message(message.id, message.content, tool_cards=tools.cards)
            finally:
                self.reload(at)
