"""The lock file that serialises settings writers across processes."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from inglenook.core.filelock import LockTimeout, file_lock


def test_held_then_released(tmp_path: Path) -> None:
    lock = tmp_path / "x.lock"
    with file_lock(lock):
        assert lock.read_text().split()[0] == str(os.getpid())
        with pytest.raises(LockTimeout), file_lock(lock, timeout=0.02):
            pass
    assert not lock.exists()
    with file_lock(lock, timeout=0):
        pass


def test_an_old_lock_is_taken_over(tmp_path: Path) -> None:
    lock = tmp_path / "x.lock"
    lock.write_text(f"{os.getpid()}\n")  # even one naming a live process
    os.utime(lock, (time.time() - 60, time.time() - 60))
    with file_lock(lock, timeout=0.02, stale_after=10):
        assert lock.stat().st_mtime > time.time() - 10
    assert sorted(p.name for p in tmp_path.iterdir()) == []


@pytest.mark.skipif(os.name != "posix", reason="process liveness is only checked on POSIX")
def test_a_fresh_lock_of_a_dead_process_is_taken_over(tmp_path: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    lock = tmp_path / "x.lock"
    lock.write_text(f"{dead}\n")
    with file_lock(lock, timeout=0.02, stale_after=3600):
        assert lock.read_text().split()[0] == str(os.getpid())


def test_a_lock_taken_over_meanwhile_is_not_removed_by_its_old_holder(tmp_path: Path) -> None:
    lock = tmp_path / "x.lock"
    with file_lock(lock):
        lock.unlink()  # what a process that judged it stale does
        lock.write_text("12345\n")
    assert lock.read_text() == "12345\n"


def test_a_folder_that_cannot_hold_it(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError), file_lock(tmp_path / "missing" / "x.lock"):
        pass
