"""Chat → Voice conversation in the window: binds speech/turns.py (the Qt-free turn logic) to
the chat. What was heard is sent as if typed (the composer's own send path, so each turn is an
ordinary message); the reply is read as it streams; then it listens again. Speaking while the
reply is read interrupts it: the reading and the reply stop, and what is said is the next turn.
Esc or the command again ends it. The microphone, the transcription and the voice all work
off the GUI thread.

Signals:
    state_changed(str): off, listening, transcribing, waiting, speaking (queued).
    said(str): the state in words, for the status bar ("" off).
    failed(str): the conversation ended on a problem (no microphone, no sound device).
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, Signal

from inglenook.speech import catalog as speech_catalog
from inglenook.speech import recorder as recorders
from inglenook.speech.dictation import Dictation, EndOfSpeech
from inglenook.speech.turns import OFF, VoiceTurns
from inglenook.ui.chat.composer import Composer
from inglenook.ui.chat.mic_button import default_transcriber, unless_gone
from inglenook.ui.chat.read_aloud_control import ReadAloudControl
from inglenook.ui.widgets.banner import Banner

SHOWN = {"listening": "Voice conversation: listening…",
         "transcribing": "Voice conversation: writing down what you said…",
         "waiting": "Voice conversation: waiting for the reply…",
         "speaking": "Voice conversation: reading the reply (speak to interrupt; Esc ends it)",
         OFF: ""}


class VoiceConversation(QObject):
    state_changed = Signal(str)
    said = Signal(str)
    failed = Signal(str)
    _heard = Signal(str)
    _interrupted = Signal()

    def __init__(self, read_aloud: ReadAloudControl, composer: Composer,
                 can_send: Callable[[], bool], banner: Banner,
                 parent: QObject | None = None,
                 stop_reply: Callable[[], None] = lambda: None) -> None:
        super().__init__(parent)
        self._composer, self._can_send, self._banner = composer, can_send, banner
        self._heard.connect(self._send_now)
        self._interrupted.connect(stop_reply)
        self.state_changed.connect(lambda state: self.said.emit(SHOWN[state]))
        self.failed.connect(lambda message: banner.show_message(
            f"The voice conversation stopped: {message}"))
        self.turns = VoiceTurns(self._dictation, read_aloud.reader, self._send,
                                unless_gone(self.state_changed.emit),
                                unless_gone(self.failed.emit),
                                open_monitor=lambda rate: recorders.open_recorder(rate),
                                on_interrupt=unless_gone(self._interrupted.emit))
        self.turns.language = speech_catalog.dictation_language
        self.destroyed.connect(self.turns.stop)

    @staticmethod
    def _dictation(on_text: Callable[[str], None], on_error: Callable[[str], None],
                   on_done: Callable[[], None]) -> Dictation:
        return Dictation(lambda rate: recorders.open_recorder(rate), default_transcriber,
                         lambda _level: None, on_text, on_error, on_done,
                         end_of_speech=EndOfSpeech)

    def _send_now(self, text: str) -> None:
        """The words heard, sent as if typed (an ordinary message); a draft is kept aside."""
        if not self.active:
            return
        if not self._can_send():
            self.turns.stop()
            self._banner.show_message("The voice conversation stopped: the chat cannot take "
                                      "a message now.", "info")
            return
        edit = self._composer.edit
        draft = edit.toPlainText()
        edit.setPlainText(text)
        self._composer.button.click()
        if draft.strip() and not edit.toPlainText():
            edit.setPlainText(draft)

    def _send(self, text: str) -> bool:  # on the dictation's thread: the GUI thread sends
        unless_gone(self._heard.emit)(text)
        return True

    @property
    def active(self) -> bool:
        return self.turns.state != OFF

    def toggle(self) -> None:
        if self.active:
            self.turns.stop()
        else:
            self.turns.start()

    def stop(self) -> bool:
        """End it now; True when it was on (Esc is then spent)."""
        was = self.active
        self.turns.stop()
        return was
