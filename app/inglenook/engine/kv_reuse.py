"""Which part of a prompt the engine need not evaluate again, and making a sequence's KV cells
hold it.

The engine decodes several sequences at once, each in a slot of its own (a llama.cpp sequence
id), each with a KV stream of its own or all drawing cells from one shared pool (see
engine/host/llama/context.py). A slot keeps what it holds after its reply, so a
conversation that comes back while its slot was not needed continues at once. When a slot is
given to something else, what it holds is saved in the StateCache first (only then: never after
every reply). A request starts from whichever holds more of its prompt: what its slot holds,
what another slot holds (copied, not read again: llama_memory_seq_cp; in a pool the cells get a
second owner), or a saved state (a conversation's, or a long system prompt's), found by the
longest common prefix of tokens. Only the common prefix is kept; the rest is evaluated.

Every key is scoped to a principal (the window; one API token; clients without a token): a
slot's cells and a saved state are reused only by requests of the same principal. A cache
shared between principals is a channel: how much of a guessed prompt was cached (and how fast
the reply started) would tell one client what another sent.

When history was left out of the middle of a conversation to fit the context, the cells are
shifted instead of evaluated again (llama.cpp's context shift): the block left out is removed
and the positions after it are moved down. Their KV entries were computed with the left-out
block in view, as in llama.cpp's own context shift; only done when the request's messages were
left out, never to follow an edit of earlier messages.

No llama_cpp here: the host hands in its sequences as `KvMemory`s.
"""

from __future__ import annotations

import itertools
import time
import zlib
from collections.abc import Collection, Sequence
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
MIN_COPY_TOKENS = 16  # another slot's cells are copied only for this many (see copy_threshold)
MIN_SHIFT_MATCH = 32  # tokens that must line up after a removed block before it is shifted
MIN_PREFIX_TOKENS = 256  # a system prompt this long keeps a state of its own
ADOPT_SLACK = 4  # an unnamed request continues a state it extends to within this many tokens
_MAX_SHIFT_CANDIDATES = 256
_T = TOKEN_BYTES

SEP = "\x1f"  # between a key's principal and its name
PREFIX = "prefix:"  # the names of system prompt states
CHECKPOINT = "prompt-end:"  # a conversation's state where its last prompt ended
ANON = "anon:"  # the names given to conversations their client did not name
CacheSource = Literal["", "live", "slot", "ram", "disk"]


def scoped(principal: str, name: str) -> str:
    """The key of a conversation (or a system prompt) `name` of a principal."""
    return f"{principal}{SEP}{name}"


def principal_of(key: str) -> str:
    return key.partition(SEP)[0]


def name_of(key: str) -> str:
    return key.partition(SEP)[2]


def prefix_key(tokens: bytes) -> str:
    return f"{PREFIX}{count(tokens)}:{zlib.crc32(tokens):08x}"


def checkpoint_key(key: str) -> str:
    return scoped(principal_of(key), CHECKPOINT + name_of(key))


def owner_of(key: str) -> str:
    """The conversation a state belongs to: its own key, or the one it is a checkpoint of."""
    name = name_of(key)
    return scoped(principal_of(key), name.removeprefix(CHECKPOINT))


class KvMemory(Protocol):
    """One sequence's KV cells, as the host drives llama.cpp."""

    def tokens(self) -> bytes:
        """The tokens it holds, packed (kv_states.pack)."""
        ...

    def keep(self, n: int) -> bool:
        """Forget every token from the n-th on; False when it cannot (recurrent memory, or
        n inside an image placed with M-RoPE, whose embeddings share one position)."""
        ...

    def can_keep(self, n: int) -> bool:
        """Whether keep(n) would succeed: always for dense memory; for a window-only
        sliding-window cache while its cells still cover the window before n; for recurrent
        state only when nothing is cut (n at least the tokens held)."""
        ...

    def cut(self, start: int, end: int) -> bool:
        """Remove positions [start, end) and move later tokens down; False when it cannot."""
        ...

    def copy_from(self, other: KvMemory, n: int) -> None:
        """Hold the first n tokens of another sequence (what it held before is gone)."""
        ...

    def save(self) -> bytearray: ...

    def restore(self, data: bytearray, tokens: bytes) -> bool:
        """Load a saved state; False (and nothing held) when llama.cpp refuses it."""
        ...

    def clear(self) -> None: ...


@dataclass(frozen=True)
class Reuse:
    cached: int = 0  # prompt tokens already in the KV cells, not evaluated again
    source: CacheSource = ""  # where they came from ("" when none)
    shifted: int = 0  # tokens removed from the middle of the cells by a context shift
    restore_s: float = 0.0  # time to read and load a saved state, or to copy another slot
    key: str = ""  # the key the slot's content is kept under from now on


def copy_threshold(n_ctx_seq: int, pooled: bool = False) -> int:
    """The shared prefix worth copying from another slot rather than reading. A copy across KV
    streams moves the whole stream, whatever it holds: for a 2,048-cell slot of the bundled
    model it cost ~10 ms inside the next llama_decode on a 2-core VM, where reading a prompt
    cost ~3.5 ms a token. The cost grows with the slot, so larger slots need a longer prefix.
    In a pool the cells are shared, not copied: the least is enough."""
    return MIN_COPY_TOKENS if pooled else max(MIN_COPY_TOKENS, n_ctx_seq // 512)


class SlotStates:
    """The slots of one loaded model and the states it keeps, shared by all of them.
    `min_copy`: the shared prefix worth copying from another slot (copy_threshold).
    `together`: keep busy slots' ids consecutive (a KV stream per slot: llama.cpp decodes
    only sequences with consecutive ids in one pass; a pool decodes any set)."""

    def __init__(self, memories: Sequence[KvMemory], cache: StateCache,
                 min_copy: int = MIN_COPY_TOKENS, together: bool = True,
                 whole_only: bool = False, restored_whole: bool = False) -> None:
        self.memories = list(memories)
        # Memory that cannot be cut back at all (recurrent state, core/families.py): a saved
        # state counts only when the prompt extends all of it. A slot's cells count as far as
        # they can be cut back (KvMemory.can_keep: a window-only sliding cache while its cells
        # cover the window before the cut).
        self.whole_only = whole_only
        # Saved states that cannot be cut back once restored (recurrent, or a window-only
        # sliding cache: MemoryFamily.restored_whole): only one the prompt extends is
        # restored, and a state is kept where each prompt ended too (keep_checkpoint).
        self.restored_whole = whole_only or restored_whole
        self.cache = cache
        self.min_copy = min_copy
        self.together = together
        self.live = [""] * len(self.memories)  # each slot's key; "" when it holds nothing known
        self._used = [0] * len(self.memories)  # when each slot was last given out
        self._clock = itertools.count(1)
        self._anon = itertools.count(1)

    # ---- giving a request a slot --------------------------------------------------------------
    def admit(self, key: str, prompt: Sequence[int], may_shift: bool,
              busy: Collection[int] = ()) -> tuple[int, Reuse]:
        """A free slot for a request of `key` (a name of "" when its client named none), made
        to hold as much of `prompt` as can be had but its last token (always evaluated, for
        fresh logits): the caller evaluates the rest. Raises LookupError when all are busy."""
        principal = principal_of(key)
        target = pack(prompt)
        slot = self._choose(key, target, may_shift, set(busy))
        self._used[slot] = next(self._clock)
        memory = self.memories[slot]
        if not self.live[slot] or principal_of(self.live[slot]) != principal:
            self._evict(slot)  # another principal's cells are never read
        own = self._gain(memory.tokens(), target, may_shift, memory) if self.live[slot] else 0
        donor, copied = self._donor(slot, principal, target, busy)
        state, saved = self._best_saved(principal, key, target, may_shift)
        source: CacheSource = "live"
        restore_s = 0.0
        content, content_tokens, gain = self.live[slot], memory.tokens(), own
        started = time.perf_counter()
        if donor is not None and copied >= max(own + self.min_copy, saved):
            content, content_tokens, gain = self.live[donor], self.memories[donor].tokens(), copied
            self._evict(slot)
            memory.copy_from(self.memories[donor], copied)
            source, restore_s = "slot", time.perf_counter() - started
            if donor not in busy and _adoptable(key, content, content_tokens, gain):
                self.live[donor] = scoped(principal, "")  # its conversation moves here
        elif state is not None and saved >= own + MIN_GAIN_TOKENS:
            spilled = state.data is None
            data = self.cache.load(state)  # None: a bad file (forgotten); the slot stays
            if data is not None:
                content, content_tokens, gain = owner_of(state.key), state.tokens, saved
                self._evict(slot)
                source = "disk" if spilled else "ram"
                restored = memory.restore(data, state.tokens)
                # In a shared pool it needs room: idle slots' cells are saved and freed.
                while (not restored and not self.together
                       and self.free_idle({*busy, slot})):
                    restored = memory.restore(data, state.tokens)
                if not restored:
                    self.cache.drop(state.key)  # llama.cpp refused it (another build, say)
                    memory.clear()
            restore_s = time.perf_counter() - started
        new_key = key
        if not name_of(key):
            new_key = (content if _adoptable(key, content, content_tokens, gain)
                       else scoped(principal, f"{ANON}{next(self._anon)}"))
        if source == "live" and self.live[slot] != new_key:
            self._save(slot)  # what the slot holds is about to change: keep it first
        self.live[slot] = new_key
        for other, live in enumerate(self.live):  # an older copy of it must not be saved
            if other != slot and live == new_key and other not in busy:
                self.live[other] = scoped(principal, "")
        cached, shifted = self._trim(memory, target, len(prompt), may_shift)
        return slot, Reuse(cached, source if cached else "", shifted, restore_s, new_key)

    def _choose(self, key: str, target: bytes, may_shift: bool, busy: set[int]) -> int:
        """With a stream per slot llama.cpp decodes only sequences with consecutive ids in
        one forward pass, so the slot must keep the busy ones together (`together`). Among
        those: the one holding this conversation, else an empty one (a shared start is then
        copied into it, and what the others hold stays), else the one holding most of the
        prompt, else the one used longest ago."""
        free = [s for s in range(len(self.memories)) if s not in busy]
        if not free:
            raise LookupError("every slot is busy")
        placeable = free
        if self.together:
            fewest = min(_runs(busy | {s}) for s in free)
            placeable = [s for s in free if _runs(busy | {s}) == fewest]
        principal = principal_of(key)

        def gain(s: int) -> int:
            if not self.live[s] or principal_of(self.live[s]) != principal:
                return 0
            return self._gain(self.memories[s].tokens(), target, may_shift, self.memories[s])

        for s in placeable:
            held = self.memories[s].tokens()
            if self.live[s] and (self.live[s] == key if name_of(key) else _adoptable(
                    key, self.live[s], held, gain(s))):
                return s
        empty = [s for s in placeable if not count(self.memories[s].tokens())]
        if empty:
            return empty[0]
        best = max(placeable, key=gain)
        if gain(best) >= MIN_GAIN_TOKENS:
            return best
        return min(placeable, key=self._used.__getitem__)

    def _donor(self, slot: int, principal: str, target: bytes,
               busy: Collection[int]) -> tuple[int | None, int]:
        """The other slot of this principal sharing the longest prefix with the prompt (busy or
        not: a reply in progress keeps its prompt's cells), and how long."""
        best, length = None, 0
        for s, memory in enumerate(self.memories):
            if s == slot or not self.live[s] or principal_of(self.live[s]) != principal:
                continue
            n = self._usable(memory.tokens(), target, common_prefix(memory.tokens(), target),
                             memory)
            if n > length:
                best, length = s, n
        return best, length

    def _trim(self, memory: KvMemory, target: bytes, n_prompt: int,
              may_shift: bool) -> tuple[int, int]:
        held = memory.tokens()
        cached = common_prefix(held, target)
        shifted = 0
        if may_shift and cached < count(held):
            end, match = find_shift(held, target, cached)
            if match >= MIN_SHIFT_MATCH and memory.cut(cached, end):
                shifted = end - cached
                cached = common_prefix(memory.tokens(), target)
        cached = min(cached, n_prompt - 1)
        if not memory.keep(cached):
            memory.clear()  # recurrent memory cannot be trimmed to a prefix: start over
            cached = 0
        return cached, shifted

    def free_idle(self, busy: Collection[int]) -> bool:
        """Room in the pool: the cells of the slot idle longest that holds any are saved to
        the state cache (as when another chat takes its slot) and freed. False when no idle
        slot holds any."""
        idle = [s for s in range(len(self.memories))
                if s not in busy and count(self.memories[s].tokens())]
        if not idle:
            return False
        self._evict(min(idle, key=self._used.__getitem__))
        return True

    def release(self, slot: int) -> None:
        """The slot's reply ended; what it holds stays for whoever continues it."""
        self._used[slot] = next(self._clock)

    # ---- system prompts -----------------------------------------------------------------------
    def wants_prefix(self, slot: int, prompt: Sequence[int], boundary: int, cached: int) -> bool:
        """Whether to keep a state of the prompt's first `boundary` tokens (a long system
        prompt) when evaluation passes them."""
        principal = principal_of(self.live[slot])
        return (boundary >= MIN_PREFIX_TOKENS and cached < boundary < len(prompt) - 1
                and self.cache.get(scoped(principal, prefix_key(pack(prompt[:boundary]))))
                is None)

    def keep_prefix(self, slot: int) -> None:
        """Called when the slot holds exactly the system prompt's tokens."""
        memory = self.memories[slot]
        tokens = memory.tokens()
        key = scoped(principal_of(self.live[slot]), prefix_key(tokens))
        self.cache.put(key, tokens, memory.save())

    # ---- where a prompt ended -----------------------------------------------------------------
    def wants_checkpoint(self, slot: int, prompt: Sequence[int]) -> bool:
        """Whether to keep a state where this prompt ends (memory whose restored states
        cannot be cut back: see __init__), for a conversation with a name."""
        return (self.restored_whole and len(prompt) >= MIN_SAVE_TOKENS
                and bool(name_of(self.live[slot])))

    def keep_checkpoint(self, slot: int) -> None:
        """Called when the slot holds its prompt but the last token: the conversation's next
        turn extends it, and so does the same prompt (a reply regenerated)."""
        if not name_of(self.live[slot]):
            return  # the conversation was deleted while its prompt was read
        memory, key = self.memories[slot], checkpoint_key(self.live[slot])
        tokens = memory.tokens()
        kept = self.cache.get(key)
        if kept is None or kept.tokens != tokens:  # a reply regenerated: kept already
            self.cache.put(key, tokens, memory.save())

    # ---- changes ------------------------------------------------------------------------------
    def park(self, slot: int) -> None:
        """Something other than a conversation will use this slot (tuning): what it holds is
        saved, as when another chat takes it, to be restored later."""
        self._evict(slot)

    def forget(self, key: str) -> None:
        """A conversation was deleted: its state goes, and its slot's cells are not saved."""
        self.cache.drop(key)
        self.cache.drop(checkpoint_key(key))
        for slot, live in enumerate(self.live):
            if live == key:
                self.live[slot] = scoped(principal_of(key), "")

    def reset(self) -> None:
        """The model or its settings changed: no state is valid any more."""
        self.cache.clear()
        self.live = [""] * len(self.memories)

    def close(self) -> None:
        """The engine unloads the model: what each slot holds is saved, and the cache keeps
        it all on disk for the next engine of the same model and layout (kv_states)."""
        if self.cache.validity:
            for slot, live in enumerate(self.live):
                if live:
                    self._save(slot)
            self.cache.persist()
        self.reset()

    # ---- inside -------------------------------------------------------------------------------
    def _save(self, slot: int) -> None:
        tokens = self.memories[slot].tokens()
        if name_of(self.live[slot]) and count(tokens) >= MIN_SAVE_TOKENS:
            self.cache.put(self.live[slot], tokens, self.memories[slot].save())

    def _evict(self, slot: int) -> None:
        if self.live[slot]:
            self._save(slot)
        self.memories[slot].clear()
        self.live[slot] = ""

    def _best_saved(self, principal: str, key: str, target: bytes,
                    may_shift: bool) -> tuple[SavedState | None, int]:
        best, gain = self.cache.longest_prefix(
            target, lambda k: principal_of(k) == principal, whole=self.restored_whole)
        own = self.cache.get(key) if name_of(key) else None
        if own is not None and (may_shift or self.whole_only):  # after a shift, or whole
            own_gain = self._gain(own.tokens, target, may_shift)
            if own_gain > gain:
                best, gain = own, own_gain
        return best, min(gain, count(target) - 1)

    def _gain(self, tokens: bytes, target: bytes, may_shift: bool,
              memory: KvMemory | None = None) -> int:
        """How many prompt tokens `tokens` (a slot's `memory`, or a saved state's) would spare
        evaluating."""
        n = common_prefix(tokens, target)
        if self.whole_only:
            return self._usable(tokens, target, n, memory)
        if memory is not None and not memory.can_keep(min(n, count(target) - 1)):
            return 0
        if may_shift and n < count(tokens):
            _, match = find_shift(tokens, target, n)
            if match >= MIN_SHIFT_MATCH:
                n += match
        return n

    def _usable(self, tokens: bytes, target: bytes, n: int,
                memory: KvMemory | None = None) -> int:
        """Of `n` shared tokens, those a slot can keep: all but the prompt's last (read again
        for fresh logits), as far as the slot's `memory` can be cut back; of a saved state
        with whole_only, all the held ones or none."""
        usable = min(n, count(target) - 1)
        if usable >= count(tokens):
            return usable
        if memory is not None:
            return usable if memory.can_keep(usable) else 0
        return 0 if self.whole_only else usable


def _adoptable(key: str, content: str, tokens: bytes, gain: int) -> bool:
    """An unnamed request continues an unnamed conversation whose cells it extends."""
    return (not name_of(key) and name_of(content).startswith(ANON)
            and principal_of(content) == principal_of(key)
            and gain >= count(tokens) - ADOPT_SLACK)


def _runs(slots: Collection[int]) -> int:
    """How many runs of consecutive ids `slots` makes ({0, 1, 3}: 2)."""
    return sum(1 for s in slots if s - 1 not in slots)


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
