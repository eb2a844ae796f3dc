"""The Responses API's `previous_response_id`: each stored response's conversation (its input
turns and its output), kept in memory for the server's lifetime, per principal.

Kept only in memory: a response holds what a tool sent and what the model answered, and the
window never writes API traffic to disk. A server restart forgets them (a client then gets a
400 naming `previous_response_id` and sends the whole input, as with `store: false`). Bounded
by count and by characters, the least recently used going first; one principal never sees
another's (a token is its own principal, see replying.principal_of).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

from inglenook.core.messages import Message

MAX_RESPONSES = 512
MAX_CHARS = 32_000_000  # ~64 MB of text in all


@dataclass(frozen=True)
class Stored:
    principal: str
    messages: tuple[Message, ...]  # without the request's instructions (never carried over)

    @property
    def chars(self) -> int:
        return sum(len(m.content) + len(m.reasoning) for m in self.messages)


class ResponseStore:
    def __init__(self, max_responses: int = MAX_RESPONSES, max_chars: int = MAX_CHARS) -> None:
        self._max_responses, self._max_chars = max_responses, max_chars
        self._kept: OrderedDict[str, Stored] = OrderedDict()
        self._chars = 0
        self._lock = threading.Lock()

    def put(self, response_id: str, principal: str, messages: tuple[Message, ...]) -> None:
        entry = Stored(principal, messages)
        with self._lock:
            self._kept[response_id] = entry
            self._chars += entry.chars
            while self._kept and (len(self._kept) > self._max_responses
                                  or self._chars > self._max_chars):
                _, gone = self._kept.popitem(last=False)
                self._chars -= gone.chars

    def get(self, response_id: str, principal: str) -> tuple[Message, ...] | None:
        """The conversation up to and with this response; None when it is not kept (never
        stored, forgotten, or another principal's)."""
        with self._lock:
            entry = self._kept.get(response_id)
            if entry is None or entry.principal != principal:
                return None
            self._kept.move_to_end(response_id)
            return entry.messages

    def __len__(self) -> int:
        return len(self._kept)
