"""The reply of the chat on screen as it arrives: the bubble it streams into, what it does before
its first word (status_changed: the status bar's reply field shows it), the queue notice while it
waits, and the notice on the reply that history was left out.

ChatController routes the engine's events through chat/sessions.py and hands this what belongs
to the chat on screen; replies of other chats go on in their sessions without drawing anything.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, QTimer, Signal

from inglenook.chat.session import ChatSession, Reply, conversation_of
from inglenook.chat.sessions import Sessions
from inglenook.core.replies import Finish
from inglenook.engine.scheduler import QueueState
from inglenook.store import StoredMessage
from inglenook.ui.chat.bubble import READING, WAITING, MessageBubble
from inglenook.ui.chat.chat_view import ChatView
from inglenook.ui.chat.context_meter import ahead_marker, left_out_marker
from inglenook.ui.chat.presenter import mark_stopped_thinking, show_answer
from inglenook.ui.chat.queue_notice import QueueNotice

SEARCHING = "Searching your documents…"


class ReplyOnScreen(QObject):
    """Signals:
        status_changed(str, int, int): what the reply on screen does before its first word
            ("" nothing), and the prompt's tokens read of its total (0, 0: no progress).
    """

    status_changed = Signal(str, int, int)

    def __init__(self, view: ChatView, queue_notice: QueueNotice, sessions: Sessions,
                 parent: QObject) -> None:
        super().__init__(parent)
        self.view = view
        self.said = ""  # the last status_changed text
        self.queue_notice, self.sessions = queue_notice, sessions
        self.bubble: MessageBubble | None = None  # the streaming reply's, while in view
        self.queue = QueueState(None, ())
        self._drawn: tuple[object, ...] = ()  # what the bubble shows (see draw)
        self._writing = False  # the reply has shown text: the status line's work is done
        self._marker: tuple[int, str] | None = None  # (message, text): history left out
        self._session: ChatSession | None = None
        self._flush_timer = QTimer(self, singleShot=True, interval=0)
        self._flush_timer.timeout.connect(self.flush)

    def reset(self, session: ChatSession) -> None:
        """Another chat (or the same one drawn again) is on screen."""
        self._flush_timer.stop()
        self.bubble, self._marker, self._session = None, None, session
        self._writing = False
        self._say("")  # the last chat's "Reading the prompt…" is not this one's

    # ---- bubbles as the view makes them ---------------------------------------------------
    def dress(self, bubble: MessageBubble, message: StoredMessage) -> None:
        """A bubble the view just made: its left-out notice, or the reply streaming into it."""
        if self._marker is not None and self._marker[0] == message.id:
            bubble.set_notice(self._marker[1], "info")
        reply = self._session.reply if self._session is not None else None
        if reply is not None and message.id == reply.message_id:
            self.bubble = bubble
            self.view.pin(message.id)
            self._drawn = ()
            self.draw(bubble, reply)
            bubble.set_streaming(True)
            if reply.stats is not None:
                bubble.set_stats(reply.stats)

    def draw(self, bubble: MessageBubble, reply: Reply) -> None:
        """The reply so far: its reasoning (open while the model thinks), its answer, and a
        notice while it writes a tool call. Drawn only when something changed."""
        parts = reply.parts
        state = (parts.answer, parts.reasoning, parts.thinking, parts.calling)
        if state == self._drawn:
            return
        self._drawn = state
        ended, started = parts.reasoning_ended_at, parts.reasoning_started_at
        bubble.set_reasoning(parts.reasoning, live=parts.thinking,
                             seconds=ended - started if ended and started else None)
        bubble.set_text(parts.answer)
        if parts.calling:
            bubble.set_notice("Writing a tool call…", "waiting")
        elif bubble.waiting and (parts.answer or parts.reasoning):
            bubble.set_notice("")

    def flush(self) -> None:
        """Draw what arrived since the last turn of the event loop."""
        self._flush_timer.stop()
        reply = self._session.reply if self._session is not None else None
        if reply is None or self.bubble is None:
            return
        if not self._writing and (reply.text or reply.reasoning or reply.parts.calling):
            self._writing = True
            self._say("")  # "Reading the prompt…" or its progress
        self.draw(self.bubble, reply)

    # ---- the engine's events, for the chat on screen --------------------------------------
    def started(self) -> None:
        self._writing = False
        self.show_phase()

    def prompt_read(self, done: int, total: int) -> None:
        if self._behind() is not None:
            return  # its bubble and the queue notice say it waits
        self._say(f"Reading the prompt: {done:,} / {total:,} tokens", done, total)

    def show_phase(self) -> None:
        """Before its first word, what the reply on screen is doing, said once on its bubble
        and the status line: waiting for another chat's reply, or reading its prompt (every
        model does that first; "Thinking…" belongs to a reasoning model's thoughts)."""
        session = self._session
        reply = session.reply if session is not None else None
        if reply is None or self._writing or reply.text or reply.reasoning:
            return
        if self._behind() is not None:
            if self.bubble is not None:
                self.bubble.set_notice(WAITING, "waiting")
            self._say("")  # the queue notice says for whom, with Stop
            return
        if self.bubble is not None and not self.bubble.text and not reply.parts.calling:
            self.bubble.set_notice(READING, "waiting")
        if reply.phase == "streaming" and not self.said.startswith(READING[:-1]):
            self._say(READING)

    def searching(self) -> None:
        """The chat on screen's turn searches its documents before the reply starts."""
        self._say(SEARCHING)

    def _say(self, text: str, done: int = 0, total: int = 0) -> None:
        self.said = text
        self.status_changed.emit(text, done, total)

    def _behind(self) -> tuple[str, int] | None:
        session = self._session
        reply = session.reply if session is not None else None
        if session is None or reply is None:
            return None
        return self.queue.ahead_of(session.owner, reply.request_id)

    def text_arrived(self) -> None:
        if not self._flush_timer.isActive():
            self._flush_timer.start()  # deltas queued while the GUI was busy: drawn once

    def stats(self, reply: Reply) -> bool:
        """Whether the stats were shown (the reply's bubble is in view)."""
        if reply.stats is None or self.bubble is None:
            return False
        self.bubble.set_stats(reply.stats)  # with what was left behind counted
        self.mark_left_out(reply.message_id)
        return True

    def finished(self, session: ChatSession, reply_id: int, finish: Finish,
                 message: StoredMessage | None) -> MessageBubble | None:
        """The reply ended; its bubble shows the message as saved. Returns that bubble."""
        bubble, self.bubble = self.bubble, None
        if bubble is not None:
            bubble.set_streaming(False)
            bubble.set_finish(finish)
            if message is not None:
                bubble.set_siblings(message.sibling_index, message.sibling_count)
                bubble.set_reasoning(message.reasoning, seconds=message.provenance.thinking_s)
                mark_stopped_thinking(bubble, message)
                show_answer(bubble, message)
        row = session.path.index_of(reply_id)
        self.view.pin(reply_id, False)
        if row is not None:
            self.view.changed(reply_id, session.path.outline[row])
        self.view.set_writing(False)
        self._say("")
        self.queue_notice.hide()
        return bubble if message is not None else None

    # ---- notices --------------------------------------------------------------------------
    def mark_left_out(self, reply_id: int | None, n_ctx: int = 0) -> None:
        """Only the latest reply's marker: it says what the model does not see now; without
        one (an imported chat, a question not answered yet), where the next request will cut
        a chat that outgrew a context of `n_ctx`."""
        if self._session is None:
            return
        marker = left_out_marker(self._session, reply_id) if reply_id is not None else None
        if marker is None and n_ctx > 0:
            marker = ahead_marker(self._session, n_ctx)
        if marker is None or marker == self._marker:
            return
        old = self.view.bubble_of(self._marker[0]) if self._marker is not None else None
        if old is not None and self._marker is not None and marker[0] != self._marker[0]:
            old.set_notice("")
        self._marker = marker
        bubble = self.view.bubble_of(marker[0])
        if bubble is not None:
            bubble.set_notice(marker[1], "info")

    def show_queue(self, state: QueueState | None = None) -> None:
        """Whether the reply on screen waits for another, and for whose."""
        if state is not None:
            self.queue = state
        behind = self._behind()
        if behind is None:
            self.queue_notice.hide()
        else:
            self.queue_notice.show_waiting(self._title_of(behind[0]), behind[1])
        self.show_phase()

    def _title_of(self, owner: str) -> str:
        if owner.startswith("api:"):
            return f"an API request from {owner[4:]}"
        conv_id = conversation_of(owner)
        session = self.sessions.find(conv_id) if conv_id is not None else None
        return session.title if session is not None else "another conversation"

    def stop_running(self) -> int | None:
        """The request id of the reply running now (the queue notice's Stop)."""
        running = self.queue.running
        return running[1] if running is not None else None

