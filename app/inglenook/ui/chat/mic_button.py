"""The composer's microphone: click to dictate, click again to stop; a level meter while it
listens; the words go into the message box, editable before sending. Recording and
transcribing run on speech/dictation.py's thread, never the GUI thread. With no microphone the
button says so and stays usable (one may be plugged in later).

Signals:
    heard(str): the words recognised (queued from the dictation thread).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QIcon
from PySide6.QtWidgets import QProgressBar, QPushButton, QVBoxLayout, QWidget

from inglenook.speech import recorder as recorders
from inglenook.speech.dictation import Dictation
from inglenook.speech.stt import Transcriber
from inglenook.ui.widgets.style import restyle

IDLE, LISTENING, WORKING, NO_MIC = "Dictate", "Stop", "Transcribing…", "No microphone"
IDLE_TIP = "Speak your message; click again to stop (the words can be edited before sending)"


def default_transcriber() -> Transcriber:
    from inglenook.speech import catalog

    return catalog.loaded.transcriber(None)


def unless_gone(emit: Callable[..., None]) -> Callable[..., None]:
    """A signal's emit for a background thread: once the window (and its widget) is gone, what
    the thread still reports has nowhere to go, and is dropped."""
    def send(*args: object) -> None:
        with contextlib.suppress(RuntimeError):  # "Signal source has been deleted"
            emit(*args)
    return send


class MicButton(QWidget):
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
                                   unless_gone(self._done.emit))
        self.destroyed.connect(self.dictation.cancel)
        self._level.connect(self._show_level)
        self._failed.connect(self._show_failure)
        self._done.connect(self._finished)
        self.button.clicked.connect(self.toggle)
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

    def toggle(self) -> None:
        if self.dictation.running and self._text == LISTENING:
            self.dictation.stop()
            self._show(WORKING, "Writing down what was said…")
            self.button.setEnabled(False)
            self.meter.hide()
        elif not self.dictation.running:
            self._failure = ""
            self.meter.setValue(0)
            self.meter.show()
            self._show(LISTENING, "Listening: click to stop")
            self.dictation.start()

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
