"""KV-cache states of conversations kept by the engine: in RAM within a budget, the least
recently used spilled to disk within a cap, found again by the tokens they hold.

A state is llama.cpp's serialised KV cache of one sequence (opaque bytes here) and the tokens it
holds. No llama_cpp in this module: engine/host/ makes and restores the bytes.

States outlive the engine when the cache is given a `validity` (the model file's sha256, the
llama.cpp build and the KV layout: cache types, flash attention, pool and slots, hashed
together): they are spilled under paths.kv_state_dir()/v-<validity> (0700, files 0600: they
hold the user's chats), everything still in RAM is written there when the engine closes
(`persist`), and the next engine with the same validity finds them again (`_index`). States
of another model, build or layout are in another folder and never read; those folders and
files are removed least recently used first while all of them together pass the disk budget.
A crash loses only what was still in RAM. Without a validity (tests, tuning) a cache keeps a
folder of its own engine process, removed when the engine closes or, if it died, when the
next one starts.

Every file carries its key, its tokens and an HMAC-SHA256 of the validity, key, tokens and
state under a key kept in a 0600 file beside the user's data (paths.kv_state_key_path(), made
on first use; a process-only key without a validity): a truncated or corrupt file, one written
by anything else, one moved from another conversation's name or from another layout's folder
is never restored (the prompt is evaluated instead) and is deleted. A file is written whole or
not at all. Files are opened without following links and without blocking, and only regular
files are read: a FIFO put in a state's place cannot stall the engine. Removing a folder opens
nothing but folders (O_DIRECTORY, without following links): a FIFO, socket or link named like
a folder, or inside one, is unlinked unopened (shutil.rmtree opens what it removes, and
opening a FIFO for reading waits for a writer: one named like a dead engine's folder stalled
every engine start).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import secrets
import shutil
import stat
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

from inglenook import paths
from inglenook.core import files

_MAGIC = b"INGLKV03"
# magic, key bytes, tokens, state bytes, HMAC of validity + key + tokens + state
_HEADER = struct.Struct("<8sQQQ32s")
_MAX_KEY_BYTES = 4096
_DIR_FLAGS = (os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0)
              | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
# Removing by descriptors (never opening what is not a folder) needs *at() calls; where there
# are none (Windows), there are no FIFOs to fear either and shutil.rmtree does.
_BY_DESCRIPTOR = (os.open in os.supports_dir_fd and os.unlink in os.supports_dir_fd
                  and os.rmdir in os.supports_dir_fd and os.listdir in os.supports_fd)
_MAX_DEPTH = 8  # a state folder holds files only; anything deeper is not ours to walk
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
                 folder: Callable[[], Path], *, clean_up: bool = True, validity: str = "",
                 key_file: Callable[[], Path] | None = None) -> None:
        """`clean_up`: remove what engines that died left in `folder()` now (at the start of an
        engine), not when this one first spills. `validity`: keep states across engines,
        under this fingerprint of what makes them valid, authenticated with the key in
        `key_file()`."""
        self.ram_budget, self.disk_budget = ram_budget, disk_budget
        self._folder_of = folder
        self._folder: Path | None = None
        self._states: OrderedDict[str, SavedState] = OrderedDict()
        self.validity = validity
        self._mac_key = secrets.token_bytes(32)
        if clean_up:
            try:
                _remove_dead_engines(folder())
            except OSError as exc:
                _log(f"could not remove KV states left by engines that ended ({exc})")
        if validity:
            try:
                self._mac_key = _secret(key_file() if key_file else folder() / "key")
                self._index()
            except OSError as exc:
                _log(f"could not read the kept KV states ({exc}); keeping none this time")
                self.validity = ""

    # ---- queries -------------------------------------------------------------------------
    def get(self, key: str) -> SavedState | None:
        return self._states.get(key)

    def longest_prefix(self, tokens: bytes, among: Callable[[str], bool],
                       whole: bool = False) -> tuple[SavedState | None, int]:
        """Of the states whose key is `among`, the one sharing the most leading tokens with
        `tokens`, and how many. `whole`: only states that `tokens` extends, all of them."""
        best, length = None, 0
        for state in self._states.values():
            if not among(state.key):
                continue
            n = common_prefix(state.tokens, tokens)
            if whole and not n == count(state.tokens) < count(tokens):
                continue
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
        data = self._read(state) if state.path else None
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
        """Forget every state of this engine (it closes); spilled ones are deleted unless they
        are kept across engines (then see persist)."""
        self._states.clear()
        if self._folder is not None and not self.validity:
            _remove(self._folder.parent, self._folder.name)
        self._folder = None

    def persist(self) -> None:
        """The engine closes: what is in RAM goes to disk, most recently used last (so it is
        the last evicted), for the next engine of this validity. Nothing without one."""
        if not self.validity:
            return
        for state in [s for s in self._states.values() if s.data is not None]:
            self._spill(state)

    def forget_all(self) -> None:
        """Every state this engine holds, and every state kept on disk, of any model."""
        self._states.clear()
        self._folder = None
        _remove_all(self._folder_of())

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
        if self.validity and data is not None:
            self._trim_others(self.disk_budget - state.size - sum(s.size for s in spilled))
        if data is None or state.size > self.disk_budget:
            self._states.pop(state.key, None)
            return
        try:
            state.path = self._write(state, data)
        except OSError as exc:
            _log(f"could not spill a KV state to disk ({exc}); it is forgotten")
            self._states.pop(state.key, None)

    def _mac(self, state: SavedState, data: bytes | bytearray) -> bytes:
        mac = hmac.new(self._mac_key, digestmod=hashlib.sha256)
        key = state.key.encode("utf-8", errors="surrogatepass")
        validity = self.validity.encode()
        for part in (struct.pack("<QQ", len(validity), len(key)), validity, key, state.tokens,
                     data):
            mac.update(part)
        return mac.digest()

    def _write(self, state: SavedState, data: bytearray) -> Path:
        """The file of a state, written whole under a temporary name and then renamed; on any
        failure (a full disk) nothing of it is left."""
        folder = self._folder or self._make_folder()
        name = zlib.crc32(state.key.encode("utf-8", errors="surrogatepass"))
        path = folder / f"{name:08x}-{time.monotonic_ns():x}.kv"
        partial = path.with_suffix(".part")
        key = state.key.encode("utf-8", errors="surrogatepass")
        header = _HEADER.pack(_MAGIC, len(key), count(state.tokens), len(data),
                              self._mac(state, data))
        fd = os.open(partial, files.WRITE_FLAGS, 0o600)
        try:
            try:
                for part in (header, key, state.tokens, data):
                    _write_all(fd, part)
            finally:
                os.close(fd)
            os.replace(partial, path)
        except BaseException:
            with contextlib.suppress(OSError):
                partial.unlink()
            raise
        return path

    def _make_folder(self) -> Path:
        root = self._folder_of()
        _remove_dead_engines(root)
        if self.validity:
            self._folder = root / f"v-{self.validity}"
        else:
            me = psutil.Process()
            self._folder = root / f"{me.pid}-{int(me.create_time() * 1000)}"
        self._folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        return self._folder

    def _index(self) -> None:
        """The states kept by engines before this one with the same validity, least recently
        used first (by the files' times: `load` touches a file it reads). Only headers are
        read now; a state is checked whole when it is restored."""
        folder = self._folder_of() / f"v-{self.validity}"
        if not folder.is_dir():
            return
        self._folder = folder
        for partial in folder.glob("*.part"):  # an engine killed while writing
            with contextlib.suppress(OSError):
                partial.unlink()
        found = []
        for path in folder.glob("*.kv"):
            state = _read_index(path)
            if state is None:
                with contextlib.suppress(OSError):
                    path.unlink()
                continue
            found.append((path.stat().st_mtime_ns, state))
        for _, state in sorted(found, key=lambda f: f[0]):
            old = self._states.pop(state.key, None)
            if old is not None and old.path is not None:  # an older copy of the same key
                with contextlib.suppress(OSError):
                    old.path.unlink()
            self._states[state.key] = state
        spilled = list(self._states.values())
        while spilled and sum(s.size for s in spilled) > self.disk_budget:
            self.drop(spilled.pop(0).key)

    def _trim_others(self, room: int) -> None:
        """Other validities' states (other models, builds, layouts) while all of them pass
        `room` bytes: their oldest files first, then their empty folders."""
        root, mine = self._folder_of(), self._folder
        files = []
        for folder in root.glob("v-*"):
            if folder != mine and folder.is_dir() and not folder.is_symlink():
                files += [(f.stat().st_mtime_ns, f.stat().st_size, f) for f in folder.glob("*")]
        total = sum(size for _, size, _ in files)
        for _, size, path in sorted(files, key=lambda f: f[0]):
            if total <= max(0, room):
                break
            with contextlib.suppress(OSError):
                path.unlink()
                total -= size
        for folder in root.glob("v-*"):
            if folder != mine:
                with contextlib.suppress(OSError):
                    folder.rmdir()  # only when empty

    def _read(self, state: SavedState) -> bytearray | None:
        """The state's bytes if its file is a regular file that this cache wrote for this key
        and these tokens; None otherwise."""
        assert state.path is not None
        try:
            fd = os.open(state.path, files.READ_FLAGS)
        except OSError:
            return None
        try:
            info = os.fstat(fd)
            key = state.key.encode("utf-8", errors="surrogatepass")
            expected = _HEADER.size + len(key) + len(state.tokens) + state.size
            if not stat.S_ISREG(info.st_mode) or info.st_size != expected:
                return None  # a FIFO, a device, a folder; or not the size it was written with
            with open(fd, "rb", closefd=False) as f:
                header = f.read(_HEADER.size)
                if len(header) != _HEADER.size:
                    return None
                magic, n_key, n_tokens, size, mac = _HEADER.unpack(header)
                if (magic != _MAGIC or n_key != len(key) or n_tokens != count(state.tokens)
                        or size != state.size or f.read(n_key) != key):
                    return None
                tokens = f.read(len(state.tokens))
                data = bytearray(size)
                if f.readinto(data) != size:
                    return None
        except OSError:
            return None
        finally:
            os.close(fd)
        if tokens != state.tokens or not hmac.compare_digest(mac, self._mac(state, data)):
            return None
        with contextlib.suppress(OSError):
            os.utime(state.path)  # recently used: evicted last, by this engine or the next
        return data


def forget_kept_states() -> None:
    """Every state kept on disk, of every model and engine (no engine holds them now)."""
    _remove_all(paths.kv_state_dir())


def _remove_all(root: Path) -> None:
    try:
        entries = list(root.iterdir())
    except FileNotFoundError:
        return
    for entry in entries:
        if entry.is_dir() and not entry.is_symlink():
            _remove(root, entry.name)


def _read_index(path: Path) -> SavedState | None:
    """A kept state's key and tokens from its file (the state stays on disk); None when the
    file is not one of ours."""
    try:
        fd = os.open(path, files.READ_FLAGS)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None
        with open(fd, "rb", closefd=False) as f:
            header = f.read(_HEADER.size)
            if len(header) != _HEADER.size:
                return None
            magic, n_key, n_tokens, size, _ = _HEADER.unpack(header)
            if (magic != _MAGIC or n_key > _MAX_KEY_BYTES or info.st_size
                    != _HEADER.size + n_key + n_tokens * TOKEN_BYTES + size):
                return None
            key = f.read(n_key).decode("utf-8", errors="surrogatepass")
            tokens = f.read(n_tokens * TOKEN_BYTES)
    except (OSError, UnicodeDecodeError):
        return None
    finally:
        os.close(fd)
    return SavedState(key, tokens, size, None, path)


def _secret(path: Path) -> bytes:
    """The states' HMAC key: 32 random bytes in a file only the user may read, made on first
    use. A key file others could read or write is replaced (the states it signed are then
    refused)."""
    try:
        fd = os.open(path, files.READ_FLAGS)
    except FileNotFoundError:
        fd = -1
    if fd >= 0:
        try:
            info = os.fstat(fd)
            key = os.read(fd, 64)
        finally:
            os.close(fd)
        if (stat.S_ISREG(info.st_mode) and not info.st_mode & 0o077 and len(key) == 32
                and info.st_uid == getattr(os, "getuid", lambda: info.st_uid)()):
            return key
        path.unlink()
    key = secrets.token_bytes(32)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    partial = path.with_name(f"{path.name}.{os.getpid()}.part")
    fd = os.open(partial, files.WRITE_FLAGS, 0o600)
    try:
        _write_all(fd, key)
    finally:
        os.close(fd)
    os.replace(partial, path)
    return key


def _write_all(fd: int, data: bytes | bytearray) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _remove_dead_engines(root: Path) -> None:
    """Folders left by engine processes that no longer run (a crash, a kill); anything else
    named like one (a FIFO, a link) is unlinked, never opened."""
    for name in os.listdir(root):
        pid, _, started = name.partition("-")
        if not (pid.isdigit() and started.isdigit()) or _running(int(pid), int(started)):
            continue
        _remove(root, name)


def _remove(parent: Path, name: str) -> None:
    """Remove `parent/name`, a folder with what it holds or anything else, opening nothing but
    folders; what cannot be removed is left."""
    if not _BY_DESCRIPTOR:
        path = parent / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                path.unlink()
        return
    try:
        fd = os.open(parent, _DIR_FLAGS)
    except OSError:
        return
    try:
        _remove_at(fd, name, 0)
    finally:
        os.close(fd)


def _remove_at(dir_fd: int, name: str, depth: int) -> None:
    try:
        info = os.lstat(name, dir_fd=dir_fd)
    except OSError:
        return
    if not stat.S_ISDIR(info.st_mode):  # a file, FIFO, socket, device or link: unlinked only
        with contextlib.suppress(OSError):
            os.unlink(name, dir_fd=dir_fd)
        return
    if depth >= _MAX_DEPTH:
        return
    try:  # swapped since for a FIFO or a link: O_DIRECTORY | O_NOFOLLOW refuse it, unopened
        fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except OSError:
        return
    try:
        opened = os.fstat(fd)
        if (opened.st_dev, opened.st_ino) != (info.st_dev, info.st_ino):
            return  # another folder than the one looked at
        for child in os.listdir(fd):
            _remove_at(fd, child, depth + 1)
    except OSError:
        return
    finally:
        os.close(fd)
    with contextlib.suppress(OSError):
        os.rmdir(name, dir_fd=dir_fd)


def _running(pid: int, started_ms: int) -> bool:
    try:
        return abs(psutil.Process(pid).create_time() * 1000 - started_ms) < 1000
    except psutil.NoSuchProcess:
        return False
    except psutil.Error:  # it exists but cannot be looked at: leave its folder alone
        return True


def _log(message: str) -> None:
    print(f"inglenook engine: {message}", file=sys.stderr, flush=True)
