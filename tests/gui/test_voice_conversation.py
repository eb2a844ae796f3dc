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
    qtbot.waitUntil(lambda: "listening" in window.chats.status.text(), timeout=REPLY_TIMEOUT_MS)
    # heard, sent as a message, answered (the fake engine echoes), read, listening again
    qtbot.waitUntil(lambda: len(speakers.pcm) > 0 and window.chats.voice.turns.state
                    == "listening", timeout=REPLY_TIMEOUT_MS * 2)
    users = [b for b in window.findChildren(MessageBubble) if b.role == "user"]
    assert len(users) == 1 and word_error_rate(ASKED, users[0].text) <= 0.1, users[0].text
    qtbot.keyClick(window.composer.edit, Qt.Key.Key_Escape)
    assert not window.chats.voice.active
    qtbot.waitUntil(lambda: window.chats.status.text() == "", timeout=REPLY_TIMEOUT_MS)
