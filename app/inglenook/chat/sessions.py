"""The open sessions of the window, by conversation and by the reply in flight; the engine's
events about a reply go to its session through them, and say whether it is the one on screen."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from inglenook.core.replies import Finish, Stats
from inglenook.store import StoredMessage, StoreError

if TYPE_CHECKING:
    from inglenook.chat.session import ChatSession
    from inglenook.core.load import ModelInfo

RETRY_UNSAVED_S = 5  # how often the window tries again to write a reply the store refused


@dataclass(frozen=True)
class Event:
    """An engine event, taken in by the session of its reply. `problem`: the reply could not
    be saved (a store error, kept in memory and said to the user); `message`: the reply as
    saved when it ended."""

    session: ChatSession
    on_screen: bool
    problem: str = ""
    message: StoredMessage | None = None


def not_saved_yet(session: ChatSession, exc: StoreError) -> str:
    when = "once there is room" if exc.reason == "full" else "as soon as it can be"
    return (f"The reply in «{session.title}» is not saved yet: {str(exc).rstrip('.')}. It is "
            f"kept, and saved {when}: tried again every {RETRY_UNSAVED_S} s and when "
            "Inglenook closes.")


class Sessions:
    """The open sessions: the one on screen, and every one with a reply in flight.

    A session that is neither is let go (its messages are in the store), so memory stays
    bounded however many chats the user visits.
    """

    def __init__(self) -> None:
        self._by_conv: dict[int, ChatSession] = {}
        self._by_request: dict[int, ChatSession] = {}
        self.shown: ChatSession | None = None

    def show(self, session: ChatSession) -> None:
        """`session` is on screen now; the one before is let go unless it is busy."""
        previous, self.shown = self.shown, session
        self.keep(session)
        if previous is not None and previous is not session:
            self.release(previous, session)

    # ---- the engine's events ---------------------------------------------------------------

    def _event(self, request_id: int, problem: str = "",
               message: StoredMessage | None = None) -> Event | None:
        session = self._by_request.get(request_id)
        return None if session is None else Event(session, session is self.shown, problem,
                                                   message)

    def started(self, request_id: int) -> Event | None:
        event = self._event(request_id)
        if event is not None:
            event.session.reply_started()
        return event

    def prompt_read(self, request_id: int, done: int, total: int) -> Event | None:
        event = self._event(request_id)
        if event is not None and event.session.reply is not None:
            event.session.reply.prompt_done, event.session.reply.prompt_total = done, total
        return event

    def delta(self, request_id: int, text: str) -> Event | None:
        session = self._by_request.get(request_id)
        if session is None:
            return None
        try:
            session.reply_delta(text)
        except StoreError as exc:  # kept in memory; saved again at the end
            return self._event(request_id, f"Could not save the reply as it streams: {exc}")
        return self._event(request_id)

    def stats(self, request_id: int, stats: Stats) -> Event | None:
        event = self._event(request_id)
        if event is not None:
            event.session.reply_stats(stats)
        return event

    def finished(self, request_id: int, finish: Finish, model: ModelInfo | None,
                 sha256: str) -> Event | None:
        """The reply ended: saved as it ended, and its session let go if it is not on
        screen and waits for nothing."""
        session = self._by_request.get(request_id)
        if session is None:
            return None
        problem, message = "", None
        try:
            message = session.finish_reply(finish, model, sha256)
        except StoreError as exc:
            problem = not_saved_yet(session, exc)
        event = self._event(request_id, problem, message)
        self.reply_ended(request_id)
        self.release(session, self.shown)
        return event

    # ---- replies the store refused -----------------------------------------------------------

    def unsaved(self) -> list[ChatSession]:
        """Sessions holding an ended reply that is not saved yet (they are kept: busy)."""
        shown = [self.shown] if self.shown is not None else []
        return [s for s in dict.fromkeys([*self._by_conv.values(), *shown])
                if s.unsaved is not None]

    def save_unsaved(self) -> tuple[list[tuple[ChatSession, StoredMessage | None]], str]:
        """Try again to write every reply the store refused: those now saved (with the message
        as saved), and what to tell the user about those still not ("" when none)."""
        saved: list[tuple[ChatSession, StoredMessage | None]] = []
        problem = ""
        for session in self.unsaved():
            try:
                saved.append((session, session.save_unsaved()))
            except StoreError as exc:
                problem = problem or not_saved_yet(session, exc)
                continue
            self.release(session, self.shown)
        return saved, problem

    # ---- keeping ---------------------------------------------------------------------------

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
        """Forget `session` unless it is on screen, still replying or waiting for tools."""
        if session is visible or session.busy:
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
