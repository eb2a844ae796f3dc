"""Dictation in the real window: the composer's microphone records (a stand-in for the sound
card plays Piper's voice into it), shows a level, and the real whisper model puts the words in
the message box, unsent. With no microphone the button says so and nothing crashes."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from PySide6.QtGui import QTextCursor
from pytestqt.qtbot import QtBot

from inglenook.speech import recorder as recorders
from inglenook.speech.audio import decode
from inglenook.speech.tts import Voice
from inglenook.speech.wer import word_error_rate
from inglenook.ui.chat.mic_button import IDLE, LISTENING, NO_MIC
from inglenook.ui.main_window import MainWindow
from tests.gui.conftest import REPLY_TIMEOUT_MS
from tests.speech_models import link_into_speech_dir

SAID = "Remind me to call the plumber tomorrow."


class FakeMicrophone:
    """Gives a recording, then silence until stopped (as a live microphone does)."""

    def __init__(self, pcm: bytes) -> None:
        self._pcm = pcm
        self._stopped = threading.Event()

    def read(self, size: int) -> bytes:
        if self._pcm:
            chunk, self._pcm = self._pcm[:size], self._pcm[size:]
            return chunk
        if self._stopped.wait(0.1):
            return b""
        return b"\0" * size

    def stop(self) -> None:
        self._stopped.set()


def test_dictated_words_arrive_in_the_message_box(qtbot: QtBot, window: MainWindow,
                                                  voice: Voice,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    link_into_speech_dir()
    samples = decode(voice.wav(SAID), 60).samples
    pcm = (samples * 32767).astype(np.int16).tobytes()
    monkeypatch.setattr(recorders, "open_recorder", lambda _rate: FakeMicrophone(pcm))
    mic = window.composer.mic
    window.composer.edit.setPlainText("Note:")
    window.composer.edit.moveCursor(QTextCursor.MoveOperation.End)  # where typing left it
    mic.button.click()
    assert mic.button.text() == LISTENING and mic.meter.isVisible()
    qtbot.waitUntil(lambda: mic.meter.value() > 0, timeout=REPLY_TIMEOUT_MS)
    mic.button.click()
    qtbot.waitUntil(lambda: mic.button.text() == IDLE, timeout=REPLY_TIMEOUT_MS)
    text = window.composer.edit.toPlainText()
    assert text.startswith("Note: ")
    assert word_error_rate(SAID, text.removeprefix("Note: ")) <= 0.1, text
    assert window.chats.session.reply is None  # put in the box, not sent


def test_no_microphone_is_said_on_the_button(qtbot: QtBot, window: MainWindow,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(recorders, "recorder_command", lambda _rate: None)
    mic = window.composer.mic
    mic.button.click()
    qtbot.waitUntil(lambda: mic.button.text() == NO_MIC, timeout=REPLY_TIMEOUT_MS)
    assert "pw-record" in mic.button.toolTip() and mic.button.isEnabled()
    assert window.composer.edit.toPlainText() == ""
