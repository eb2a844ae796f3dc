"""Sound out of the speakers without Qt: PySide6-Essentials has no QtMultimedia, so PCM goes to
the desktop's own player on a pipe (PipeWire's pw-play, PulseAudio's paplay, ALSA's aplay),
read from standard input: nothing is written to disk. No player, or no sound device, is a
PlayerError with one sentence for the window to show.

    player = open_player(22050)     # PlayerError when none can play
    player.write(pcm); player.close()   # close waits for the end; stop() cuts it off now
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
from typing import Protocol


class PlayerError(RuntimeError):
    """Sound cannot be played here; str() is one sentence for the user."""


class Player(Protocol):
    def write(self, pcm: bytes) -> None: ...
    def close(self) -> None: ...
    def stop(self) -> None: ...


def player_command(rate: int) -> list[str] | None:
    """The first player found for raw 16-bit mono PCM at `rate` on standard input."""
    commands = {
        "pw-play": ["--format", "s16", "--rate", str(rate), "--channels", "1", "-"],
        "paplay": ["--raw", "--format=s16le", f"--rate={rate}", "--channels=1"],
        "aplay": ["-q", "-t", "raw", "-f", "S16_LE", "-r", str(rate), "-c", "1", "-"],
    }
    for name, args in commands.items():
        found = shutil.which(name)
        if found:
            return [found, *args]
    return None


class PipePlayer:
    def __init__(self, command: list[str]) -> None:
        try:
            self._proc = subprocess.Popen(command, stdin=subprocess.PIPE,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        except OSError as exc:
            raise PlayerError(f"The sound player could not start: {exc.strerror or exc}.") \
                from None

    def write(self, pcm: bytes) -> None:
        assert self._proc.stdin is not None
        try:
            self._proc.stdin.write(pcm)
            self._proc.stdin.flush()
        except (BrokenPipeError, ValueError):  # ValueError: closed by stop() meanwhile
            raise PlayerError(self._end()) from None

    def _end(self) -> str:
        """Wait for the player, release its pipes; why it failed, when it did."""
        for pipe in (self._proc.stdin,):
            with contextlib.suppress(OSError, ValueError):
                if pipe is not None:
                    pipe.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._proc.wait(timeout=5)
        err = b""
        if self._proc.stderr is not None:
            with contextlib.suppress(OSError, ValueError):
                err = self._proc.stderr.read(500)
                self._proc.stderr.close()
        detail = err.decode(errors="replace").strip().splitlines()
        return "No sound device could play it" + (f" ({detail[0]})." if detail else ".")

    def close(self) -> None:
        """Wait until what was written has been played."""
        why = self._end()
        if self._proc.returncode not in (0, -9):
            raise PlayerError(why)

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            self._proc.kill()  # at once: what the pipe still holds is never heard
        self._end()


def open_player(rate: int) -> Player:
    command = player_command(rate)
    if command is None:
        raise PlayerError("No way to play sound was found (pw-play, paplay or aplay).")
    return PipePlayer(command)
