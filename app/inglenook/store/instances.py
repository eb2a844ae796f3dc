"""Who has a conversation database open, across processes: two lock files beside it.

- `<name>.open-lock`, held exclusively while a Store opens the file: checking it, moving a
  damaged file aside and migrating happen in one process at a time, so two windows starting on
  an old database migrate it once (the second finds it done) instead of both, one failing on
  "duplicate column name" and falling back to a temporary database.
- `<name>.live-lock`, held shared by every writable Store for as long as it is open. A Store that
  opens while no other holds it is the only one: replies still marked streaming were cut short
  by an exit and are marked interrupted; otherwise another window (or `inglenook conversations`
  next to one) may be streaming them right now, and they are left alone.

flock() locks belong to an open file, so they also tell two Stores in one process apart, and the
kernel drops them when a process dies: a crash leaves nothing stale. Where flock is missing
(Windows) or the folder cannot hold the files (read-only), there is no lock and a Store behaves
as if it were alone.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path

from inglenook.store.errors import StoreError

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]

OPEN_TIMEOUT_S = 60.0  # a migration of a large history takes seconds; never this long
_POLL_S = 0.02


def _lock_file(path: Path) -> int | None:
    """An fd of the lock file (created 0600), or None where locking cannot work."""
    if fcntl is None:
        return None
    flags = os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    for mode in (os.O_RDWR, os.O_RDONLY):
        try:
            return os.open(path, mode | flags, 0o600)
        except OSError:
            flags &= ~os.O_CREAT  # a read-only folder: an existing lock file still works
    return None


class InstanceLock:
    """The two locks of one Store (see the module docstring)."""

    def __init__(self, database: Path) -> None:
        self._open_path = database.with_name(database.name + ".open-lock")
        self._live_path = database.with_name(database.name + ".live-lock")
        self._live: int | None = None

    @contextlib.contextmanager
    def opening(self, timeout_s: float = OPEN_TIMEOUT_S) -> Iterator[None]:
        """Hold the open lock: no other process opens (or migrates) the database meanwhile."""
        self._open_path.parent.mkdir(parents=True, exist_ok=True)
        fd = _lock_file(self._open_path)
        if fd is None:
            yield
            return
        try:
            deadline = time.monotonic() + timeout_s
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise StoreError(
                            f"The conversation database {self._open_path.parent} is being "
                            "opened by another Inglenook, which has not finished after "
                            f"{timeout_s:.0f} s. Try again in a moment.", "busy") from None
                    time.sleep(_POLL_S)  # flock has no timeout of its own
                except OSError:  # a file system without locks: go on without
                    break
            yield
        finally:
            os.close(fd)  # releases the lock

    def join(self) -> bool:
        """Hold the live lock (shared) until release(). True when no other Store held it, that
        is when this is the only one open. Call it inside opening(), so that no other Store
        comes or goes between the two steps."""
        self.release()
        fd = _lock_file(self._live_path)
        if fd is None:
            return True
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            alone = True
        except BlockingIOError:
            alone = False
        except OSError:
            os.close(fd)
            return True
        fcntl.flock(fd, fcntl.LOCK_SH)  # from exclusive to shared: others may join now
        self._live = fd
        return alone

    def release(self) -> None:
        fd, self._live = self._live, None
        if fd is not None:
            os.close(fd)
