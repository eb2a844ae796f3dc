"""Chat → Voice conversation in the real window (fake engine, real whisper and Piper, stand-ins
for the microphone and speakers): the spoken question becomes an ordinary message, the reply is
read, it listens again, and Esc ends it."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from inglenook.speech import player as players
from inglenook.speech import recorder as recorders
from inglenook.speech.audio import decode
from inglenook.speech.tts import Voice
from inglenook.speech.wer import word_error_rate
from inglenook.ui.chat.bubble import MessageBubble
from inglenook.ui.main_window import MainWindow
from tests.gui.conftest import REPLY_TIMEOUT_MS
from tests.speech_models import link_into_speech_dir

ASKED = "What is the capital of France?"


class Microphone:
    def __init__(self, pcm: bytes) -> None:
        self._pcm, self._stopped = pcm, threading.Event()

    def read(self, size: int) -> bytes:
        if self._pcm:
            chunk, self._pcm = self._pcm[:size], self._pcm[size:]
            return chunk
        return b"" if self._stopped.wait(0.01) else b"\0" * size  # silence, at its own pace

    def stop(self) -> None:
        self._stopped.set()


class Speakers:
    def __init__(self) -> None:
        self.pcm = bytearray()

    def write(self, pcm: bytes) -> None:
        self.pcm += pcm

    def close(self) -> None:
        pass

    def stop(self) -> None:
        pass


def test_a_spoken_question_is_sent_answered_aloud_and_esc_ends_it(
        qtbot: QtBot, window: MainWindow, voice: Voice,
        monkeypatch: pytest.MonkeyPatch) -> None:
    link_into_speech_dir()
    question = (decode(voice.wav(ASKED), 60).samples * 32767).astype(np.int16).tobytes()
    recordings = [question]
    speakers = Speakers()
    monkeypatch.setattr(recorders, "open_recorder", lambda _rate: Microphone(
        recordings.pop(0) if recordings else b""))
    monkeypatch.setattr(players, "open_player", lambda _rate: speakers)
    window.command_actions["voiceConversation"].trigger()
    qtbot.waitUntil(lambda: "listening" in window.status_bar.voice.label.text(),
                    timeout=REPLY_TIMEOUT_MS)
    # heard, sent as a message, answered (the fake engine echoes), read, listening again
    qtbot.waitUntil(lambda: len(speakers.pcm) > 0 and window.chats.voice.turns.state
                    == "listening", timeout=REPLY_TIMEOUT_MS * 2)
    users = [b for b in window.findChildren(MessageBubble) if b.role == "user"]
    assert len(users) == 1 and word_error_rate(ASKED, users[0].text) <= 0.1, users[0].text
    qtbot.keyClick(window.composer.edit, Qt.Key.Key_Escape)
    assert not window.chats.voice.active
    qtbot.waitUntil(lambda: window.status_bar.voice.label.text() == "", timeout=REPLY_TIMEOUT_MS)


class HeldSpeakers(Speakers):
    """Speakers still playing until stopped: the reply is being read when it is interrupted."""

    def __init__(self) -> None:
        super().__init__()
        self.stopped = threading.Event()

    def write(self, pcm: bytes) -> None:
        super().write(pcm)
        self.stopped.wait(REPLY_TIMEOUT_MS / 1000)

    def stop(self) -> None:
        self.stopped.set()


def test_speaking_over_the_reply_stops_it_and_is_the_next_message(
        qtbot: QtBot, window: MainWindow, voice: Voice, script: object,
        monkeypatch: pytest.MonkeyPatch) -> None:
    link_into_speech_dir()
    said = "Stop, tell me a joke instead."
    long_reply = "Echo: {last}. " + "Here is one more sentence of a long answer. " * 300
    script.write(default={"text": long_reply, "token_ms": 20})  # type: ignore[attr-defined]
    recordings = [decode(voice.wav(text), 60).samples for text in (ASKED, said)]
    monkeypatch.setattr(recorders, "open_recorder", lambda _rate: Microphone(
        (recordings.pop(0) * 32767).astype(np.int16).tobytes() if recordings else b""))
    speakers: list[HeldSpeakers] = []
    monkeypatch.setattr(players, "open_player",
                        lambda _rate: speakers.append(HeldSpeakers()) or speakers[-1])
    window.command_actions["voiceConversation"].trigger()
    # The question is sent and its reply read; the microphone, open meanwhile, hears the
    # interruption: the reading and the reply stop, and it is the next message.
    qtbot.waitUntil(lambda: len([b for b in window.findChildren(MessageBubble)
                                 if b.role == "user"]) == 2, timeout=REPLY_TIMEOUT_MS * 2)
    assert speakers[0].stopped.is_set()  # the first reading was cut off
    users = [b for b in window.findChildren(MessageBubble) if b.role == "user"]
    assert word_error_rate(said, users[1].text) <= 0.2, users[1].text
    first_reply = next(b for b in window.findChildren(MessageBubble)
                       if b.role == "assistant")
    assert len(first_reply.text) < len(long_reply) // 2  # stopped, not written to its end
    qtbot.keyClick(window.composer.edit, Qt.Key.Key_Escape)  # Esc ends it, and the reading
    assert not window.chats.voice.active
    assert all(s.stopped.is_set() for s in speakers)
