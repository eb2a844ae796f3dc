"""The GUI thread at voice actions, measured with ui/heartbeat.py (a 10 ms timer's lateness): the
longest stall of each, from the click to the end of what it does (goal: none over 50 ms).
Prints one JSON line. Run by bench/run.py in its own process (offscreen unless told otherwise),
the window at 700 × 600 with the bundled model loaded; the real whisper base and Piper voice
(tests/speech_models.py), and stand-ins for the sound card that keep real time: the microphone
gives Piper's speech 100 ms per 100 ms, the speakers take sound as fast as it would play.

  speech_dictation_max_stall_ms     the microphone clicked, a sentence spoken, the words
                                    appearing as recognised, clicked again, until the
                                    transcript is in the message box
  speech_read_aloud_max_stall_ms    Read replies aloud on, a message sent: the reply streamed
                                    and read sentence by sentence, until the reading ends
  speech_conversation_max_stall_ms  Chat › Voice conversation: a question heard, sent,
                                    answered aloud, until it listens again
  speech_gui_max_stall_ms           the worst of the three

`--quick`: a short sentence, speakers that do not keep real time, no voice conversation, a reply
of 24 tokens at most, and 100 ms instead of 500 to settle before and after each action.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/ helpers

import numpy as np
from PySide6.QtCore import QEventLoop, QTimer

TIMEOUT_MS = 300_000
SAID = "Remind me to call the plumber tomorrow morning about the kitchen sink."
ASKED = "What is the capital of France?"


class Microphone:
    """`pcm` at the pace a microphone gives it (a read of 100 ms takes 100 ms), then silence."""

    def __init__(self, pcm: bytes) -> None:
        self._pcm, self._stopped = pcm, threading.Event()

    def read(self, size: int) -> bytes:
        if self._stopped.wait(size / 2 / 16_000):
            return b""
        chunk, self._pcm = self._pcm[:size], self._pcm[size:]
        return chunk + b"\0" * (size - len(chunk))

    def stop(self) -> None:
        self._stopped.set()


class Speakers:
    """Takes sound as fast as it would play (at once with `realtime` off: --quick)."""

    realtime = True

    def __init__(self, rate: int) -> None:
        self._rate, self._stopped = rate, threading.Event()

    def write(self, pcm: bytes) -> None:
        if self.realtime:
            self._stopped.wait(len(pcm) / 2 / self._rate)

    def close(self) -> None:
        pass

    def stop(self) -> None:
        self._stopped.set()


def main() -> int:
    quick = "--quick" in sys.argv
    home = tempfile.TemporaryDirectory()
    os.environ["INGLENOOK_HOME"] = home.name
    from tests.speech_models import link_into_speech_dir

    from inglenook.speech import catalog
    from inglenook.speech import player as players
    from inglenook.speech import recorder as recorders
    from inglenook.speech.audio import decode
    from inglenook.ui.heartbeat import Heartbeat

    link_into_speech_dir()
    voice = catalog.loaded.voice(None)

    def speech(text: str) -> bytes:
        return (decode(voice.wav(text), 60).samples * 32767).astype(np.int16).tobytes()

    said = speech("Remind me to call the plumber." if quick else SAID)
    asked = speech(ASKED)
    recordings: list[bytes] = []
    recorders.open_recorder = lambda _rate: Microphone(recordings.pop(0) if recordings
                                                       else b"")
    Speakers.realtime = not quick
    players.open_player = Speakers  # type: ignore[assignment]

    from common import open_window  # bench/common.py: this script's folder is on sys.path

    app, window = open_window(max_tokens=24 if quick else -1)
    result: dict[str, float] = {}
    beat = Heartbeat()

    def wait_until(done: Callable[[], bool], ms: int = TIMEOUT_MS) -> None:
        deadline = time.monotonic() + ms / 1000
        while not done() and time.monotonic() < deadline:
            loop = QEventLoop()
            QTimer.singleShot(20, loop.quit)
            loop.exec()
        if not done():
            raise SystemExit("a voice action did not finish in time")

    def settle() -> None:
        loop = QEventLoop()
        QTimer.singleShot(100 if quick else 500, loop.quit)
        loop.exec()

    def measure(name: str, action: Callable[[], object], done: Callable[[], bool]) -> None:
        settle()
        beat.start()
        action()
        wait_until(done)
        settle()
        beat.stop()
        result[f"speech_{name}_max_stall_ms"] = round(beat.max_stall_ms, 1)
        print(f"  {name}: worst stall {beat.max_stall_ms:.0f} ms while "
              f"{beat.worst_at or 'starting'}, the GUI thread busy {beat.worst_cpu_ms:.0f} ms "
              "of it", file=sys.stderr)

    wait_until(lambda: window.models.model is not None)
    catalog.loaded.transcriber(None)  # loaded once, as after the first use

    mic = window.composer.mic
    mic.started.connect(lambda: beat.mark("listening"))
    mic.partial.connect(lambda _t: beat.mark("showing the words so far"))
    mic.heard.connect(lambda _t: beat.mark("showing the words"))
    window.chats.voice.state_changed.connect(beat.mark)
    window.chats.read_aloud.changed.connect(
        lambda key: beat.mark("reading" if key is not None else "read"))
    window.reply_started.connect(lambda *_a: beat.mark("reply started"))
    window.reply_finished.connect(lambda *_a: beat.mark("reply finished"))

    def dictate() -> None:
        recordings.append(said)
        mic.toggle()

        def stop_when_heard() -> None:  # the second click, once the words have shown
            if "plumber" in window.composer.edit.toPlainText().lower():
                mic.toggle()
            else:
                QTimer.singleShot(100, stop_when_heard)
        QTimer.singleShot(100, stop_when_heard)

    measure("dictation", dictate, lambda: not mic.dictation.running
            and "plumber" in window.composer.edit.toPlainText().lower())
    window.composer.edit.clear()

    reader = window.chats.read_aloud
    window.app_settings.set("read_replies_aloud", True)
    sent = threading.Event()

    def send() -> None:
        window.composer.edit.setPlainText("Say two short sentences about the sea.")
        window.composer.button.click()
        sent.set()

    measure("read_aloud", send, lambda: window.chats.session.reply is None
            and reader.reader.reading is None)
    window.app_settings.set("read_replies_aloud", False)

    if not quick:
        voice_chat = window.chats.voice

        def converse() -> None:
            recordings.append(asked)
            voice_chat.toggle()

        measure("conversation", converse, lambda: voice_chat.turns.state == "listening"
                and len(window.chats.session.turns()) >= 4)
        voice_chat.stop()

    result["speech_gui_max_stall_ms"] = max(result.values())
    window.close()
    app.quit()
    print(json.dumps(result))
    home.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
