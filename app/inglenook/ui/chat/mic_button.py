"""The composer's microphone: click to dictate, click again to stop, or hold it down and speak
(push to talk: letting go stops); Ctrl+Shift+D (Chat → Dictate) does what a click does. A level
meter while it listens; the words appear in the message box as they are recognised, editable
before sending. Recording and transcribing run on speech/dictation.py's threads, never the GUI
thread. With no microphone the button says so and stays usable (one may be plugged in later).

Signals:
    started(): listening began (the composer marks where the words go).
    partial(str): the words recognised so far, while still listening (queued).
    heard(str): the words recognised, once stopped (queued from the dictation thread).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QIcon
from PySide6.QtWidgets import QProgressBar, QPushButton, QVBoxLayout, QWidget

from inglenook.speech import catalog
from inglenook.speech import recorder as recorders
from inglenook.speech.dictation import Dictation
from inglenook.speech.stt import Transcriber
from inglenook.ui.widgets.style import restyle

IDLE, LISTENING, WORKING, NO_MIC = "Dictate", "Stop", "Transcribing…", "No microphone"
IDLE_TIP = ("Speak your message; click again to stop, or hold it down while you speak "
            "(Ctrl+Shift+D). The words can be edited before sending.")
HOLD_S = 0.6  # held down longer than this, the button is push-to-talk: letting go stops


def default_transcriber() -> Transcriber:
    return catalog.loaded.transcriber(None)


def unless_gone(emit: Callable[..., None]) -> Callable[..., None]:
    """A signal's emit for a background thread: once the window (and its widget) is gone, what
    the thread still reports has nowhere to go, and is dropped."""
    def send(*args: object) -> None:
        with contextlib.suppress(RuntimeError):  # "Signal source has been deleted"
            emit(*args)
    return send


class MicButton(QWidget):
    started = Signal()
    partial = Signal(str)
    heard = Signal(str)
    _level = Signal(float)
    _failed = Signal(str)
    _done = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.button = QPushButton(self)  # as Attach beside it
        self.button.setObjectName("micButton")
        self.button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.meter = QProgressBar(self)
        self.meter.setObjectName("micLevel")
        self.meter.setRange(0, 100)
        self.meter.setTextVisible(False)
        self.meter.setMaximumHeight(4)
        self.meter.setAccessibleName("Microphone level")
        self.meter.hide()
        column = QVBoxLayout(self)
        column.setContentsMargins(0, 0, 0, 0)
        column.setSpacing(2)
        column.addWidget(self.button)
        column.addWidget(self.meter)
        self.dictation = Dictation(lambda rate: recorders.open_recorder(rate),
                                   default_transcriber, unless_gone(self._level.emit),
                                   unless_gone(self.heard.emit), unless_gone(self._failed.emit),
                                   unless_gone(self._done.emit),
                                   on_partial=unless_gone(self.partial.emit))
        self.destroyed.connect(self.dictation.cancel)
        self._level.connect(self._show_level)
        self._failed.connect(self._show_failure)
        self._done.connect(self._finished)
        self.button.pressed.connect(self._pressed)
        self.button.released.connect(self._released)
        self._pressed_at = 0.0
        self._started_by_press = False
        self._failure = ""  # what went wrong in this dictation, shown when it ends
        self._compact = False
        self._text = IDLE
        self._show(IDLE, IDLE_TIP)

    def _show(self, text: str, tip: str) -> None:
        self._text = text
        # Compact (a narrow window): the microphone's icon says Dictate; Stop and Transcribing…
        # are said in words, as they come and go.
        iconic = self._compact and text in (IDLE, NO_MIC) and not self.button.icon().isNull()
        self.button.setText("" if iconic else text)
        self.button.setToolTip(tip)
        self.button.setAccessibleName(text)

    def set_compact(self, compact: bool) -> None:
        """Show the icon alone (a narrow window) or the words."""
        self._compact = compact
        if not compact:
            self.button.setIcon(QIcon())
        restyle(self.button, compact=compact)  # the style sheet gives the themed icon
        self._show(self._text, self.button.toolTip())

    @property
    def listening(self) -> bool:
        return self.dictation.running and self._text == LISTENING

    def toggle(self) -> None:
        """Start listening, or stop and write down what was said (a click, the shortcut)."""
        if self.listening:
            self.dictation.stop()
            self._show(WORKING, "Writing down what was said…")
            self.button.setEnabled(False)
            self.meter.hide()
        elif not self.dictation.running:
            self._failure = ""
            self.meter.setValue(0)
            self.meter.show()
            self._show(LISTENING, "Listening: click to stop, or let go when holding it")
            self.started.emit()
            self.dictation.start(catalog.dictation_language())

    def _pressed(self) -> None:
        self._pressed_at = time.monotonic()
        self._started_by_press = not self.dictation.running
        if self._started_by_press:
            self.toggle()

    def _released(self) -> None:
        """A click started it: it listens on. Held down (push to talk), or a second click:
        it stops."""
        held = time.monotonic() - self._pressed_at >= HOLD_S
        if self.listening and (held or not self._started_by_press):
            self.toggle()

    def cancel(self) -> None:
        self.dictation.cancel()

    def _show_level(self, level: float) -> None:
        self.meter.setValue(max(1, round(level * 100)))  # anything heard shows

    def _show_failure(self, message: str) -> None:
        self._failure = message

    def _finished(self) -> None:
        self.meter.hide()
        self.button.setEnabled(True)
        failure = self._failure
        if failure.startswith("No microphone"):
            self._show(NO_MIC, failure)
        elif failure:
            self._show(IDLE, f"{failure}\n\n{IDLE_TIP}")
        else:
            self._show(IDLE, IDLE_TIP)
