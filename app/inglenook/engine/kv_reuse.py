"""Which part of a prompt the engine need not evaluate again, and making the KV cache hold it.

The KV cache holds one conversation at a time (the live one). Before a request of another
conversation overwrites it, its state is saved in the StateCache under its key (so a state is
copied only when a chat is switched away from, never after every reply). A request then starts
from whichever holds more of its prompt: the live cache, its own saved state, or the saved state
of a long system prompt it starts with. Restored tokens are checked against the
new prompt: only their common prefix is kept, the rest is evaluated.

When history was left out of the middle of a conversation to fit the context, the cache is
shifted instead of evaluated again (llama.cpp's context shift): the block of tokens left out is
removed and the positions of the tokens after it are moved down. Their KV entries were computed
with the left-out block in view, as in llama.cpp's own context shift; only done when the
request's messages were left out, never to follow an edit of earlier messages.

No llama_cpp here: the host hands in its KV cache as a `KvMemory`.
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from inglenook.engine.kv_states import (
    TOKEN_BYTES,
    SavedState,
    StateCache,
    common_prefix,
    count,
    pack,
)

MIN_SAVE_TOKENS = 64  # below this, evaluating again is about as fast as restoring
MIN_GAIN_TOKENS = 16  # a saved state is restored only when it spares this many more tokens
MIN_SHIFT_MATCH = 32  # tokens that must line up after a removed block before it is shifted
MIN_PREFIX_TOKENS = 256  # a system prompt this long keeps a state of its own
_MAX_SHIFT_CANDIDATES = 256
_T = TOKEN_BYTES

PREFIX = "prefix:"  # the keys of system prompt states
CacheSource = Literal["", "live", "ram", "disk"]


class KvMemory(Protocol):
    """The engine's KV cache of one sequence, as the host drives llama.cpp."""

    def tokens(self) -> bytes:
        """The tokens it holds, packed (kv_states.pack)."""
        ...

    def keep(self, n: int) -> bool:
        """Forget every token from position n on; False when it cannot (recurrent memory)."""
        ...

    def cut(self, start: int, end: int) -> bool:
        """Remove positions [start, end) and move later tokens down; False when it cannot."""
        ...

    def save(self) -> bytearray: ...

    def restore(self, data: bytearray, tokens: bytes) -> bool:
        """Load a saved state; False (and the cache empty) when llama.cpp refuses it."""
        ...

    def clear(self) -> None: ...


@dataclass(frozen=True)
class Reuse:
    cached: int = 0  # prompt tokens already in the KV cache, not evaluated again
    source: CacheSource = ""  # where they came from ("" when none)
    shifted: int = 0  # tokens removed from the middle of the cache by a context shift
    restore_s: float = 0.0  # time to read and load a saved state


def prefix_key(tokens: bytes) -> str:
    return f"{PREFIX}{count(tokens)}:{zlib.crc32(tokens):08x}"


class ConversationStates:
    def __init__(self, memory: KvMemory, cache: StateCache) -> None:
        self.memory = memory
        self.cache = cache
        self.live = ""  # the conversation the KV cache holds ("" when none is to be kept)

    def prepare(self, conversation: str, prompt: Sequence[int], may_shift: bool) -> Reuse:
        """Make the KV cache hold as much of `prompt` (but its last token, which is always
        evaluated for fresh logits) as can be had; the caller evaluates the rest."""
        if self.live != conversation:
            self._save_live()
        self.live = conversation
        target = pack(prompt)
        live_gain = self._gain(self.memory.tokens(), target, may_shift)
        state, gain = self._best_saved(conversation, target, may_shift)
        source: CacheSource = "live"
        restore_s = 0.0
        if state is not None and gain >= live_gain + MIN_GAIN_TOKENS:
            started = time.perf_counter()
            spilled = state.data is None
            data = self.cache.load(state)  # None: a bad file, the live cache stays
            if data is not None:
                source = "disk" if spilled else "ram"
                if not self.memory.restore(data, state.tokens):
                    self.cache.drop(state.key)  # llama.cpp refused it (another build, say)
                    self.memory.clear()
            restore_s = time.perf_counter() - started
        live = self.memory.tokens()
        cached = common_prefix(live, target)
        shifted = 0
        if may_shift and cached < count(live):
            end, match = find_shift(live, target, cached)
            if match >= MIN_SHIFT_MATCH and self.memory.cut(cached, end):
                shifted = end - cached
                cached = common_prefix(self.memory.tokens(), target)
        cached = min(cached, len(prompt) - 1)
        if not self.memory.keep(cached):
            self.memory.clear()  # recurrent memory cannot be trimmed to a prefix: start over
            cached = 0
        return Reuse(cached, source if cached else "", shifted, restore_s)

    def wants_prefix(self, prompt: Sequence[int], boundary: int, cached: int) -> bool:
        """Whether to keep a state of the prompt's first `boundary` tokens (a long system
        prompt) when evaluation passes them."""
        return (bool(self.live) and boundary >= MIN_PREFIX_TOKENS
                and cached < boundary < len(prompt) - 1
                and self.cache.get(prefix_key(pack(prompt[:boundary]))) is None)

    def keep_prefix(self) -> None:
        """Called when the KV cache holds exactly the system prompt's tokens."""
        tokens = self.memory.tokens()
        self.cache.put(prefix_key(tokens), tokens, self.memory.save())

    def park(self) -> None:
        """Something other than a conversation will use the KV cache (tuning): the live
        conversation's state is saved, as when another chat runs, to be restored later."""
        self._save_live()
        self.live = ""

    def forget(self, conversation: str) -> None:
        """A conversation was deleted: its state goes, and the live cache is not saved."""
        self.cache.drop(conversation)
        if self.live == conversation:
            self.live = ""

    def reset(self) -> None:
        """The model or its settings changed: no state is valid any more."""
        self.cache.clear()
        self.live = ""

    def _save_live(self) -> None:
        tokens = self.memory.tokens()
        if self.live and count(tokens) >= MIN_SAVE_TOKENS:
            self.cache.put(self.live, tokens, self.memory.save())

    def _best_saved(self, conversation: str, target: bytes,
                    may_shift: bool) -> tuple[SavedState | None, int]:
        # Another conversation's state is never restored, even for the same tokens: how fast
        # a reply starts would tell an API client what another chat holds. System prompt
        # states are shared.
        best, gain = self.cache.longest_prefix(
            target, lambda key: key == conversation or key.startswith(PREFIX))
        own = self.cache.get(conversation) if conversation else None
        if own is not None and may_shift:  # its own state may line up after a shift
            own_gain = self._gain(own.tokens, target, may_shift)
            if own_gain > gain:
                best, gain = own, own_gain
        return best, gain

    @staticmethod
    def _gain(tokens: bytes, target: bytes, may_shift: bool) -> int:
        """How many prompt tokens `tokens` would spare evaluating."""
        n = common_prefix(tokens, target)
        if may_shift and n < count(tokens):
            _, match = find_shift(tokens, target, n)
            if match >= MIN_SHIFT_MATCH:
                n += match
        return n


def find_shift(live: bytes, target: bytes, start: int) -> tuple[int, int]:
    """Where the prompt continues in the cache after a removed block: (end, match) such that
    live[end:end + match] == target[start:start + match], the longest match (the nearest of
    equals); (start, 0) when nothing lines up."""
    rest = target[start * _T:]
    key = rest[: 8 * _T]
    best_end, best_match = start, 0
    at, seen = live.find(key, (start + 1) * _T), 0
    while at >= 0 and key and seen < _MAX_SHIFT_CANDIDATES:
        if at % _T == 0:
            seen += 1
            match = common_prefix(live[at:], rest)
            if match > best_match:
                best_end, best_match = at // _T, match
        at = live.find(key, at + 1)
    return best_end, best_match
