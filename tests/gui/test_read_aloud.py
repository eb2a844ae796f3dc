"""Read aloud on a reply in the real window (fake engine, the real Piper voice): the button
reads and becomes Stop reading, Esc silences it at once, and with no sound device the window
says so and nothing crashes. The sound card is the only stand-in (as the house rules allow)."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from inglenook.speech import player as players
from inglenook.speech.player import PlayerError
from inglenook.ui.chat.bubble import BUTTONS, STOP_READING, MessageBubble
from inglenook.ui.main_window import MainWindow
from tests.gui.conftest import REPLY_TIMEOUT_MS, Script, chat


class HeldPlayer:
    """A sound card whose buffer is full until stopped: reading lasts until Esc."""

    def __init__(self) -> None:
        self.pcm = bytearray()
        self.stopped = threading.Event()

    def write(self, pcm: bytes) -> None:
        self.pcm += pcm
        self.stopped.wait(60)
        raise PlayerError("stopped")

    def close(self) -> None:
        pass

    def stop(self) -> None:
        self.stopped.set()


def last_reply(win: MainWindow) -> MessageBubble:
    bubbles = [b for b in win.findChildren(MessageBubble) if b.role == "assistant"]
    return bubbles[-1]


def test_read_aloud_then_esc_stops_it(qtbot: QtBot, window: MainWindow, script: Script,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    held = HeldPlayer()
    monkeypatch.setattr(players, "open_player", lambda _rate: held)
    script.write(default={"text": "Good evening. The kettle is on.\n\n```\ncode\n```",
                          "token_ms": 1})
    chat(qtbot, window, "Hello")
    bubble = last_reply(window)
    assert bubble.speak_button.text() == BUTTONS["speak"][0] and bubble.speak_button.isEnabled()
    qtbot.mouseClick(bubble.speak_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: bubble.speak_button.text() == STOP_READING,
                    timeout=REPLY_TIMEOUT_MS)
    qtbot.waitUntil(lambda: len(held.pcm) > 0, timeout=REPLY_TIMEOUT_MS)
    window.composer.edit.setFocus()
    qtbot.keyClick(window.composer.edit, Qt.Key.Key_Escape)
    assert held.stopped.is_set()  # at once, by the key press itself
    qtbot.waitUntil(lambda: bubble.speak_button.text() == BUTTONS["speak"][0],
                    timeout=REPLY_TIMEOUT_MS)
    assert not window.banner.isVisible()


def test_no_sound_device_is_said_and_nothing_crashes(qtbot: QtBot, window: MainWindow,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(players, "player_command", lambda _rate: None)
    chat(qtbot, window, "Say something")
    bubble = last_reply(window)
    qtbot.mouseClick(bubble.speak_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: "No way to play sound" in window.banner.label.text(),
                    timeout=REPLY_TIMEOUT_MS)
    assert window.banner.label.text().startswith("Could not read aloud:")
    qtbot.waitUntil(lambda: bubble.speak_button.text() == BUTTONS["speak"][0],
                    timeout=REPLY_TIMEOUT_MS)
    chat(qtbot, window, "Still here?")  # the window goes on


class KeptPlayer:
    def __init__(self) -> None:
        self.pcm = bytearray()
        self.heard_while_writing: bool | None = None
        self.replying: Callable[[], bool] = lambda: False

    def write(self, pcm: bytes) -> None:
        if self.heard_while_writing is None:
            self.heard_while_writing = self.replying()
        self.pcm += pcm

    def close(self) -> None:
        pass

    def stop(self) -> None:
        pass


def test_replies_are_read_as_they_are_written(qtbot: QtBot, window: MainWindow, script: Script,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    kept = KeptPlayer()
    kept.replying = lambda: window.chats.session.reply is not None
    monkeypatch.setattr(players, "open_player", lambda _rate: kept)
    window.command_actions["readRepliesAloud"].trigger()
    assert window.app_settings.value.read_replies_aloud
    words = " ".join(["and then more words"] * 60)
    script.write(default={"text": f"The first sentence comes quickly. {words}.", "token_ms": 20})
    chat(qtbot, window, "Tell me a long story")
    qtbot.waitUntil(lambda: window.chats.read_aloud.reader.reading is None,
                    timeout=REPLY_TIMEOUT_MS * 4)
    assert kept.heard_while_writing is True  # it spoke before the reply was done
    assert len(kept.pcm) > 0
