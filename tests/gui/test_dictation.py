"""Dictation in the real window: the composer's microphone records (a stand-in for the sound
card plays Piper's voice into it), shows a level, and the real whisper model puts the words in
the message box, unsent. With no microphone the button says so and nothing crashes."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QTextCursor
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


def test_words_appear_while_listening_and_stay_editable(qtbot: QtBot, window: MainWindow,
                                                        voice: Voice,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The words so far show while the microphone is still on; typing elsewhere meanwhile is
    kept, and the final words take the place of the ones shown (once, not twice)."""
    link_into_speech_dir()
    samples = decode(voice.wav(SAID), 60).samples
    pcm = (samples * 32767).astype(np.int16).tobytes()
    monkeypatch.setattr(recorders, "open_recorder", lambda _rate: FakeMicrophone(pcm))
    mic, edit = window.composer.mic, window.composer.edit
    edit.setPlainText("Note:")
    edit.moveCursor(QTextCursor.MoveOperation.End)
    mic.button.click()
    qtbot.waitUntil(lambda: "plumber" in edit.toPlainText().lower(), timeout=REPLY_TIMEOUT_MS)
    assert mic.listening  # shown while still listening
    cursor = edit.textCursor()
    cursor.setPosition(0)
    cursor.insertText("Hi. ")  # typed while the words come
    mic.button.click()
    qtbot.waitUntil(lambda: mic.button.text() == IDLE, timeout=REPLY_TIMEOUT_MS)
    text = edit.toPlainText()
    assert text.startswith("Hi. Note: ")
    assert word_error_rate(SAID, text.removeprefix("Hi. Note: ")) <= 0.1, text
    assert text.lower().count("plumber") == 1


def test_holding_the_button_is_push_to_talk_and_the_shortcut_toggles(
        qtbot: QtBot, window: MainWindow, voice: Voice,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from inglenook.ui.chat import mic_button
    from inglenook.ui.window.commands import shortcut_rows
    from inglenook.ui.window.menus import window_menus

    link_into_speech_dir()
    samples = decode(voice.wav(SAID), 60).samples
    pcm = (samples * 32767).astype(np.int16).tobytes()
    monkeypatch.setattr(recorders, "open_recorder", lambda _rate: FakeMicrophone(pcm))
    mic = window.composer.mic
    monkeypatch.setattr(mic_button, "HOLD_S", 0.0)  # every press counts as held
    qtbot.mousePress(mic.button, Qt.MouseButton.LeftButton)
    assert mic.listening
    qtbot.waitUntil(lambda: mic.meter.value() > 0, timeout=REPLY_TIMEOUT_MS)
    qtbot.mouseRelease(mic.button, Qt.MouseButton.LeftButton)  # let go: it stops
    assert not mic.listening
    qtbot.waitUntil(lambda: mic.button.text() == IDLE, timeout=REPLY_TIMEOUT_MS)
    assert "plumber" in window.composer.edit.toPlainText().lower()
    # The shortcut starts and stops it, and the shortcut sheet lists it.
    monkeypatch.setattr(recorders, "open_recorder", lambda _rate: FakeMicrophone(b""))
    assert ("Chat", "Dictate", "Ctrl+Shift+D") in shortcut_rows(window_menus(window))
    action = window.findChild(QAction, "dictate")
    assert action is not None and action.shortcut().toString() == "Ctrl+Shift+D"
    action.trigger()
    assert mic.listening
    action.trigger()
    qtbot.waitUntil(lambda: mic.button.text() == IDLE, timeout=REPLY_TIMEOUT_MS)


def test_words_dictated_into_the_middle_of_a_draft_are_spaced_from_it(
        qtbot: QtBot, window: MainWindow, voice: Voice,
        monkeypatch: pytest.MonkeyPatch) -> None:
    link_into_speech_dir()
    samples = decode(voice.wav(SAID), 60).samples
    pcm = (samples * 32767).astype(np.int16).tobytes()
    monkeypatch.setattr(recorders, "open_recorder", lambda _rate: FakeMicrophone(pcm))
    mic, edit = window.composer.mic, window.composer.edit
    edit.setPlainText("Note: thanks.")
    cursor = edit.textCursor()
    cursor.setPosition(len("Note: "))  # just before "thanks"
    edit.setTextCursor(cursor)
    mic.button.click()
    qtbot.waitUntil(lambda: mic.meter.value() > 0, timeout=REPLY_TIMEOUT_MS)
    mic.button.click()
    qtbot.waitUntil(lambda: mic.button.text() == IDLE, timeout=REPLY_TIMEOUT_MS)
    text = edit.toPlainText()
    assert text.startswith("Note: ") and text.endswith(" thanks."), text
    assert word_error_rate(SAID, text.removeprefix("Note: ").removesuffix(" thanks.")) <= 0.1
