"""KV-cache states of conversations kept by the engine: in RAM within a budget, the least
recently used spilled to disk within a cap, found again by the tokens they hold.

A state is llama.cpp's serialised KV cache of one sequence (opaque bytes here) and the tokens it
holds. No llama_cpp in this module: engine/host/ makes and restores the bytes.

Spilled states live in a folder of this engine process under paths.kv_state_dir(), removed when
the engine closes; folders of engines that died are removed by the next engine that spills.
Every file carries its tokens and a checksum: a truncated or corrupt file is never restored
(the prompt is evaluated instead) and is deleted.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import struct
import sys
import time
import zlib
from array import array
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import psutil

_MAGIC = b"INGLKV01"
_HEADER = struct.Struct("<8sQQI")  # magic, tokens, state bytes, crc32 of tokens + state
TOKEN_BYTES = array("i").itemsize


def pack(tokens: Iterable[int]) -> bytes:
    """Tokens as the bytes states are compared by (C ints, as llama.cpp stores them)."""
    return array("i", tokens).tobytes()


def count(tokens: bytes) -> int:
    return len(tokens) // TOKEN_BYTES


def common_prefix(a: bytes, b: bytes) -> int:
    """How many tokens `a` and `b` share from the start: a binary search of memcmp-ed slices,
    microseconds for a whole context."""
    high = min(len(a), len(b)) // TOKEN_BYTES
    if a[: high * TOKEN_BYTES] == b[: high * TOKEN_BYTES]:
        return high
    low = 0  # a[:low] == b[:low]; a[:high] != b[:high]
    while high - low > 1:
        middle = (low + high) // 2
        if a[: middle * TOKEN_BYTES] == b[: middle * TOKEN_BYTES]:
            low = middle
        else:
            high = middle
    return low


@dataclass
class SavedState:
    key: str  # a conversation, or "prefix:..." for a long system prompt
    tokens: bytes
    size: int
    data: bytearray | None  # None once spilled to `path`
    path: Path | None = None


@dataclass(frozen=True)
class Usage:
    ram_bytes: int
    disk_bytes: int
    in_ram: int
    on_disk: int


class StateCache:
    """States by key, least recently used first. `folder` is called when a state is first
    spilled (the cache folder is created only when needed)."""

    def __init__(self, ram_budget: int, disk_budget: int,
                 folder: Callable[[], Path]) -> None:
        self.ram_budget, self.disk_budget = ram_budget, disk_budget
        self._folder_of = folder
        self._folder: Path | None = None
        self._states: OrderedDict[str, SavedState] = OrderedDict()

    # ---- queries -------------------------------------------------------------------------
    def get(self, key: str) -> SavedState | None:
        return self._states.get(key)

    def longest_prefix(self, tokens: bytes,
                       among: Callable[[str], bool]) -> tuple[SavedState | None, int]:
        """Of the states whose key is `among`, the one sharing the most leading tokens with
        `tokens`, and how many."""
        best, length = None, 0
        for state in self._states.values():
            if not among(state.key):
                continue
            n = common_prefix(state.tokens, tokens)
            if n > length:
                best, length = state, n
        return best, length

    def usage(self) -> Usage:
        states = self._states.values()
        return Usage(sum(s.size for s in states if s.data is not None),
                     sum(s.size for s in states if s.data is None),
                     sum(s.data is not None for s in states), sum(s.data is None for s in states))

    # ---- changes -------------------------------------------------------------------------
    def put(self, key: str, tokens: bytes, data: bytearray) -> None:
        """Keep a state (replacing the key's), spilling the least recently used to disk."""
        self.drop(key)
        state = SavedState(key, tokens, len(data), data)
        self._states[key] = state
        if state.size > self.ram_budget:
            self._spill(state)
        while self._ram_used() > self.ram_budget:
            oldest = next(s for s in self._states.values() if s.data is not None)
            self._spill(oldest)

    def load(self, state: SavedState) -> bytearray | None:
        """The bytes of a state, read back and checked if it was spilled; None (and the state
        forgotten) when its file is missing, truncated or corrupt."""
        self._states.move_to_end(state.key)
        if state.data is not None:
            return state.data
        data = _read(state) if state.path else None
        if data is None:
            _log(f"a spilled KV state was unreadable or corrupt; evaluating instead: {state.path}")
            self.drop(state.key)
        return data

    def drop(self, key: str) -> None:
        state = self._states.pop(key, None)
        if state is not None and state.path is not None:
            with contextlib.suppress(OSError):
                state.path.unlink()

    def clear(self) -> None:
        """Forget every state (a model or its load settings changed); spilled ones are deleted."""
        self._states.clear()
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None

    # ---- disk ----------------------------------------------------------------------------
    def _ram_used(self) -> int:
        return sum(s.size for s in self._states.values() if s.data is not None)

    def _spill(self, state: SavedState) -> None:
        """Move a state to disk, making room by deleting the oldest spilled ones; a state that
        cannot be written (too big for the cap, disk full) is forgotten."""
        data, state.data = state.data, None
        spilled = [s for s in self._states.values() if s.data is None and s is not state]
        while spilled and sum(s.size for s in spilled) + state.size > self.disk_budget:
            self.drop(spilled.pop(0).key)
        if data is None or state.size > self.disk_budget:
            self._states.pop(state.key, None)
            return
        try:
            state.path = self._write(state, data)
        except OSError as exc:
            _log(f"could not spill a KV state to disk ({exc}); it is forgotten")
            self._states.pop(state.key, None)

    def _write(self, state: SavedState, data: bytearray) -> Path:
        folder = self._folder or self._make_folder()
        path = folder / f"{zlib.crc32(state.key.encode()):08x}-{time.monotonic_ns():x}.kv"
        crc = zlib.crc32(data, zlib.crc32(state.tokens))
        partial = path.with_suffix(".part")
        with open(partial, "wb") as f:
            f.write(_HEADER.pack(_MAGIC, count(state.tokens), len(data), crc))
            f.write(state.tokens)
            f.write(data)
        os.replace(partial, path)
        return path

    def _make_folder(self) -> Path:
        root = self._folder_of()
        _remove_dead_engines(root)
        me = psutil.Process()
        self._folder = root / f"{me.pid}-{int(me.create_time() * 1000)}"
        self._folder.mkdir(parents=True, exist_ok=True)
        return self._folder


def _read(state: SavedState) -> bytearray | None:
    assert state.path is not None
    try:
        with open(state.path, "rb") as f:
            header = f.read(_HEADER.size)
            if len(header) != _HEADER.size:
                return None
            magic, n_tokens, size, crc = _HEADER.unpack(header)
            if (magic != _MAGIC or n_tokens != count(state.tokens) or size != state.size
                    or os.fstat(f.fileno()).st_size != _HEADER.size + len(state.tokens) + size):
                return None
            tokens = f.read(len(state.tokens))
            data = bytearray(size)
            if f.readinto(data) != size:
                return None
    except OSError:
        return None
    if tokens != state.tokens or zlib.crc32(data, zlib.crc32(tokens)) != crc:
        return None
    return data


def _remove_dead_engines(root: Path) -> None:
    """Folders left by engine processes that no longer run (a crash, a kill)."""
    for folder in root.iterdir():
        pid, _, started = folder.name.partition("-")
        if not (pid.isdigit() and started.isdigit()) or _running(int(pid), int(started)):
            continue
        shutil.rmtree(folder, ignore_errors=True)


def _running(pid: int, started_ms: int) -> bool:
    try:
        return abs(psutil.Process(pid).create_time() * 1000 - started_ms) < 1000
    except psutil.NoSuchProcess:
        return False
    except psutil.Error:  # it exists but cannot be looked at: leave its folder alone
        return True


def _log(message: str) -> None:
    print(f"inglenook engine: {message}", file=sys.stderr, flush=True)
