"""Seeing Qt open a file it should never open: a FIFO whose path goes into hostile
`<img src=…>`, and a watcher process that records every time a reader opens it.

`os.open(fifo, O_WRONLY | O_NONBLOCK)` succeeds only while a reader has the FIFO open, so the
watcher tries it in a loop; when it succeeds it records the open and closes at once, and the
reader (Qt, loading the "image" on the GUI thread) gets an empty file instead of hanging. The
watcher is a process, not a thread: PySide6 holds the GIL while Qt runs, so a Python thread
could never run while the GUI thread is blocked in open() (tried: it deadlocks).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

_WATCH = r"""
import os, sys, time
fifo, log = sys.argv[1], sys.argv[2]
print("ready", flush=True)
while True:
    try:
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:
        time.sleep(0.002)
        continue
    with open(log, "a") as f:
        f.write("open\n")
    os.close(fd)
    time.sleep(0.002)
"""


class FifoWatch:
    """A FIFO in a short folder of its own (names that quote it must stay short)."""

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="ig", dir="/tmp"))
        self.path = self.folder / "f"
        os.mkfifo(self.path)
        self.log = self.folder / "opens"
        self._process = subprocess.Popen(
            [sys.executable, "-c", _WATCH, str(self.path), str(self.log)],
            stdout=subprocess.PIPE, text=True)
        assert self._process.stdout is not None
        assert self._process.stdout.readline().strip() == "ready"

    @property
    def entity_path(self) -> str:
        """The path with its slashes as HTML entities: fit for a file name."""
        return str(self.path).replace("/", "&#47;")

    def image(self) -> str:
        """Markup that makes rich text open the FIFO (as an image)."""
        return f'<img src="{self.entity_path}">'

    def opens(self) -> int:
        return self.log.read_text().count("open") if self.log.exists() else 0

    def close(self) -> None:
        self._process.kill()
        self._process.wait()
        if self._process.stdout is not None:
            self._process.stdout.close()
        shutil.rmtree(self.folder, ignore_errors=True)
