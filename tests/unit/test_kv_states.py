"""Conversation KV states without llama.cpp: the store (RAM, spilling, checked files) and the
choice of what a prompt can reuse, on a fake KV cache that holds tokens."""

from __future__ import annotations

import os
import struct
import threading
import zlib
from array import array
from pathlib import Path

import psutil
import pytest

from inglenook import paths
from inglenook.engine.kv_reuse import (
    MIN_PREFIX_TOKENS,
    MIN_SAVE_TOKENS,
    ConversationStates,
    find_shift,
    prefix_key,
)
from inglenook.engine.kv_states import StateCache, common_prefix, pack
from tests.helpers.tmpfs import fill, tmpfs


class FakeMemory:
    """A KV cache of tokens; its saved state is the tokens' bytes behind a tag."""

    def __init__(self) -> None:
        self.held: list[int] = []
        self.shiftable = True
        self.saves = 0

    def tokens(self) -> bytes:
        return pack(self.held)

    def keep(self, n: int) -> bool:
        del self.held[n:]
        return True

    def cut(self, start: int, end: int) -> bool:
        if self.shiftable:
            del self.held[start:end]
        return self.shiftable

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

    def evaluate(self, prompt: list[int], cached: int) -> None:
        """What the host does after prepare(): evaluate the rest of the prompt and a reply."""
        assert self.held == prompt[:cached]
        self.held = [*prompt[:-1], prompt[-1], 7, 7]


def cache(ram: int = 10**9, disk: int = 10**9) -> StateCache:
    return StateCache(ram, disk, paths.kv_state_dir)


def spilled_files() -> list[Path]:
    return sorted(paths.kv_state_dir().glob("*/*.kv"))


def test_common_prefix_counts_tokens() -> None:
    assert common_prefix(pack([1, 2, 3]), pack([1, 2, 4, 5])) == 2
    assert common_prefix(pack([1, 2]), pack([1, 2, 3])) == 2
    assert common_prefix(pack([]), pack([1])) == 0
    assert common_prefix(pack([256]), pack([0])) == 0  # whole tokens, not bytes
    long = list(range(5000))
    assert common_prefix(pack(long), pack([*long[:4321], -1])) == 4321


def test_find_shift_finds_where_the_prompt_continues() -> None:
    live = pack([1, 2, *range(100, 140), *range(500, 560)])
    target = pack([1, 2, *range(500, 560), 9])
    assert find_shift(live, target, 2) == (42, 60)
    assert find_shift(live, pack([1, 2, 3]), 2) == (2, 0)


def test_states_spill_least_recently_used_and_come_back_intact() -> None:
    states = cache(ram=250)
    states.put("a", pack([1] * 10), bytearray(b"a" * 100))
    states.put("b", pack([2] * 10), bytearray(b"b" * 100))
    a = states.get("a")
    assert a is not None and states.load(a) == b"a" * 100  # "a" is now the most recent
    states.put("c", pack([3] * 10), bytearray(b"c" * 100))
    assert [s.data is None for s in (states.get("a"), states.get("b"), states.get("c"))] == [
        False, True, False]
    assert states.usage().ram_bytes == 200 and states.usage().on_disk == 1
    assert len(spilled_files()) == 1
    b = states.get("b")
    assert b is not None and states.load(b) == b"b" * 100
    states.clear()
    assert states.usage().in_ram == states.usage().on_disk == 0 and not spilled_files()


def test_disk_cap_forgets_the_oldest_spilled() -> None:
    states = cache(ram=0, disk=250)
    for key in "abc":
        states.put(key, pack([ord(key)]), bytearray(key.encode() * 100))
    assert states.get("a") is None and states.get("b") and states.get("c")
    assert len(spilled_files()) == 2
    states.put("huge", pack([1]), bytearray(300))  # bigger than the cap: not kept at all
    assert states.get("huge") is None


@pytest.mark.parametrize("damage", ["truncate", "flip", "delete"])
def test_a_damaged_spilled_state_is_never_loaded(damage: str) -> None:
    states = cache(ram=0)
    states.put("a", pack([1, 2, 3]), bytearray(os.urandom(1000)))
    (path,) = spilled_files()
    data = path.read_bytes()
    if damage == "truncate":
        path.write_bytes(data[:-10])
    elif damage == "flip":
        path.write_bytes(data[:500] + bytes([data[500] ^ 1]) + data[501:])
    else:
        path.unlink()
    state = states.get("a")
    assert state is not None and states.load(state) is None
    assert states.get("a") is None and not spilled_files()


def test_folders_of_engines_that_died_are_removed() -> None:
    root = paths.kv_state_dir()
    dead = root / "999999999-1"  # no such process
    dead.mkdir()
    (dead / "x.kv").write_bytes(b"old")
    me = psutil.Process()
    alive = root / f"{os.getppid()}-{int(psutil.Process(os.getppid()).create_time() * 1000)}"
    alive.mkdir()
    states = cache(ram=0)
    states.put("a", pack([1]), bytearray(10))
    assert not dead.exists() and alive.exists()
    assert (root / f"{me.pid}-{int(me.create_time() * 1000)}").is_dir()


def test_states_of_an_engine_that_was_killed_are_removed_when_the_next_starts() -> None:
    dead = paths.kv_state_dir() / "999999999-1"
    dead.mkdir()
    (dead / "x.kv").write_bytes(b"a chat")
    cache(ram=10**9)  # an engine's start: nothing spilled yet
    assert not dead.exists()


def test_spilled_states_are_the_users_alone() -> None:
    states = cache(ram=0)
    states.put("a", pack([1, 2]), bytearray(b"chat" * 100))
    (path,) = spilled_files()
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.parent.stat().st_mode & 0o777 == 0o700
    assert paths.kv_state_dir().stat().st_mode & 0o777 == 0o700


def test_a_full_disk_while_spilling_leaves_no_partial_file(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "small", size="1m") as disk:
        states = StateCache(0, 10**9, lambda: disk)
        states.put("a", pack([1]), bytearray(b"a" * 1000))
        filler = fill(disk)
        states.put("b", pack([2]), bytearray(b"b" * 200_000))  # cannot be written: forgotten
        assert states.get("b") is None and states.get("a") is not None
        assert [p.name for p in disk.glob("*/*") if not p.name.endswith(".kv")] == []
        filler.unlink()
        states.put("c", pack([3]), bytearray(b"c" * 200_000))  # room again: spilled whole
        c = states.get("c")
        assert c is not None and states.load(c) == b"c" * 200_000


def test_a_state_swapped_for_another_conversations_is_refused() -> None:
    states = cache(ram=0)
    states.put("chat:1", pack([1, 2, 3]), bytearray(b"m" * 400))
    states.put("chat:2", pack([1, 2, 3]), bytearray(b"t" * 400))  # the same tokens
    one, two = states.get("chat:1"), states.get("chat:2")
    assert one is not None and two is not None and one.path and two.path
    two.path.replace(one.path)  # another chat's file, sound in every byte, under my name
    assert states.load(one) is None and states.get("chat:1") is None


def test_a_state_rewritten_with_a_fitting_checksum_is_refused() -> None:
    states = cache(ram=0)
    states.put("chat:1", pack([4, 5]), bytearray(b"m" * 400))
    one = states.get("chat:1")
    assert one is not None and one.path is not None
    tokens, theirs = pack([4, 5]), b"t" * 400  # my tokens, someone else's state
    crc = zlib.crc32(theirs, zlib.crc32(tokens))
    for header in (struct.pack("<8sQQI", b"INGLKV01", 2, 400, crc),  # the old, checksummed
                   one.path.read_bytes()[:-len(tokens) - 400]):  # the current, state replaced
        one.path.write_bytes(header + tokens + theirs)
        assert states.load(one) is None
        states.put("chat:1", tokens, bytearray(b"m" * 400))
        one = states.get("chat:1")
        assert one is not None and one.path is not None
        assert states.load(one) == b"m" * 400


def test_a_fifo_in_place_of_a_state_does_not_block() -> None:
    states = cache(ram=0)
    states.put("a", pack([1]), bytearray(b"a" * 100))
    state = states.get("a")
    assert state is not None and state.path is not None
    state.path.unlink()
    os.mkfifo(state.path)
    results: list[object] = []
    reader = threading.Thread(target=lambda: results.append(states.load(state)), daemon=True)
    reader.start()
    reader.join(timeout=5)
    blocked = reader.is_alive()
    if blocked:  # in open(), waiting for a writer: be one, so the test fails rather than hangs
        with open(os.open(state.path, os.O_WRONLY | os.O_NONBLOCK), "wb"):
            pass
        reader.join(timeout=5)
    assert not blocked and results == [None]
    assert states.get("a") is None and not state.path.exists()


# -- what a prompt reuses ------------------------------------------------------------------------
def prompt(*parts: range) -> list[int]:
    return [t for part in parts for t in part]


SYSTEM = range(1000, 1000 + MIN_PREFIX_TOKENS + 20)
A = prompt(SYSTEM, range(0, 200))
B = prompt(range(5000, 5300))


def run(states: ConversationStates, memory: FakeMemory, conversation: str, tokens: list[int],
        may_shift: bool = False) -> tuple[int, str, int]:
    reuse = states.prepare(conversation, tokens, may_shift)
    memory.evaluate(tokens, reuse.cached)
    return reuse.cached, reuse.source, reuse.shifted


def test_switching_saves_the_live_conversation_and_restores_it_later() -> None:
    memory = FakeMemory()
    states = ConversationStates(memory, cache())
    assert run(states, memory, "chat:1", A) == (0, "", 0)
    a2 = [*A, 7, 7, 300, 301]  # the reply (7, 7) and a new message
    assert run(states, memory, "chat:1", a2) == (len(A) + 2, "live", 0)  # no switch: no save
    assert memory.saves == 0
    assert run(states, memory, "chat:2", B) == (0, "", 0)
    assert memory.saves == 1  # chat:1 saved as it was switched away from
    a3 = [*a2, 7, 7, 400, 401]
    cached, source, _ = run(states, memory, "chat:1", a3)
    assert (cached, source) == (len(a2) + 2, "ram")
    assert states.cache.get("chat:2") is not None


def test_restored_tokens_that_differ_are_evaluated_again() -> None:
    memory = FakeMemory()
    states = ConversationStates(memory, cache())
    run(states, memory, "chat:1", A)
    run(states, memory, "chat:2", B)
    edited = [*A[:250], 999, *A[251:]]  # an earlier message was edited
    cached, source, shifted = run(states, memory, "chat:1", edited)
    assert (cached, source, shifted) == (250, "ram", 0)


def test_a_refused_state_is_forgotten_and_the_prompt_evaluated() -> None:
    memory = FakeMemory()
    states = ConversationStates(memory, cache())
    run(states, memory, "chat:1", A)
    run(states, memory, "chat:2", B)
    saved = states.cache.get("chat:1")
    assert saved is not None and saved.data is not None
    saved.data[0] = ord("X")  # llama.cpp would refuse it
    assert run(states, memory, "chat:1", [*A, 7, 7, 1]) == (0, "", 0)
    assert states.cache.get("chat:1") is None


def test_a_long_system_prompt_keeps_a_state_a_new_chat_starts_from() -> None:
    memory = FakeMemory()
    states = ConversationStates(memory, cache())
    boundary = len(SYSTEM)
    reuse = states.prepare("chat:1", A, False)
    assert states.wants_prefix(A, boundary, reuse.cached)
    memory.held = A[:boundary]  # the host evaluates up to the boundary, then keeps it
    states.keep_prefix()
    memory.evaluate(A, boundary)
    assert not states.wants_prefix(A, boundary, 0)  # kept once
    assert states.cache.get(prefix_key(pack(SYSTEM))) is not None
    run(states, memory, "chat:2", B)
    other = prompt(SYSTEM, range(8000, 8050))
    assert run(states, memory, "chat:3", other)[:2] == (boundary, "ram")
    assert not states.wants_prefix(A, MIN_PREFIX_TOKENS - 1, 0)  # short ones are not kept


def test_left_out_history_is_shifted_out_only_when_messages_were_left_out() -> None:
    memory = FakeMemory()
    states = ConversationStates(memory, cache())
    long = prompt(SYSTEM, range(0, 400))
    run(states, memory, "chat:1", long)
    shorter = prompt(SYSTEM, range(100, 400), [7, 7, 900, 901])  # 100 tokens left out
    assert run(states, memory, "chat:1", shorter, True) == (len(shorter) - 2, "live", 100)
    memory.held = list(long)
    assert run(states, memory, "chat:1", shorter, may_shift=False)[0] == len(SYSTEM)
    memory.held, memory.shiftable = list(long), False  # a model whose cache cannot shift
    assert run(states, memory, "chat:1", shorter, may_shift=True)[0] == len(SYSTEM)


def test_a_switched_away_conversation_is_shifted_after_its_restore() -> None:
    memory = FakeMemory()
    states = ConversationStates(memory, cache())
    run(states, memory, "chat:1", prompt(SYSTEM, range(0, 400)))
    run(states, memory, "chat:2", B)
    shorter = prompt(SYSTEM, range(100, 400), [7, 7, 900, 901])
    assert run(states, memory, "chat:1", shorter, may_shift=True) == (
        len(shorter) - 2, "ram", 100)


def test_unnamed_conversations_and_forgotten_ones_are_not_kept() -> None:
    memory = FakeMemory()
    states = ConversationStates(memory, cache())
    run(states, memory, "", A)
    run(states, memory, "chat:2", B)
    assert memory.saves == 0
    states.forget("chat:2")
    run(states, memory, "chat:3", A)
    assert memory.saves == 0 and states.cache.get("chat:2") is None
    run(states, memory, "chat:4", [1] * (MIN_SAVE_TOKENS - 5))
    run(states, memory, "chat:5", B)
    assert states.cache.get("chat:4") is None  # too short to be worth keeping
    states.reset()
    assert states.cache.usage().in_ram == 0 and states.live == ""


def test_another_conversations_state_is_never_restored() -> None:
    # Even for the same tokens: how fast a reply starts would tell what another chat holds.
    memory = FakeMemory()
    states = ConversationStates(memory, cache())
    run(states, memory, "chat:1", A)
    run(states, memory, "chat:2", B)
    assert states.cache.get("chat:1") is not None
    assert run(states, memory, "api:x", [*A, 7, 7, 1]) == (0, "", 0)
    run(states, memory, "chat:2", [*B, 7, 7, 1])
    assert run(states, memory, "", [*A, 7, 7, 1]) == (0, "", 0)
