"""Reading replies aloud (speech/read_aloud.py) with the real Piper voice and a stand-in for the
sound card (a player that keeps what it is given): what is read, stopping at once, speaking
while a reply still streams, and no sound device."""

from __future__ import annotations

import threading
from collections.abc import Hashable

import pytest

from inglenook.speech.player import PlayerError
from inglenook.speech.read_aloud import ReadAloud
from inglenook.speech.tts import Voice

WAIT_S = 60.0


class FakePlayer:
    def __init__(self, block: bool = False) -> None:
        self.pcm = bytearray()
        self.first = threading.Event()
        self.stopped = threading.Event()
        self.closed = False
        self._block = block

    def write(self, pcm: bytes) -> None:
        self.pcm += pcm
        self.first.set()
        if self._block:  # a sound card's buffer that is full until stopped
            self.stopped.wait(WAIT_S)
            raise PlayerError("stopped")

    def close(self) -> None:
        self.closed = True

    def stop(self) -> None:
        self.stopped.set()


class Changes:
    def __init__(self) -> None:
        self.seen: list[Hashable | None] = []
        self.errors: list[str] = []


def reader(voice: Voice, player: FakePlayer, changes: Changes) -> ReadAloud:
    return ReadAloud(lambda: voice, lambda _rate: player, changes.seen.append,
                     changes.errors.append)


def test_a_reply_is_read_without_its_code(voice: Voice) -> None:
    player, changes = FakePlayer(), Changes()
    aloud = reader(voice, player, changes)
    aloud.read(7, "Hello there.\n\n```python\nprint('a long program ' * 40)\n```\n")
    assert aloud.wait(WAIT_S)
    said = b"".join(voice.speak(["Hello there."]))  # Piper's noise varies lengths a little
    assert len(player.pcm) == pytest.approx(len(said), rel=0.25) and player.closed
    assert changes.seen[0] == 7 and changes.seen[-1] is None and not changes.errors


def test_stop_cuts_the_sound_off_at_once(voice: Voice) -> None:
    player, changes = FakePlayer(block=True), Changes()
    aloud = reader(voice, player, changes)
    aloud.read(1, "The first sentence. The second sentence. The third sentence.")
    assert player.first.wait(WAIT_S)
    assert aloud.reading == 1
    assert aloud.stop() is True
    assert player.stopped.is_set()  # stop() itself stopped the player: nothing waits
    assert aloud.wait(WAIT_S) and aloud.reading is None
    first = b"".join(voice.speak(["The first sentence."]))
    assert len(player.pcm) == pytest.approx(len(first), rel=0.25)
    assert aloud.stop() is False and not changes.errors


def test_a_streaming_reply_is_heard_before_it_ends(voice: Voice) -> None:
    player, changes = FakePlayer(), Changes()
    aloud = reader(voice, player, changes)
    aloud.begin("live")
    for piece in ("The model ", "starts here. ", "And it is still wri"):
        aloud.feed(piece)
    assert player.first.wait(WAIT_S)  # sound, while the reply is still being written
    aloud.feed("ting.")
    aloud.end()
    assert aloud.wait(WAIT_S) and player.closed


def test_no_sound_device_is_one_message(voice: Voice) -> None:
    changes = Changes()

    def no_player(_rate: int) -> FakePlayer:
        raise PlayerError("No way to play sound was found (pw-play, paplay or aplay).")

    aloud = ReadAloud(lambda: voice, no_player, changes.seen.append, changes.errors.append)
    aloud.read(3, "Hello.")
    assert aloud.wait(WAIT_S)
    assert changes.errors == ["No way to play sound was found (pw-play, paplay or aplay)."]
    assert changes.seen[-1] is None


def test_the_pipe_player_reports_a_player_that_fails() -> None:
    from inglenook.speech.player import PipePlayer

    player = PipePlayer(["sh", "-c", "echo 'no such device' >&2; exit 3"])
    with pytest.raises(PlayerError, match="no such device"):
        for _ in range(100):
            player.write(b"\0" * 65536)
        player.close()
