"""What a prompt reuses, without llama.cpp: slots that keep what they hold, saved states found by
their longest common prefix, a slot's cells copied to another, and never anything of another
principal. On fake sequences that hold tokens."""

from __future__ import annotations

from array import array
from collections.abc import Sequence

import pytest

from inglenook import paths
from inglenook.engine.kv_reuse import (
    MIN_COPY_TOKENS,
    MIN_PREFIX_TOKENS,
    MIN_SAVE_TOKENS,
    KvMemory,
    SlotStates,
    checkpoint_key,
    copy_threshold,
    name_of,
    prefix_key,
    principal_of,
    scoped,
)
from inglenook.engine.kv_states import StateCache, pack


class FakeMemory:
    """A sequence's cells as tokens; its saved state is the tokens' bytes behind a tag."""

    def __init__(self) -> None:
        self.held: list[int] = []
        self.shiftable = True
        self.saves = 0
        self.copies = 0

    def tokens(self) -> bytes:
        return pack(self.held)

    def keep(self, n: int) -> bool:
        del self.held[n:]
        return True

    def can_keep(self, n: int) -> bool:
        return True

    def cut(self, start: int, end: int) -> bool:
        if self.shiftable:
            del self.held[start:end]
        return self.shiftable

    def copy_from(self, other: KvMemory, n: int) -> None:
        assert isinstance(other, FakeMemory)
        self.copies += 1
        self.held = other.held[:n]

    def save(self) -> bytearray:
        self.saves += 1
        return bytearray(b"S" + pack(self.held))

    def restore(self, data: bytearray, tokens: bytes) -> bool:
        if bytes(data) != b"S" + tokens:
            self.held = []
            return False
        self.held = list(array("i", tokens))
        return True

    def clear(self) -> None:
        self.held = []

    def evaluate(self, prompt: Sequence[int], cached: int) -> None:
        """What the host does after admit(): evaluate the rest of the prompt and a reply."""
        assert self.held == list(prompt[:cached])
        self.held = [*prompt, 7, 7]


def states(n: int = 1, ram: int = 10**9) -> tuple[SlotStates, list[FakeMemory]]:
    memories = [FakeMemory() for _ in range(n)]
    return SlotStates(memories, StateCache(ram, 10**9, paths.kv_state_dir)), memories


def prompt(*parts: range | list[int]) -> list[int]:
    return [t for part in parts for t in part]


SYSTEM = range(1000, 1000 + MIN_PREFIX_TOKENS + 20)
A = prompt(SYSTEM, range(0, 200))
B = prompt(range(5000, 5300))
ME, THEM = "window", "api"


def run(s: SlotStates, memories: list[FakeMemory], key: str, tokens: list[int],
        may_shift: bool = False, busy: Sequence[int] = ()) -> tuple[int, int, str, int]:
    """(slot, cached, source, shifted) of a request, after evaluating it and a reply."""
    slot, reuse = s.admit(key, tokens, may_shift, busy)
    memories[slot].evaluate(tokens, reuse.cached)
    s.release(slot)
    return slot, reuse.cached, reuse.source, reuse.shifted


def chat(n: int) -> str:
    return scoped(ME, f"chat:{n}")


def test_switching_in_one_slot_saves_the_conversation_and_restores_it_later() -> None:
    s, m = states()
    assert run(s, m, chat(1), A) == (0, 0, "", 0)
    a2 = [*A, 7, 7, 300, 301]  # the reply (7, 7) and a new message
    assert run(s, m, chat(1), a2) == (0, len(A) + 2, "live", 0)  # no switch: no save
    assert m[0].saves == 0
    assert run(s, m, chat(2), B) == (0, 0, "", 0)
    assert m[0].saves == 1  # chat 1 saved as its slot was taken
    a3 = [*a2, 7, 7, 400, 401]
    assert run(s, m, chat(1), a3)[1:3] == (len(a2) + 2, "ram")
    assert s.cache.get(chat(2)) is not None


def test_another_conversation_takes_an_empty_slot_and_nothing_is_saved() -> None:
    s, m = states(2)
    assert run(s, m, chat(1), A)[0] == 0
    assert run(s, m, chat(2), B)[0] == 1
    assert run(s, m, chat(1), [*A, 7, 7, 9])[:3] == (0, len(A) + 2, "live")
    assert m[0].saves == m[1].saves == 0


def test_busy_slots_stay_together_and_a_prompt_held_elsewhere_is_copied() -> None:
    s, m = states(4)
    chats = [A, B, prompt(range(8000, 8100)), prompt(range(9000, 9100))]
    assert [run(s, m, chat(i), chats[i])[0] for i in range(4)] == [0, 1, 2, 3]
    # Slot 1 busy: chat 0 continues where it is, next to it.
    assert run(s, m, chat(0), [*A, 7, 7, 5], busy=[1])[:3] == (0, len(A) + 2, "live")
    # Slots 0 and 1 busy: chat 3 goes next to them (slot 2, whose chat 2 is saved first),
    # its cells copied from slot 3, which then holds nothing to save.
    follow = [*chats[3], 7, 7, 5]
    assert run(s, m, chat(3), follow, busy=[0, 1])[:3] == (2, len(chats[3]) + 2, "slot")
    assert m[2].copies == 1 and s.cache.get(chat(2)) is not None
    assert s.live[2] == chat(3) and name_of(s.live[3]) == ""


def test_a_shared_system_prompt_is_copied_from_a_busy_slot() -> None:
    s, m = states(2)
    slot, reuse = s.admit(chat(1), A, False)
    m[slot].evaluate(A, reuse.cached)  # slot 0 is writing its reply (busy)
    other = prompt(SYSTEM, range(9000, 9050))
    slot2, reuse2 = s.admit(chat(2), other, False, busy=[slot])
    assert slot2 == 1 and reuse2.source == "slot" and reuse2.cached == len(SYSTEM)
    assert m[1].copies == 1 and m[1].held == list(SYSTEM)


def test_restored_tokens_that_differ_are_evaluated_again() -> None:
    s, m = states()
    run(s, m, chat(1), A)
    run(s, m, chat(2), B)
    edited = [*A[:250], 999, *A[251:]]  # an earlier message was edited
    assert run(s, m, chat(1), edited)[1:] == (250, "ram", 0)


def test_a_refused_state_is_forgotten_and_the_prompt_evaluated() -> None:
    s, m = states()
    run(s, m, chat(1), A)
    run(s, m, chat(2), B)
    saved = s.cache.get(chat(1))
    assert saved is not None and saved.data is not None
    saved.data[0] = ord("X")  # llama.cpp would refuse it
    assert run(s, m, chat(1), [*A, 7, 7, 1])[1:] == (0, "", 0)
    assert s.cache.get(chat(1)) is None


def test_a_long_system_prompt_keeps_a_state_a_new_chat_of_the_same_principal_starts_from(
        ) -> None:
    s, m = states()
    boundary = len(SYSTEM)
    slot, reuse = s.admit(chat(1), A, False)
    assert s.wants_prefix(slot, A, boundary, reuse.cached)
    m[slot].held = A[:boundary]  # the host evaluates up to the boundary, then keeps it
    s.keep_prefix(slot)
    m[slot].evaluate(A, boundary)
    assert not s.wants_prefix(slot, A, boundary, 0)  # kept once
    assert s.cache.get(scoped(ME, prefix_key(pack(SYSTEM)))) is not None
    run(s, m, chat(2), B)
    other = prompt(SYSTEM, range(8000, 8050))
    assert run(s, m, chat(3), other)[1:3] == (boundary, "ram")
    assert not s.wants_prefix(slot, A, MIN_PREFIX_TOKENS - 1, 0)  # short ones are not kept
    run(s, m, chat(2), B)
    assert run(s, m, scoped(THEM, ""), other)[1:3] == (0, "")  # never another principal's


def test_left_out_history_is_shifted_out_only_when_messages_were_left_out() -> None:
    s, m = states()
    long = prompt(SYSTEM, range(0, 400))
    run(s, m, chat(1), long)
    shorter = prompt(SYSTEM, range(100, 400), [7, 7, 900, 901])  # 100 tokens left out
    assert run(s, m, chat(1), shorter, True)[1:] == (len(shorter) - 2, "live", 100)
    m[0].held = list(long)
    assert run(s, m, chat(1), shorter, may_shift=False)[1] == len(SYSTEM)
    m[0].held, m[0].shiftable = list(long), False  # a model whose cache cannot shift
    assert run(s, m, chat(1), shorter, may_shift=True)[1] == len(SYSTEM)


def test_a_switched_away_conversation_is_shifted_after_its_restore() -> None:
    s, m = states()
    run(s, m, chat(1), prompt(SYSTEM, range(0, 400)))
    run(s, m, chat(2), B)
    shorter = prompt(SYSTEM, range(100, 400), [7, 7, 900, 901])
    assert run(s, m, chat(1), shorter, may_shift=True)[1:] == (len(shorter) - 2, "ram", 100)


def test_a_client_that_names_no_conversation_gets_its_own_back_by_its_prefix() -> None:
    s, m = states()
    anonymous = scoped(THEM, "")
    slot, first = s.admit(anonymous, A, False)
    assert principal_of(first.key) == THEM and name_of(first.key).startswith("anon:")
    m[slot].evaluate(A, 0)
    run(s, m, scoped(THEM, ""), B)  # another unnamed conversation of the same principal
    assert s.cache.get(first.key) is not None  # saved under the name it was given
    again = [*A, 7, 7, 11, 12]
    slot, reuse = s.admit(anonymous, again, False)
    assert (reuse.source, reuse.cached, reuse.key) == ("ram", len(A) + 2, first.key)


def test_nothing_is_ever_reused_across_principals() -> None:
    """How much of a guessed prompt was cached would tell one client what another sent."""
    pin = prompt(range(100, 180), [4, 8, 2, 7], range(200, 260))

    def guess(digits: list[int]) -> list[int]:
        return prompt(range(100, 180), digits, range(200, 260))

    for n_slots in (1, 2):
        s, m = states(n_slots)
        run(s, m, chat(1), pin)  # the window's chat holds the PIN, live or saved
        # A first guess, then a wrong and the right one: each after a guess of its own.
        figures = [run(s, m, scoped(THEM, ""), guess(g))[1:3]
                   for g in ([0, 0, 0, 0], [1, 1, 1, 1], [4, 8, 2, 7])]
        assert figures[0] == (0, "")
        assert figures[1] == figures[2]  # its own earlier guess, never the PIN
        # Within one principal, the same probe tells (as it should: the data is its own).
        mine = [run(s, m, chat(5), guess(g))[1] for g in ([0, 0, 0, 0], [4, 8, 2, 7])]
        assert mine[1] > mine[0] or mine[1] >= len(pin) - 60


def test_a_forgotten_conversation_is_not_saved_and_a_short_one_not_kept() -> None:
    s, m = states()
    run(s, m, chat(2), B)
    s.forget(chat(2))
    run(s, m, chat(3), A)
    assert m[0].saves == 0 and s.cache.get(chat(2)) is None
    run(s, m, chat(4), [1] * (MIN_SAVE_TOKENS - 5))
    run(s, m, chat(5), B)
    assert s.cache.get(chat(4)) is None  # too short to be worth keeping
    s.reset()
    assert s.cache.usage().in_ram == 0 and s.live == [""]


def test_every_slot_busy_is_refused() -> None:
    s, _ = states(2)
    with pytest.raises(LookupError):
        s.admit(chat(1), A, False, busy=[0, 1])


def test_a_new_conversation_takes_an_empty_slot_and_copies_a_shared_start() -> None:
    """What another conversation holds stays where it is: its shared start is copied."""
    s, m = states(2)
    run(s, m, chat(1), A)
    other = prompt(SYSTEM, range(7000, 7040))
    slot, cached, source, _ = run(s, m, chat(2), other)
    assert (slot, cached, source) == (1, len(SYSTEM), "slot")
    assert m[0].held[:len(A)] == A and m[0].saves == 0  # chat 1 untouched
    assert run(s, m, chat(1), [*A, 7, 7, 3])[:3] == (0, len(A) + 2, "live")


def test_a_state_file_that_cannot_be_read_leaves_the_slot_as_it_was() -> None:
    s, m = states(1, ram=0)  # every saved state is spilled to disk
    run(s, m, chat(1), A)
    run(s, m, chat(2), prompt(SYSTEM, range(6000, 6100)))  # the same system prompt
    saved = s.cache.get(chat(1))
    assert saved is not None and saved.path is not None
    saved.path.write_bytes(b"not a state")
    # Chat 2's cells still spare chat 1 its system prompt: they are not thrown away.
    assert run(s, m, chat(1), [*A, 7, 7, 1])[1:3] == (len(SYSTEM), "live")
    assert s.cache.get(chat(1)) is None  # the bad file is forgotten


def test_a_short_shared_start_is_copied_where_a_copy_is_cheaper_than_reading_it() -> None:
    """Clients asking about one short text: the second copies the first's 20 tokens."""
    s, m = states(2)
    start = list(range(5000, 5020))
    run(s, m, chat(1), prompt(start, range(100, 108)))
    slot, cached, source, _ = run(s, m, chat(2), prompt(start, range(200, 208)))
    assert (slot, cached, source) == (1, len(start), "slot")


def test_a_larger_slot_needs_a_longer_shared_start_before_it_is_copied() -> None:
    assert copy_threshold(2048) == MIN_COPY_TOKENS
    assert copy_threshold(32768) == 64 > MIN_COPY_TOKENS


class WholeMemory(FakeMemory):
    """Recurrent state: it cannot be cut back to a shorter prefix."""

    def keep(self, n: int) -> bool:
        if not self.can_keep(n):
            self.held = []
            return False
        del self.held[n:]
        return True

    def can_keep(self, n: int) -> bool:
        return n >= len(self.held)


def test_memory_used_only_whole_takes_the_state_the_prompt_extends_not_a_longer_one() -> None:
    memories: list[FakeMemory] = [WholeMemory()]
    s = SlotStates(memories, StateCache(10**9, 10**9, paths.kv_state_dir), whole_only=True)
    run(s, memories, chat(1), A)  # chat 1 holds A + its reply
    a2 = [*A, 7, 7, 300, 301]
    assert run(s, memories, chat(1), a2)[1:3] == (len(A) + 2, "live")  # extends it: kept
    run(s, memories, chat(2), [*A, 50, 51])  # shares A with chat 1's longer cells: read whole
    assert s.cache.get(chat(1)) is not None
    # Back to chat 1, edited after A: its state (longer) cannot be cut back to A; chat 2's
    # cells cannot either; nothing is reused rather than restored and then refused.
    slot, reuse = s.admit(chat(1), [*A, 90, 91], False)
    assert reuse.cached == 0 and memories[slot].held == []


def test_memory_restored_whole_keeps_a_state_where_each_prompt_ended() -> None:
    """The state kept before a prompt's last token serves the next turn whose reply renders
    otherwise (7, 7 read back as 8) and the same prompt again (a reply regenerated); the state
    after the reply, which would need cutting back, is passed over. A deleted chat's goes too."""
    memories: list[FakeMemory] = [WholeMemory()]
    s = SlotStates(memories, StateCache(10**9, 10**9, paths.kv_state_dir), restored_whole=True)
    slot, _ = s.admit(chat(1), A, False)
    assert s.wants_checkpoint(slot, A) and not s.wants_checkpoint(slot, A[:MIN_SAVE_TOKENS - 1])
    memories[slot].held = list(A[:-1])  # the host reads the prompt up to its last token
    s.keep_checkpoint(slot)
    memories[slot].held = [*A, 7, 7]  # then the rest, and the reply
    s.release(slot)
    run(s, memories, chat(2), B)  # takes the slot: chat 1's cells are saved
    assert run(s, memories, chat(1), [*A, 8, 300])[1:3] == (len(A) - 1, "ram")
    run(s, memories, chat(2), B)
    assert run(s, memories, chat(1), A)[1:3] == (len(A) - 1, "ram")
    s.forget(chat(1))
    assert s.cache.get(checkpoint_key(chat(1))) is None and s.cache.get(chat(1)) is None
    slot, _ = s.admit(chat(3), B, False)
    s.forget(chat(3))  # deleted while its prompt is read: no state is kept for it
    memories[slot].held = list(B[:-1])
    kept = s.cache.usage().in_ram
    s.keep_checkpoint(slot)
    assert s.cache.usage().in_ram == kept


class WindowMemory(FakeMemory):
    """A window-only sliding-window cache: the cells before `first` were reused by llama.cpp,
    so it can be cut back only to where the window before the cut is still held."""

    window = 16

    def __init__(self) -> None:
        super().__init__()
        self.first = 0  # the earliest position still held (llama_memory_seq_pos_min)

    def can_keep(self, n: int) -> bool:
        return n >= len(self.held) or self.first <= max(0, n - self.window)

    def keep(self, n: int) -> bool:
        if not self.can_keep(n):
            self.held, self.first = [], 0
            return False
        del self.held[n:]
        return True


def test_a_window_only_cache_is_cut_back_while_it_holds_the_window_else_read_again() -> None:
    """Regenerating a reply (the prompt without it) reuses the cells when they still cover
    the window before the cut, as llama-server checks; once llama.cpp has reused the cells
    there, the prompt is read again, never continued from missing cells. A saved state is
    checked once restored the same way."""
    memories: list[FakeMemory] = [WindowMemory()]
    s = SlotStates(memories, StateCache(10**9, 10**9, paths.kv_state_dir))
    run(s, memories, chat(1), A)  # A + its reply (7, 7)
    assert run(s, memories, chat(1), A)[1:3] == (len(A) - 1, "live")  # regenerated: kept
    window = memories[0]
    assert isinstance(window, WindowMemory)
    window.first = len(A) - 4  # a long reply moved the window past the cut
    slot, reuse = s.admit(chat(1), A, False)
    assert reuse.cached == 0 and memories[slot].held == []
    # Saved when another chat takes the slot; restored and cut back to the prompt (its
    # reply goes), which its cells cover.
    window.evaluate(A, 0)
    s.release(slot)
    run(s, memories, chat(2), B)
    assert run(s, memories, chat(1), A)[1:3] == (len(A) - 1, "ram")
