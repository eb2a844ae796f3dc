"""Conversation KV states without llama.cpp: the store (RAM, spilling, checked files). What a
prompt reuses is tests/unit/engine/test_kv_reuse.py."""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import threading
import zlib
from pathlib import Path

import psutil
import pytest

from inglenook import paths
from inglenook.engine.kv_reuse import find_shift
from inglenook.engine.kv_states import StateCache, common_prefix, pack
from tests.helpers.tmpfs import fill, tmpfs


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


def _start_engine_unblocking(fifos: list[Path]) -> bool:
    """A StateCache made as an engine's start makes it, in a thread; True when it blocked (it
    is then released by opening the FIFOs for writing, so the test fails rather than hangs)."""
    starter = threading.Thread(target=cache, daemon=True)
    starter.start()
    starter.join(timeout=5)
    blocked = starter.is_alive()
    while starter.is_alive():
        for fifo in fifos:
            with contextlib.suppress(OSError):  # ENXIO: nobody reads it (yet, or any more)
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        starter.join(timeout=0.05)
    return blocked


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_things_named_like_a_dead_engines_folder_are_removed_unopened(tmp_path: Path) -> None:
    """shutil.rmtree opens what it removes: a FIFO named like the folder of an engine that died
    held every later engine start in open(), waiting for a writer."""
    root = paths.kv_state_dir()
    fifo, link, folder = root / "999999999-1", root / "999999998-1", root / "999999997-1"
    os.mkfifo(fifo)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "keep.txt").write_text("not the engine's")
    link.symlink_to(outside, target_is_directory=True)
    folder.mkdir()
    os.mkfifo(folder / "x.kv")
    (folder / "inner").mkdir()
    os.mkfifo(folder / "inner" / "y.part")
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(str(root / "999999996-1"))
        assert not _start_engine_unblocking([fifo, folder / "x.kv", folder / "inner" / "y.part"])
    finally:
        sock.close()
    assert sorted(p.name for p in root.iterdir()) == []
    assert (outside / "keep.txt").read_text() == "not the engine's"  # the link went, not this


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



# -- states kept across engines -------------------------------------------------------------------
A, B = "a" * 32, "b" * 32  # two validities: model, llama.cpp build and KV layout, hashed


def kept(validity: str, ram: int = 10**9, disk: int = 10**9) -> StateCache:
    return StateCache(ram, disk, paths.kv_state_dir, validity=validity,
                      key_file=paths.kv_state_key_path)


def test_kept_states_are_found_again_by_the_next_engine_of_the_same_validity() -> None:
    first = kept(A)
    first.put("chat:1", pack([1, 2, 3]), bytearray(b"x" * 500))
    first.put("chat:2", pack([4, 5]), bytearray(b"y" * 300))
    first.persist()
    first.clear()
    assert len(spilled_files()) == 2
    again = kept(A)
    state = again.get("chat:1")
    assert state is not None and state.data is None and state.tokens == pack([1, 2, 3])
    assert again.load(state) == b"x" * 500
    assert again.usage().on_disk == 2
    assert kept(B).get("chat:1") is None  # another model, build or layout: never read
    key = paths.kv_state_key_path()
    assert key.stat().st_mode & 0o777 == 0o600 and len(key.read_bytes()) == 32


def test_a_kept_state_moved_under_another_validity_is_refused() -> None:
    first = kept(A)
    first.put("chat:1", pack([1, 2, 3]), bytearray(b"x" * 500))
    first.persist()
    (path,) = spilled_files()
    other = path.parent.with_name(f"v-{B}")
    other.mkdir(mode=0o700)
    path.rename(other / path.name)
    foreign = kept(B)
    state = foreign.get("chat:1")
    assert state is not None  # its header reads well...
    assert foreign.load(state) is None and not (other / path.name).exists()  # ...not its HMAC


def test_a_key_file_others_can_read_is_replaced_and_its_states_refused() -> None:
    first = kept(A)
    first.put("chat:1", pack([1, 2, 3]), bytearray(b"x" * 500))
    first.persist()
    key = paths.kv_state_key_path()
    old = key.read_bytes()
    key.chmod(0o644)
    again = kept(A)
    assert key.read_bytes() != old and key.stat().st_mode & 0o777 == 0o600
    state = again.get("chat:1")
    assert state is not None and again.load(state) is None


def test_kept_states_of_other_validities_make_room_oldest_first() -> None:
    old = kept(A)
    old.put("chat:1", pack([1]), bytearray(b"1" * 400))
    old.put("chat:2", pack([2]), bytearray(b"2" * 400))
    old.persist()
    (first, second) = sorted(spilled_files(), key=lambda p: p.stat().st_mtime_ns)
    os.utime(first, ns=(1, 1))  # chat:1 used longest ago
    new = kept(B, ram=0, disk=1100)
    new.put("chat:3", pack([3]), bytearray(b"3" * 400))
    assert not first.exists() and second.exists()
    new.forget_all()
    assert not spilled_files() and not list(paths.kv_state_dir().glob("v-*"))
