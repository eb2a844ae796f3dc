"""Dictation, Qt-free: record from the microphone on a background thread until stopped (or a
cap), report the level as it goes, then transcribe what was heard, in memory. The window shows
the level and puts the words in the message box, where they can be edited before sending.

    dictation = Dictation(open_recorder, load_transcriber, on_level, on_text, on_error, on_done,
                          on_partial=...)
    dictation.start(language=None)    # on_level(0..1) about ten times a second
    dictation.stop()                  # then on_text(words) once transcribed; on_done() always
    dictation.cancel()                # nothing is transcribed

With on_partial, a second thread writes down what has been heard so far while the recording
goes on (every PARTIAL_EVERY_S of new sound), so the words appear as they are spoken. A long
dictation keeps the finished sentences of what it wrote (past COMMIT_AFTER_S of audio) and
transcribes only the rest again: each pass costs at most that much audio, and so does the last.

Callbacks run on the dictation's threads.
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
PARTIAL_EVERY_S = 1.0  # new sound before the words so far are written down again
COMMIT_AFTER_S = 20.0  # past this much audio, finished sentences are kept, not redone
QUIET_RMS = 0.01  # below this, new sound is no new words: no pass is made for it


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


class VoiceActivity:
    """Someone speaking now (to interrupt a reply being read): `onset_s` of sound above
    `threshold` with no gap longer than `gap_s`. The threshold is higher than EndOfSpeech's:
    the reply itself, heard back from the speakers, must not count (headphones, or the
    desktop's echo-cancelling source, make it surer)."""

    def __init__(self, threshold: float = 0.05, onset_s: float = 0.3,
                 gap_s: float = 0.3) -> None:
        self.threshold, self.onset_s, self.gap_s = threshold, onset_s, gap_s
        self.loud = self.quiet = 0.0

    def push(self, rms: float, seconds: float) -> bool:
        if rms >= self.threshold:
            self.loud += seconds
            self.quiet = 0.0
        else:
            self.quiet += seconds
            if self.quiet > self.gap_s:
                self.loud = 0.0
        return self.loud >= self.onset_s


def rms_of(pcm: bytes) -> float:
    level = np.frombuffer(pcm[:len(pcm) // 2 * 2], np.int16)
    return float(np.sqrt(np.mean(np.square(level / 32768.0)))) if len(level) else 0.0


class Dictation:
    def __init__(self, open_recorder: Callable[[int], Recorder],
                 load_transcriber: Callable[[], Transcriber],
                 on_level: Callable[[float], None], on_text: Callable[[str], None],
                 on_error: Callable[[str], None], on_done: Callable[[], None],
                 max_seconds: float = MAX_SECONDS,
                 end_of_speech: Callable[[], EndOfSpeech] | None = None,
                 on_partial: Callable[[str], None] | None = None) -> None:
        self._open, self._load = open_recorder, load_transcriber
        self._on_level, self._on_text = on_level, on_text
        self._on_error, self._on_done = on_error, on_done
        self.max_seconds = max_seconds
        self._end_of_speech = end_of_speech  # hands-free: stop by itself when speech ends
        self._on_partial = on_partial
        self._stop = threading.Event()
        self._recorded = threading.Event()  # the recording ended: no more partial passes
        self._heard = bytearray()
        self._kept_text, self._kept_at = "", 0  # finished sentences, and the sample they end at
        self._so_far: tuple[int, str] = (0, "")  # the last partial pass: samples read, words
        self._cancelled = False
        self._thread: threading.Thread | None = None
        self._recorder: Recorder | None = None
        self._given: Recorder | None = None
        self._prefix = b""

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self, language: str | None = None, recorder: Recorder | None = None,
              prefix: bytes = b"") -> None:
        """`recorder`: one already open (a voice conversation interrupted by speaking goes on
        reading the microphone that heard it), and `prefix` what it heard already."""
        if self.running:
            return
        self._stop.clear()
        self._cancelled = False
        self._given, self._prefix = recorder, prefix
        # Not daemons: a process quitting mid-pass waits for it (cancelled, it ends after it)
        # rather than dying under CTranslate2's threads with "terminate called".
        self._thread = threading.Thread(target=self._run, args=(language,), name="dictation")
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

    def close(self, timeout: float = 5.0) -> None:
        """Cancel, and wait a while for a transcription under way to end (quitting; past
        `timeout` the interpreter's exit waits for the rest)."""
        self.cancel()
        thread = self._thread
        if thread is not None:
            thread.join(timeout)

    def _run(self, language: str | None) -> None:
        self._recorded.clear()
        self._heard = bytearray()
        self._kept_text, self._kept_at = "", 0
        self._so_far = (0, "")
        partials = None
        if self._on_partial is not None:
            partials = threading.Thread(target=self._partials, args=(language,),
                                        name="dictation-partial")
            partials.start()
        try:
            try:
                pcm = self._record()
            finally:
                self._recorded.set()
                if partials is not None:
                    partials.join()
            if self._cancelled:
                return
            samples = _floats(pcm)
            if is_silent(samples):
                self._on_error("Nothing was heard: is the microphone on?")
                return
            covered, text = self._so_far
            if not text or not _quiet(samples[covered:]):  # words came since the last pass
                text = self._words(samples, language, final=True)
            if not self._cancelled:
                self._on_text(text)
        except (RecorderError, SpeechModelError, ValueError) as exc:
            self._on_error(str(exc))
        finally:
            self._on_done()

    def _words(self, samples: np.ndarray, language: str | None, final: bool) -> str:
        """What was said: the sentences kept, then the rest transcribed now."""
        rest = samples[self._kept_at:]
        if is_silent(rest):
            return self._kept_text
        found = self._load().transcribe(rest, language)
        segments = found.segments
        if not final and len(rest) > COMMIT_AFTER_S * SAMPLE_RATE and len(segments) >= 2:
            kept = segments[:-1]  # the last one may still be growing
            self._kept_text = _join(self._kept_text, " ".join(s.text for s in kept))
            self._kept_at += int(kept[-1].end * SAMPLE_RATE)
            return _join(self._kept_text, segments[-1].text)
        return _join(self._kept_text, found.text)

    def _partials(self, language: str | None) -> None:
        """While recording: the words so far, each time enough new sound has come."""
        done = 0
        try:
            while not self._recorded.wait(0.2):
                have = len(self._heard) // 2
                if have - done < PARTIAL_EVERY_S * SAMPLE_RATE:
                    continue
                samples = _floats(bytes(self._heard[:have * 2]))
                new, done = samples[done:], have
                if _quiet(new) and self._so_far[1]:
                    self._so_far = (have, self._so_far[1])  # nothing new was said
                    continue
                if is_silent(samples):
                    continue
                text = self._words(samples, language, final=False)
                self._so_far = (have, text)
                if text and not self._recorded.is_set() and self._on_partial is not None:
                    self._on_partial(text)
        except (SpeechModelError, ValueError):
            return  # the last pass says what went wrong

    def _record(self) -> bytes:
        given, self._given = self._given, None
        recorder = self._recorder = given or self._open(SAMPLE_RATE)
        heard = self._heard
        heard += self._prefix
        cap = int(self.max_seconds * SAMPLE_RATE) * 2
        ending = self._end_of_speech() if self._end_of_speech else None
        for at in range(0, len(self._prefix) if ending is not None else 0, CHUNK_BYTES):
            piece = self._prefix[at:at + CHUNK_BYTES]  # the speech begun counts as begun
            ending.push(rms_of(piece), len(piece) // 2 / SAMPLE_RATE)  # type: ignore[union-attr]
        try:
            while not self._stop.is_set() and len(heard) < cap:
                chunk = recorder.read(CHUNK_BYTES)
                if not chunk:
                    break
                heard += chunk[:cap - len(heard)]
                rms = rms_of(chunk)
                self._on_level(min(1.0, rms * 4))  # speech sits around 0.05-0.25 rms
                if ending is not None and ending.push(rms, len(chunk) // 2 / SAMPLE_RATE):
                    break
        finally:
            self._recorder = None
            recorder.stop()
        return bytes(heard)


def _floats(pcm: bytes) -> np.ndarray:
    return np.frombuffer(pcm[:len(pcm) // 2 * 2], np.int16).astype(np.float32) / 32768.0


def _quiet(samples: np.ndarray) -> bool:
    return len(samples) == 0 or float(np.sqrt(np.mean(np.square(samples)))) < QUIET_RMS


def _join(first: str, second: str) -> str:
    return f"{first} {second.strip()}".strip() if first else second.strip()
