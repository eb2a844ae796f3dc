"""Writing files so that a crash or a full disk never leaves half of one, and keeping a file
the app cannot use under another name instead of deleting it."""

from __future__ import annotations

import contextlib
import os
import shutil
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
