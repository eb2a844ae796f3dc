"""A lock between processes made of a file created with O_EXCL: portable (no fcntl/msvcrt)
and good for short critical sections such as read-merge-write of settings.json.

A holder that died leaves its lock file behind, so a lock is taken over when it is older than
`stale_after` seconds or, on POSIX, when the process named in it no longer exists. Holders are
expected to keep it for milliseconds.
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

STALE_AFTER_S = 10.0
TIMEOUT_S = 5.0


class LockTimeout(OSError):
    """The lock stayed held by a live process for longer than the timeout."""


def _holder_is_dead(path: Path) -> bool:
    if os.name != "posix":  # os.kill(pid, 0) would terminate the process on Windows
        return False
    try:
        pid = int(path.read_text(encoding="ascii").split()[0])
    except (OSError, ValueError, IndexError):
        return False  # not written yet, or by something else: only age decides
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # e.g. EPERM: it exists but belongs to someone else
        return False
    return False


def _take_over(path: Path, stale_after: float) -> None:
    """Remove a stale lock file. It is renamed before it is removed so that when two processes
    find it stale, the slower one's rename fails, or takes a fresh lock that it then puts back
    (two holders remain possible only if a third process locks within those microseconds)."""
    try:
        age = time.time() - path.stat().st_mtime
    except FileNotFoundError:
        return
    if age < stale_after and not _holder_is_dead(path):
        return
    aside = path.with_name(f"{path.name}.stale-{uuid.uuid4().hex}")
    try:
        os.rename(path, aside)
    except FileNotFoundError:
        return
    try:
        if time.time() - aside.stat().st_mtime < stale_after and not _holder_is_dead(aside):
            with contextlib.suppress(OSError):  # FileExistsError: a new holder came meanwhile
                os.link(aside, path)  # someone's fresh lock: give it back
    finally:
        with contextlib.suppress(OSError):
            os.unlink(aside)


@contextlib.contextmanager
def file_lock(path: Path, timeout: float = TIMEOUT_S,
              stale_after: float = STALE_AFTER_S) -> Iterator[None]:
    """Hold `path` as a lock file. Raises LockTimeout, or the OSError that made creating the
    file impossible (a read-only folder, say)."""
    deadline = time.monotonic() + timeout
    delay = 0.002
    while True:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            break
        except FileExistsError:
            _take_over(path, stale_after)
            if time.monotonic() >= deadline:
                raise LockTimeout(f"{path} is held by another process") from None
            time.sleep(delay)
            delay = min(delay * 2, 0.05)
    # Who holds it: the pid for _holder_is_dead, and a token to know it is still ours on
    # release (inode numbers are reused at once). On a full disk the lock works without it.
    mine = f"{os.getpid()} {uuid.uuid4().hex}\n"
    try:
        written = os.write(fd, mine.encode("ascii")) == len(mine)
    except OSError:
        written = False
    finally:
        os.close(fd)
    try:
        yield
    finally:
        # Not if it was taken over meanwhile (held far longer than expected): that one is
        # someone else's now.
        with contextlib.suppress(OSError, ValueError):
            if not written or path.read_text(encoding="ascii") == mine:
                os.unlink(path)
