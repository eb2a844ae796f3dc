"""One open conversation: its branch on screen, what the model is sent, and saving while a
reply streams. Qt-free; the window drives it.

A streaming reply is written in batches (at most every SAVE_INTERVAL_S), so a crash keeps what
the user saw; the store marks a reply left 'streaming' as 'interrupted' when it next opens.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from inglenook.core.messages import Message
from inglenook.core.provenance import Provenance
from inglenook.store import Store, StoredMessage, StoreError

SAVE_INTERVAL_S = 0.5
TITLE_LENGTH = 48


def open_store() -> tuple[Store, str | None]:
    """The user's conversation database, or, when it cannot be opened at all (a read-only
    folder), a temporary one so the app still works; the message says so."""
    try:
        return Store(), None
    except StoreError as exc:
        fallback = Store(Path(tempfile.mkdtemp(prefix="inglenook-")) / "inglenook.db")
        return fallback, f"{exc} Conversations in this session will not be kept."


def title_from(text: str) -> str:
    """A conversation title from its first message: the first line, shortened at a word."""
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "New chat")
    if len(line) <= TITLE_LENGTH:
        return line
    cut = line[:TITLE_LENGTH].rsplit(" ", 1)[0] or line[:TITLE_LENGTH]
    return cut.rstrip(" ,.;:") + "…"


class ConversationSession:
    def __init__(self, store: Store, clock: Callable[[], float] = time.monotonic) -> None:
        self.store = store
        self.conv_id: int | None = None
        self.path: list[StoredMessage] = []
        self._clock = clock
        self._reply_id: int | None = None
        self._saved_text = ""
        self._saved_at = 0.0

    # ---- which conversation ---------------------------------------------------------------
    def open(self, conv_id: int) -> None:
        self.conv_id = conv_id
        self.path = self.store.active_path(conv_id)

    def new(self) -> None:
        """An empty chat; it is written to the store with its first message."""
        self.conv_id = None
        self.path = []

    def _reload(self) -> None:
        assert self.conv_id is not None
        self.path = self.store.active_path(self.conv_id)

    # ---- what the model sees --------------------------------------------------------------
    def turns(self) -> list[Message]:
        """The branch on screen as chat turns. A reply that failed without writing anything is
        left out together with its question, so roles keep alternating."""
        turns: list[Message] = []
        for message in self.path:
            if message.role == "assistant" and not message.content:
                if turns and turns[-1].role == "user":
                    turns.pop()
                continue
            if message.role in ("user", "assistant", "system"):
                turns.append(Message(message.role, message.content))  # type: ignore[arg-type]
        return turns

    # ---- writing --------------------------------------------------------------------------
    def add_user(self, text: str) -> StoredMessage:
        if self.conv_id is None:
            self.conv_id = self.store.create_conversation(title_from(text))
        parent = self.path[-1].id if self.path else None
        self.store.add_message(self.conv_id, "user", text, parent)
        self._reload()
        return self.path[-1]

    def edit_user(self, message_id: int, text: str) -> StoredMessage:
        """A new version of an earlier question: a sibling branch that becomes the one shown."""
        original = next(m for m in self.path if m.id == message_id)
        assert self.conv_id is not None
        self.store.add_message(self.conv_id, "user", text, original.parent_id)
        self._reload()
        return self.path[-1]

    def begin_reply(self) -> StoredMessage:
        """A new, empty assistant message under the last question (a sibling when the question
        already has replies: that is what Regenerate does)."""
        assert self.conv_id is not None
        last = self.path[-1]
        parent = last.id if last.role == "user" else last.parent_id
        self._reply_id = self.store.add_message(self.conv_id, "assistant", "", parent,
                                                status="streaming")
        self._saved_text, self._saved_at = "", self._clock()
        self._reload()
        return self.path[-1]

    def stream(self, text: str) -> bool:
        """The reply so far; saved when SAVE_INTERVAL_S has passed. True when it was saved."""
        if self._reply_id is None or text == self._saved_text:
            return False
        now = self._clock()
        if now - self._saved_at < SAVE_INTERVAL_S:
            return False
        self.store.update_message(self._reply_id, text)
        self._saved_text, self._saved_at = text, now
        return True

    def finish_reply(self, text: str, status: str, provenance: Provenance | None = None) -> None:
        if self._reply_id is None:
            return
        self.store.update_message(self._reply_id, text, status=status, provenance=provenance)
        self._reply_id = None
        self._reload()

    def select_sibling(self, message_id: int) -> None:
        self.path = self.store.select_sibling(message_id)

    @property
    def replying(self) -> bool:
        return self._reply_id is not None
