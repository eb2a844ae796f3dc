"""The Responses API's `previous_response_id`: each stored response's conversation (its input
turns and its output), kept in memory for the server's lifetime, per principal.

Kept only in memory: a response holds what a tool sent and what the model answered, and the
window never writes API traffic to disk. A server restart forgets them (a client then gets a
400 naming `previous_response_id` and sends the whole input, as with `store: false`). Each
principal (a token, or the clients without one; see replying.principal_of) has its own shelf,
bounded by count and by characters, its least recently used going first: one client's
responses never push out another's, and one principal never sees another's. The principals
themselves are bounded (MAX_PRINCIPALS, the least recently used shelf going whole), as
`--isolate-clients` makes one per client. The interface is the principal's: put and get name
it first, so a store kept elsewhere (the profile) can take this one's place.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field

from inglenook.core.messages import Message

MAX_RESPONSES = 512  # per principal
MAX_CHARS = 16_000_000  # per principal: ~32 MB of text
MAX_PRINCIPALS = 16  # shelves kept; a token's is used often, so it stays


@dataclass
class _Shelf:
    kept: OrderedDict[str, tuple[Message, ...]] = field(default_factory=OrderedDict)
    chars: int = 0


def _chars(messages: tuple[Message, ...]) -> int:
    return sum(len(m.content) + len(m.reasoning) for m in messages)


class ResponseStore:
    def __init__(self, max_responses: int | None = None, max_chars: int | None = None,
                 max_principals: int | None = None) -> None:
        self._max_responses = max_responses or MAX_RESPONSES
        self._max_chars = max_chars or MAX_CHARS
        self._max_principals = max_principals or MAX_PRINCIPALS
        self._shelves: OrderedDict[str, _Shelf] = OrderedDict()
        self._lock = threading.Lock()

    def put(self, principal: str, response_id: str, messages: tuple[Message, ...]) -> None:
        """Keep a response's conversation (without the request's instructions: they are
        never carried over) for this principal only."""
        with self._lock:
            shelf = self._shelves.get(principal)
            if shelf is None:
                shelf = self._shelves[principal] = _Shelf()
                while len(self._shelves) > self._max_principals:
                    self._shelves.popitem(last=False)
            self._shelves.move_to_end(principal)
            old = shelf.kept.pop(response_id, None)
            shelf.chars -= _chars(old) if old is not None else 0
            shelf.kept[response_id] = messages
            shelf.chars += _chars(messages)
            while shelf.kept and (len(shelf.kept) > self._max_responses
                                  or shelf.chars > self._max_chars):
                _, gone = shelf.kept.popitem(last=False)
                shelf.chars -= _chars(gone)

    def get(self, principal: str, response_id: str) -> tuple[Message, ...] | None:
        """The conversation up to and with this response; None when it is not kept (never
        stored, forgotten, or another principal's)."""
        with self._lock:
            shelf = self._shelves.get(principal)
            messages = shelf.kept.get(response_id) if shelf is not None else None
            if shelf is None or messages is None:
                return None
            self._shelves.move_to_end(principal)
            shelf.kept.move_to_end(response_id)
            return messages

    def __len__(self) -> int:
        with self._lock:
            return sum(len(shelf.kept) for shelf in self._shelves.values())
