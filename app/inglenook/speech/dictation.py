"""Dictation, Qt-free: record from the microphone on a background thread until stopped (or a
cap), report the level as it goes, then transcribe what was heard, in memory. The window shows
the level and puts the words in the message box, where they can be edited before sending.

    dictation = Dictation(open_recorder, load_transcriber, on_level, on_text, on_error, on_done)
    dictation.start(language=None)    # on_level(0..1) about ten times a second
    dictation.stop()                  # then on_text(words) once transcribed; on_done() always
    dictation.cancel()                # nothing is transcribed

Callbacks run on the dictation's thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np

from inglenook.speech.audio import SAMPLE_RATE, is_silent
from inglenook.speech.recorder import Recorder, RecorderError
from inglenook.speech.stt import SpeechModelError, Transcriber

CHUNK_BYTES = SAMPLE_RATE // 10 * 2  # 100 ms of 16-bit mono
MAX_SECONDS = 600.0  # a dictation is a message, not a meeting: ten minutes at most


class EndOfSpeech:
    """When someone has finished speaking, from the loudness alone: speech has begun once
    `onset_s` of sound is above `threshold` (RMS), and has ended after `silence_s` below it.
    Silence before speech never ends it (the microphone waits)."""

    def __init__(self, threshold: float = 0.02, silence_s: float = 0.9,
                 onset_s: float = 0.2) -> None:
        self.threshold, self.silence_s, self.onset_s = threshold, silence_s, onset_s
        self.loud = self.quiet = 0.0

    @property
    def started(self) -> bool:
        return self.loud >= self.onset_s

    def push(self, rms: float, seconds: float) -> bool:
        """One stretch of audio's loudness; True once speech has begun and then ended."""
        if rms >= self.threshold:
            self.loud += seconds
            self.quiet = 0.0
        elif self.started:
            self.quiet += seconds
        return self.started and self.quiet >= self.silence_s


class Dictation:
    def __init__(self, open_recorder: Callable[[int], Recorder],
                 load_transcriber: Callable[[], Transcriber],
                 on_level: Callable[[float], None], on_text: Callable[[str], None],
                 on_error: Callable[[str], None], on_done: Callable[[], None],
                 max_seconds: float = MAX_SECONDS,
                 end_of_speech: Callable[[], EndOfSpeech] | None = None) -> None:
        self._open, self._load = open_recorder, load_transcriber
        self._on_level, self._on_text = on_level, on_text
        self._on_error, self._on_done = on_error, on_done
        self.max_seconds = max_seconds
        self._end_of_speech = end_of_speech  # hands-free: stop by itself when speech ends
        self._stop = threading.Event()
        self._cancelled = False
        self._thread: threading.Thread | None = None
        self._recorder: Recorder | None = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self, language: str | None = None) -> None:
        if self.running:
            return
        self._stop.clear()
        self._cancelled = False
        self._thread = threading.Thread(target=self._run, args=(language,), daemon=True,
                                        name="dictation")
        self._thread.start()

    def stop(self) -> None:
        """Stop listening; what was heard is transcribed."""
        self._stop.set()
        recorder = self._recorder
        if recorder is not None:
            recorder.stop()  # a read blocked on the microphone returns now

    def cancel(self) -> None:
        self._cancelled = True
        self.stop()

    def _run(self, language: str | None) -> None:
        try:
            pcm = self._record()
            if self._cancelled:
                return
            samples = np.frombuffer(pcm, np.int16).astype(np.float32) / 32768.0
            if is_silent(samples):
                self._on_error("Nothing was heard: is the microphone on?")
                return
            text = self._load().transcribe(samples, language).text
            if not self._cancelled:
                self._on_text(text)
        except (RecorderError, SpeechModelError, ValueError) as exc:
            self._on_error(str(exc))
        finally:
            self._on_done()

    def _record(self) -> bytes:
        recorder = self._recorder = self._open(SAMPLE_RATE)
        heard = bytearray()
        cap = int(self.max_seconds * SAMPLE_RATE) * 2
        ending = self._end_of_speech() if self._end_of_speech else None
        try:
            while not self._stop.is_set() and len(heard) < cap:
                chunk = recorder.read(CHUNK_BYTES)
                if not chunk:
                    break
                heard += chunk[:cap - len(heard)]
                level = np.frombuffer(chunk[:len(chunk) // 2 * 2], np.int16)
                rms = float(np.sqrt(np.mean(np.square(level / 32768.0)))) if len(level) else 0.0
                self._on_level(min(1.0, rms * 4))  # speech sits around 0.05-0.25 rms
                if ending is not None and ending.push(rms, len(level) / SAMPLE_RATE):
                    break
        finally:
            self._recorder = None
            recorder.stop()
        return bytes(heard)
