"""The microphone without Qt: PySide6-Essentials has no QtMultimedia, so 16 kHz mono PCM is
read from the desktop's own recorder on a pipe (PipeWire's pw-record, PulseAudio's parec, ALSA's
arecord). Nothing is written to disk. No recorder, or no microphone, is a RecorderError.

    mic = open_recorder(16000)   # RecorderError when none can record
    pcm = mic.read(3200)         # b"" once it has ended; stop() ends it now
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
from typing import Protocol


class RecorderError(RuntimeError):
    """Sound cannot be recorded here; str() is one sentence for the user."""


class Recorder(Protocol):
    def read(self, size: int) -> bytes: ...
    def stop(self) -> None: ...


def recorder_command(rate: int) -> list[str] | None:
    commands = {
        "pw-record": ["--format", "s16", "--rate", str(rate), "--channels", "1", "-"],
        "parec": ["--raw", "--format=s16le", f"--rate={rate}", "--channels=1"],
        "arecord": ["-q", "-t", "raw", "-f", "S16_LE", "-r", str(rate), "-c", "1", "-"],
    }
    for name, args in commands.items():
        found = shutil.which(name)
        if found:
            return [found, *args]
    return None


class PipeRecorder:
    def __init__(self, command: list[str]) -> None:
        try:
            self._proc = subprocess.Popen(command, stdin=subprocess.DEVNULL,
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        except OSError as exc:
            raise RecorderError(f"The recorder could not start: {exc.strerror or exc}.") \
                from None

    def read(self, size: int) -> bytes:
        assert self._proc.stdout is not None
        data = self._proc.stdout.read(size)
        if not data and self._proc.poll() not in (None, 0, -9):
            raise RecorderError(self._why())
        return data

    def _why(self) -> str:
        err = b""
        if self._proc.stderr is not None:
            with contextlib.suppress(OSError, ValueError):
                err = self._proc.stderr.read(500)
        detail = err.decode(errors="replace").strip().splitlines()
        return "No microphone could be opened" + (f" ({detail[0]})." if detail else ".")

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            self._proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._proc.wait(timeout=5)
        for pipe in (self._proc.stdout, self._proc.stderr):
            with contextlib.suppress(OSError, ValueError):
                if pipe is not None:
                    pipe.close()


def open_recorder(rate: int) -> Recorder:
    command = recorder_command(rate)
    if command is None:
        raise RecorderError("No microphone: no recorder was found (pw-record, parec or "
                            "arecord).")
    return PipeRecorder(command)
