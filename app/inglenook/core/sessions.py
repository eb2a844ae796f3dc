"""The open sessions of the window, by conversation and by the reply in flight."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from inglenook.core.session import ChatSession

OWNER_PREFIX = "chat:"  # the engine scheduler's name for a chat: chats take turns by owner


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
