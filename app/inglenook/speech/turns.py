"""A voice conversation, hands-free, Qt-free: listen until the speaker stops, send the words as
an ordinary message, read the reply aloud as it streams, then listen again, until stopped.
Esc (stop()) ends it at any point; each turn is a message in the chat like any other, since
sending goes through `send`, the same path as typing.

Speaking while the reply is read interrupts it (with `open_monitor`): the microphone is open
while the reply is spoken, and voice on it (dictation.VoiceActivity) stops the reading and the
reply (`on_interrupt`), and that same microphone, with what it heard, becomes the next turn's.

    turns = VoiceTurns(dictation_for, reader, send, on_state)
    turns.start()                       # "listening"
    # the chat tells it about the reply it asked for:
    turns.reply_started(rid, message_id); turns.reply_delta(rid, text); turns.reply_ended(rid, ok)
    turns.stop()                        # "off"

States (on_state): off, listening, transcribing, waiting (for the reply), speaking.
"""

from __future__ import annotations

import collections
import contextlib
import threading
from collections.abc import Callable, Hashable

from inglenook.speech.audio import SAMPLE_RATE
from inglenook.speech.dictation import CHUNK_BYTES, Dictation, VoiceActivity, rms_of
from inglenook.speech.read_aloud import ReadAloud
from inglenook.speech.recorder import Recorder, RecorderError

OFF, LISTENING, TRANSCRIBING, WAITING, SPEAKING = (
    "off", "listening", "transcribing", "waiting", "speaking")
PRE_ROLL_CHUNKS = 10  # the second of sound before an interruption is kept: its first words


class VoiceTurns:
    def __init__(self, make_dictation: Callable[[Callable[[str], None], Callable[[str], None],
                                                 Callable[[], None]], Dictation],
                 reader: ReadAloud, send: Callable[[str], bool],
                 on_state: Callable[[str], None] = lambda _s: None,
                 on_error: Callable[[str], None] = lambda _m: None,
                 open_monitor: Callable[[int], Recorder] | None = None,
                 on_interrupt: Callable[[], None] = lambda: None) -> None:
        """`make_dictation(on_text, on_error, on_done)`: a Dictation that stops by itself at the
        end of speech. `send(text)`: the message sent; False when the chat cannot take it.
        `open_monitor(rate)`: the microphone, while a reply is read (None: no interrupting);
        `on_interrupt()`: the reply was interrupted (the chat stops writing it)."""
        self._make = make_dictation
        self._open_monitor, self._on_interrupt = open_monitor, on_interrupt
        self._monitor: Recorder | None = None
        self.language: Callable[[], str | None] = lambda: None  # what it listens for
        self._turn = 0  # counts replies spoken: a watcher of an earlier one gives up
        self.reader, self._send = reader, send
        self._on_state, self._on_error = on_state, on_error
        self._lock = threading.Lock()
        self.state = OFF
        self._dictation: Dictation | None = None
        self._reply: int | None = None
        self._heard = ""

    def _set(self, state: str) -> None:
        self.state = state
        self._on_state(state)

    def start(self) -> None:
        if self.state == OFF:
            self.reader.prepare()  # the voice loads while the first question is asked
            self._listen()

    def stop(self) -> None:
        with self._lock:
            was, self.state = self.state, OFF
            dictation, self._dictation, self._reply = self._dictation, None, None
        if dictation is not None:
            dictation.cancel()
        self.reader.stop()
        self._stop_monitor()
        if was != OFF:
            self._on_state(OFF)

    def close(self, timeout: float = 5.0) -> None:
        """stop(), and wait for what is under way to end (quitting)."""
        dictation = self._dictation
        self.stop()
        if dictation is not None:
            dictation.close(timeout)
        self.reader.wait(timeout)

    def _listen(self, recorder: Recorder | None = None, prefix: bytes = b"") -> None:
        self._heard = ""
        dictation = self._make(self._got_text, self._failed, self._dictation_done)
        with self._lock:
            self._dictation = dictation
        self._set(LISTENING)
        dictation.start(self.language(), recorder=recorder, prefix=prefix)

    # --- the dictation's thread -----------------------------------------------------------
    def _got_text(self, text: str) -> None:
        self._heard = text.strip()

    def _failed(self, message: str) -> None:
        if self.state != OFF and not message.startswith("Nothing was heard"):
            self._on_error(message)
            self.stop()

    def _dictation_done(self) -> None:
        """Listening ended: send what was heard, or listen again when it was nothing."""
        if self.state == OFF:
            return
        if not self._heard:
            self._listen()
            return
        self._set(WAITING)
        if not self._send(self._heard):
            self._on_error("The chat cannot take a message now.")
            self.stop()

    # --- the chat's reply (on the GUI thread in the window) ------------------------------
    def reply_started(self, request_id: int, key: Hashable) -> None:
        if self.state == WAITING:
            self._reply = request_id
            self._set(SPEAKING)
            self.reader.begin(key, on_finished=self._spoken)
            if self._open_monitor is not None:
                self._turn += 1
                threading.Thread(target=self._watch, args=(self._turn,), daemon=True,
                                 name="voice-interrupt").start()

    def reply_delta(self, request_id: int, text: str) -> None:
        if request_id == self._reply:
            self.reader.feed(text)

    def reply_ended(self, request_id: int, complete: bool) -> None:
        if request_id != self._reply:
            return
        self._reply = None
        if complete:
            self.reader.end()
        else:
            self.stop()

    def _spoken(self) -> None:
        """The reply has been read to its end: the next turn."""
        if self.state == SPEAKING:
            self._stop_monitor()
            self._listen()

    # --- interrupting by speaking (the watcher's thread) -------------------------------------
    def _watch(self, turn: int) -> None:
        assert self._open_monitor is not None
        try:
            mic = self._open_monitor(SAMPLE_RATE)
        except RecorderError:
            return  # no microphone to listen with: the reply is read to its end
        with self._lock:
            if self.state != SPEAKING or self._turn != turn:
                mic.stop()
                return
            self._monitor = mic
        recent: collections.deque[bytes] = collections.deque(maxlen=PRE_ROLL_CHUNKS)
        activity = VoiceActivity()
        handed = False
        try:
            while self.state == SPEAKING and self._turn == turn:
                chunk = mic.read(CHUNK_BYTES)
                if not chunk:
                    return
                recent.append(chunk)
                if activity.push(rms_of(chunk), len(chunk) // 2 / SAMPLE_RATE):
                    handed = self._interrupt(turn, mic, b"".join(recent))
                    return
        except RecorderError:
            return
        finally:
            if not handed:
                with self._lock:
                    if self._monitor is mic:
                        self._monitor = None
                mic.stop()

    def _interrupt(self, turn: int, mic: Recorder, heard: bytes) -> bool:
        """Voice while the reply is read: stop reading it and listen, on the same microphone."""
        with self._lock:
            if self.state != SPEAKING or self._turn != turn:
                return False
            self._reply, self._monitor = None, None
        self.reader.stop()
        self._on_interrupt()
        self._listen(recorder=mic, prefix=heard)
        return True

    def _stop_monitor(self) -> None:
        with self._lock:
            mic, self._monitor = self._monitor, None
        if mic is not None:
            with contextlib.suppress(RecorderError, OSError):
                mic.stop()
