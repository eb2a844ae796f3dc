"""Writing files so that a crash or a full disk never leaves half of one, keeping a file the
app cannot use under another name instead of deleting it, and reading a local file with
bounds (one reader for images, attachments, documents and saved engine states)."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import shutil
import stat
import tempfile
import time
from pathlib import Path


def _aside_name(path: Path) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    bad, n = path.with_name(f"{path.name}.bad-{stamp}"), 1
    while bad.exists():  # never overwrite an earlier bad file kept for inspection
        n += 1
        bad = path.with_name(f"{path.name}.bad-{stamp}-{n}")
    return bad


def keep_aside(path: Path, move: bool) -> Path:
    """Keep the file as it is under a .bad-<stamp> name: moved, or copied (a hard link when
    the file system has them) because a repaired file is about to replace it."""
    bad = _aside_name(path)
    if move:
        os.replace(path, bad)
    else:
        try:
            os.link(path, bad)
        except OSError:
            shutil.copyfile(path, bad)
    return bad


def write_atomic(path: Path, data: bytes) -> None:
    """A temporary file in the same folder, fsynced, then renamed over."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    # Make the rename itself durable; not every platform lets a folder be opened.
    with contextlib.suppress(OSError):
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


# ---- reading a local file with bounds ------------------------------------------------------
# O_NONBLOCK: a FIFO put where a file was does not wait for a writer; O_NOFOLLOW (where asked):
# a last component that is a link is refused, not followed out of where it was found.
_OPEN_FLAGS = (os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
               | getattr(os, "O_BINARY", 0))
NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
READ_FLAGS = _OPEN_FLAGS | NOFOLLOW  # for files the app wrote itself, never followed
WRITE_FLAGS = (os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
               | getattr(os, "O_BINARY", 0))
READ_ATTEMPTS = 3
_READ_BLOCK = 1 << 20


class ReadRefused(Exception):
    """Why a bounded read gave nothing; each caller words it for its own reader.

    `why` is one of: "missing", "denied", "link", "unreadable" (with `detail`, the OS's
    words), "changed" (not the file that was scanned), "not regular", "too large" (`size`
    over `limit`), "grew" (past `limit` while read), "changing" (on every attempt)."""

    def __init__(self, why: str, *, size: int = 0, limit: int = 0, detail: str = "") -> None:
        super().__init__(why if not detail else f"{why}: {detail}")
        self.why, self.size, self.limit, self.detail = why, size, limit, detail


def read_bounded(path: str | os.PathLike[str], limit: int, *, follow_links: bool = False,
                 identity: tuple[int, int] | None = None) -> tuple[bytes, os.stat_result]:
    """The bytes of a regular file, at most `limit`, as they were between two equal fstats,
    and that fstat. The path is opened once (no stat-then-open race): a FIFO, a device or a
    folder is refused after the open, which does not block; with `identity` (st_dev, st_ino
    as found earlier) the descriptor must be that very file. At most one byte more than
    announced is read, so a file growing as it is read is caught, never read on."""
    flags = _OPEN_FLAGS if follow_links else READ_FLAGS
    for _ in range(READ_ATTEMPTS):
        try:
            fd = os.open(path, flags)
        except FileNotFoundError as exc:
            raise ReadRefused("missing") from exc
        except PermissionError as exc:
            raise ReadRefused("denied") from exc
        except OSError as exc:
            if exc.errno == errno.ELOOP and not follow_links:
                raise ReadRefused("link") from exc
            raise ReadRefused("unreadable", detail=exc.strerror or str(exc)) from exc
        try:
            before = os.fstat(fd)
            if identity is not None and (before.st_dev, before.st_ino) != identity:
                raise ReadRefused("changed")
            if not stat.S_ISREG(before.st_mode):
                raise ReadRefused("not regular")
            if before.st_size > limit:
                raise ReadRefused("too large", size=before.st_size, limit=limit)
            parts, total, wanted = [], 0, before.st_size + 1
            while total < wanted:
                block = os.read(fd, min(_READ_BLOCK, wanted - total))
                if not block:
                    break
                parts.append(block)
                total += len(block)
            after = os.fstat(fd)
        except OSError as exc:
            raise ReadRefused("unreadable", detail=exc.strerror or str(exc)) from exc
        finally:
            os.close(fd)
        if total > limit:
            raise ReadRefused("grew", size=total, limit=limit)
        if (before.st_size, before.st_mtime_ns) == (after.st_size, after.st_mtime_ns) \
                and total == after.st_size:
            return b"".join(parts), after
    raise ReadRefused("changing")


def sha256_file(path: str | os.PathLike[str], block: int = 4 * 2**20) -> str:
    """A file's sha256, read in blocks (hashlib releases the GIL for large ones)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(block):
            digest.update(chunk)
    return digest.hexdigest()
