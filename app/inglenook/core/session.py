"""A conversation as a session: its settings, its branch on screen, and its reply in flight.

Qt-free. The window binds the visible session to its views; sessions with a reply in flight live
on while the user looks at another chat (core.sessions.Sessions keeps them). Everything a chat
owns is here and saved with it: the system prompt and sampling values (the preset they came
from, or none when edited by hand), the messages, and the reply as it streams — written in
batches (at most every SAVE_INTERVAL_S), so a crash keeps what the user saw; the store marks a
reply left 'streaming' as 'interrupted' when it next opens.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from inglenook.core.attachments import Attachment, estimate_tokens, inline
from inglenook.core.load import ModelInfo
from inglenook.core.messages import (
    DEFAULT_OVERFLOW,
    OVERFLOW_POLICIES,
    GenerationRequest,
    Message,
    OverflowPolicy,
    build_messages,
)
from inglenook.core.provenance import Provenance
from inglenook.core.replies import Finish, Stats
from inglenook.core.sampling import SamplingParams
from inglenook.core.settings import DEFAULT_SYSTEM_PROMPT
from inglenook.store import Preset, Store, StoredMessage

SAVE_INTERVAL_S = 0.5
TITLE_LENGTH = 48
OWNER_PREFIX = "chat:"  # the engine scheduler's name for a chat: chats take turns by owner



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


@dataclass(frozen=True)
class ChatSettings:
    """What one chat is answered with. `preset` names the preset the values came from; None
    once the user edited them by hand (shown as "Custom")."""

    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    sampling: SamplingParams = field(default_factory=SamplingParams)
    preset: str | None = None
    overflow: OverflowPolicy = DEFAULT_OVERFLOW  # what to leave out when the context is full

    def replace(self, **changes: object) -> ChatSettings:
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    def to_dict(self) -> dict:
        return {"system_prompt": self.system_prompt, "sampling": self.sampling.to_dict(),
                "overflow": self.overflow}

    @classmethod
    def of_preset(cls, preset: Preset) -> ChatSettings:
        return cls(preset.system_prompt, preset.sampling, preset.name)  # overflow: default

    @classmethod
    def stored(cls, preset: str | None, values: dict | None, presets: Sequence[Preset],
               fallback: ChatSettings) -> ChatSettings:
        """A chat's settings as the store holds them: its own values when it has them, else
        its preset's (chats from before v2), else `fallback` (the defaults for new chats)."""
        if isinstance(values, dict):
            prompt = values.get("system_prompt")
            sampling = values.get("sampling")
            overflow = values.get("overflow")
            return cls(prompt if isinstance(prompt, str) else fallback.system_prompt,
                       SamplingParams.from_dict(sampling) if isinstance(sampling, dict)
                       else fallback.sampling, preset,
                       overflow if overflow in OVERFLOW_POLICIES else fallback.overflow)
        named = next((p for p in presets if preset and p.name.casefold() == preset.casefold()),
                     None)
        if named is None:
            return fallback
        return cls.of_preset(named).replace(overflow=fallback.overflow)

    def matching_preset(self, presets: Sequence[Preset]) -> str | None:
        """The preset whose values these are, if any (values typed back by hand count)."""
        if self.preset and any(p.name == self.preset for p in presets):
            return self.preset
        return next((p.name for p in presets if p.sampling == self.sampling
                     and p.system_prompt == self.system_prompt), None)


ReplyPhase = Literal["waiting", "streaming"]


@dataclass
class Reply:
    """The reply in flight: queued behind another chat's, then streaming."""

    request: GenerationRequest
    message_id: int
    phase: ReplyPhase = "waiting"
    text: str = ""
    stats: Stats | None = None
    prompt_done: int = 0
    prompt_total: int = 0

    @property
    def request_id(self) -> int:
        return self.request.request_id


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
        self.path: list[StoredMessage] = []
        self.reply: Reply | None = None
        self.settings_dirty = False
        self._clock = clock
        self._saved_text = ""
        self._saved_at = 0.0

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

    def reload(self) -> None:
        if self.conv_id is not None:
            self.path = self.store.active_path(self.conv_id)

    @property
    def replying(self) -> bool:
        return self.reply is not None

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
        text = "".join(m.content for m in self.messages())
        return estimate_tokens(text), not text

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
    def turns(self) -> list[Message]:
        """The branch on screen as chat turns. A reply that failed without writing anything is
        left out together with its question, so roles keep alternating."""
        return [Message(m.role, inline(m.content, m.attachments))  # type: ignore[arg-type]
                for m in self._turn_messages(self.path)]

    @staticmethod
    def _turn_messages(path: Sequence[StoredMessage]) -> list[StoredMessage]:
        kept: list[StoredMessage] = []
        for message in path:
            if message.role == "assistant" and not message.content:
                if kept and kept[-1].role == "user":
                    kept.pop()
                continue
            if message.role in ("user", "assistant", "system", "tool"):
                kept.append(message)
        return kept

    def left_out(self, reply_id: int) -> list[int]:
        """Ids of the messages the model did not see when it wrote this reply: the run its
        figures name (Stats.dropped_start/dropped_messages index the request's messages, the
        system prompt first when there is one)."""
        index = next((i for i, m in enumerate(self.path) if m.id == reply_id), None)
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
        turns = self._turn_messages(self.path[:index])
        start = stats.dropped_start - offset
        return [m.id for m in turns[max(start, 0):start + stats.dropped_messages]]

    def request_for(self, message_id: int, request_id: int) -> GenerationRequest | None:
        """The request that made this reply (its system prompt and sampling as recorded, the
        branch before it), for showing the exact prompt it was made from."""
        index = next((i for i, m in enumerate(self.path) if m.id == message_id), None)
        if index is None:
            return None
        reply = self.path[index]
        before = ChatSession(self.store, self.settings)
        before.path = self.path[:index]
        prov = reply.provenance
        system = prov.system_prompt if prov.sampling is not None else self.settings.system_prompt
        return GenerationRequest(request_id, build_messages(system, before.turns()),
                                 prov.sampling or self.settings.sampling,
                                 overflow=self.settings.overflow)

    def messages(self) -> tuple[Message, ...]:
        """The conversation as it would be sent now: system prompt, then the turns."""
        return build_messages(self.settings.system_prompt, self.turns())

    # ---- writing --------------------------------------------------------------------------
    def add_user(self, text: str, attachments: Sequence[Attachment] = ()) -> StoredMessage:
        """The user's message: what was typed, and the files attached to it (inlined into
        what the model reads, shown apart in the transcript)."""
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
        parent = self.path[-1].id if self.path else None
        self.store.add_message(self.conv_id, "user", text, parent, attachments=attachments)
        self.reload()
        return self.path[-1]

    def edit_user(self, message_id: int, text: str) -> StoredMessage:
        """A new version of an earlier question: a sibling branch that becomes the one shown
        (with the original's attachments)."""
        original = next(m for m in self.path if m.id == message_id)
        assert self.conv_id is not None
        self.store.add_message(self.conv_id, "user", text, original.parent_id,
                               attachments=original.attachments)
        self.reload()
        return self.path[-1]

    def select_sibling(self, message_id: int, step: int) -> None:
        """Show the version `step` away (‹ -1, › +1) of the message on screen."""
        ids = [m.id for m in self.store.siblings(message_id)]
        target = ids.index(message_id) + step
        if 0 <= target < len(ids):
            self.path = self.store.select_sibling(ids[target])

    def show_message(self, message_id: int) -> None:
        """Put a message (a search hit on another branch) on screen."""
        self.path = self.store.select_sibling(message_id)

    def delete_from(self, message_id: int) -> None:
        self.store.delete_from(message_id)
        self.reload()

    # ---- the reply ------------------------------------------------------------------------
    def begin_reply(self, request_id: int) -> GenerationRequest | None:
        """Start a reply to the last question (a new version when the last message is already
        a reply: Regenerate). Writes the empty reply; None when there is nothing to answer."""
        if self.reply is not None or self.conv_id is None or not self.path:
            return None
        turns = self.turns()
        if turns and turns[-1].role == "assistant":
            turns.pop()
        if not turns or turns[-1].role != "user":
            return None
        request = GenerationRequest(request_id, build_messages(self.settings.system_prompt, turns),
                                    self.settings.sampling, conversation=self.owner,
                                    overflow=self.settings.overflow)
        last = self.path[-1]
        parent = last.id if last.role == "user" else last.parent_id
        message_id = self.store.add_message(self.conv_id, "assistant", "", parent,
                                            status="streaming")
        self.reply = Reply(request, message_id)
        self._saved_text, self._saved_at = "", self._clock()
        self.reload()
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
        reply.text += text
        now = self._clock()
        if reply.text == self._saved_text or now - self._saved_at < SAVE_INTERVAL_S:
            return False
        self._saved_text, self._saved_at = reply.text, now
        self.store.update_message(reply.message_id, reply.text)
        return True

    def reply_stats(self, stats: Stats) -> None:
        if self.reply is not None:
            self.reply.stats = stats

    def finish_reply(self, finish: Finish, model: ModelInfo | None,
                     sha256: str = "") -> StoredMessage | None:
        """Save the reply as it ended (stopped and failed replies are marked by `finish`)."""
        reply, self.reply = self.reply, None
        if reply is None:
            return None
        status = "error" if finish.reason == "error" else "complete"
        provenance = Provenance.of_reply(model, reply.request, reply.stats, finish, sha256)
        try:
            self.store.update_message(reply.message_id, reply.text, status=status,
                                      provenance=provenance)
        finally:
            self.reload()
        return next((m for m in self.path if m.id == reply.message_id), None)


def conversation_of(owner: str) -> int | None:
    """The conversation id of a scheduler owner, if it is a chat's."""
    rest = owner[len(OWNER_PREFIX):]
    return int(rest) if owner.startswith(OWNER_PREFIX) and rest.isdigit() else None


class Sessions:
    """The open sessions: the one on screen, and every one with a reply in flight.

    A session that is neither is let go (its messages are in the store), so memory stays
    bounded however many chats the user visits.
    """

    def __init__(self) -> None:
        self._by_conv: dict[int, ChatSession] = {}
        self._by_request: dict[int, ChatSession] = {}

    def find(self, conv_id: int) -> ChatSession | None:
        return self._by_conv.get(conv_id)

    def keep(self, session: ChatSession) -> None:
        if session.conv_id is not None:
            self._by_conv[session.conv_id] = session
        if session.reply is not None:
            self._by_request[session.reply.request_id] = session

    def by_request(self, request_id: int) -> ChatSession | None:
        return self._by_request.get(request_id)

    def release(self, session: ChatSession, visible: ChatSession | None) -> None:
        """Forget `session` unless it is on screen or still replying."""
        if session is visible or session.reply is not None:
            return
        if session.conv_id is not None and self._by_conv.get(session.conv_id) is session:
            del self._by_conv[session.conv_id]

    def reply_ended(self, request_id: int) -> None:
        self._by_request.pop(request_id, None)

    def replying(self) -> list[ChatSession]:
        return list(dict.fromkeys(self._by_request.values()))

    def forget(self, conv_id: int) -> None:
        self._by_conv.pop(conv_id, None)

    def __len__(self) -> int:
        return len(self._by_conv)
