"""Small file systems of our own: a full disk and a read-only folder that even root cannot
write (root ignores chmod, not a read-only mount). Tests using them are skipped where mounting
is not permitted (not root, no tmpfs, a container without CAP_SYS_ADMIN)."""

from __future__ import annotations

import errno
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def _mount(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["mount", *args], capture_output=True, text=True, check=False)


@contextmanager
def tmpfs(where: Path, size: str = "1m") -> Iterator[Path]:
    """A tmpfs of `size` mounted on `where`; skips the test when that is not permitted."""
    where.mkdir(parents=True, exist_ok=True)
    if shutil.which("mount") is None:
        pytest.skip("no mount command")
    done = _mount("-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where))
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield where
    finally:
        if subprocess.run(["umount", str(where)], check=False).returncode != 0:
            subprocess.run(["umount", "-l", str(where)], check=False)


def set_read_only(where: Path, read_only: bool) -> None:
    done = _mount("-o", f"remount,{'ro' if read_only else 'rw'}", str(where))
    assert done.returncode == 0, done.stderr


def fill(folder: Path) -> Path:
    """Write a file until the disk is full; remove it to make room again."""
    filler = folder / "filler"
    with filler.open("wb", buffering=0) as f:  # unbuffered: nothing left to flush on close
        try:
            while True:
                f.write(b"\0" * 4096)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC, exc
    return filler
