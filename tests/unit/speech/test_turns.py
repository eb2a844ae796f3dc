"""Hands-free turns (speech/turns.py, speech/dictation.py's end of speech) with the real voice
and whisper, and stand-ins for the microphone and the speakers: listen until the speaker stops,
send the words, read the reply as it streams, listen again; stop() ends it anywhere."""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np

from inglenook.speech.audio import decode
from inglenook.speech.dictation import Dictation, EndOfSpeech, VoiceActivity
from inglenook.speech.read_aloud import ReadAloud
from inglenook.speech.stt import Transcriber
from inglenook.speech.tts import Voice
from inglenook.speech.turns import LISTENING, OFF, SPEAKING, WAITING, VoiceTurns
from inglenook.speech.wer import word_error_rate

WAIT_S = 60.0
ASKED = "What should I cook tonight?"


def test_the_end_of_speech_is_silence_after_sound() -> None:
    ending = EndOfSpeech(threshold=0.02, silence_s=0.5, onset_s=0.2)
    assert not any(ending.push(0.0, 0.1) for _ in range(50))  # waiting for speech: no end
    assert not any(ending.push(0.2, 0.1) for _ in range(5))
    assert [ending.push(0.001, 0.1) for _ in range(5)] == [False] * 4 + [True]


class Microphone:
    """Gives `pcm`, then silence until stopped."""

    def __init__(self, pcm: bytes) -> None:
        self._pcm, self._stopped = pcm, threading.Event()

    def read(self, size: int) -> bytes:
        if self._pcm:
            chunk, self._pcm = self._pcm[:size], self._pcm[size:]
            return chunk
        # A live microphone gives silence at its own pace: so does this one, and ends when
        # stopped.
        return b"" if self._stopped.wait(0.01) else b"\0" * size

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


class States:
    def __init__(self) -> None:
        self.seen: list[str] = []
        self._cond = threading.Condition()

    def note(self, state: str) -> None:
        with self._cond:
            self.seen.append(state)
            self._cond.notify_all()

    def wait_for(self, state: str, count: int = 1) -> None:
        with self._cond:
            assert self._cond.wait_for(lambda: self.seen.count(state) >= count, WAIT_S), \
                self.seen


def test_a_voice_turn_listens_sends_speaks_and_listens_again(
        voice: Voice, transcriber: Transcriber) -> None:
    spoken = decode(voice.wav(ASKED), 60).samples
    recordings = [(spoken * 32767).astype(np.int16).tobytes(), b""]
    speakers, states, sent = Speakers(), States(), []

    def dictation(on_text: Callable[[str], None], on_error: Callable[[str], None],
                  on_done: Callable[[], None]) -> Dictation:
        pcm = recordings.pop(0) if recordings else b""
        return Dictation(lambda _rate: Microphone(pcm), lambda: transcriber, lambda _l: None,
                         on_text, on_error, on_done, end_of_speech=EndOfSpeech)

    reader = ReadAloud(lambda: voice, lambda _rate: speakers)
    turns = VoiceTurns(dictation, reader, lambda text: sent.append(text) is None, states.note)
    turns.start()
    states.wait_for(WAITING)  # it heard the question and stopped listening by itself
    assert len(sent) == 1 and word_error_rate(ASKED, sent[0]) <= 0.1, sent
    turns.reply_started(1, "reply-1")
    assert turns.state == SPEAKING
    turns.reply_delta(1, "Try a mushroom risotto. ")
    turns.reply_delta(1, "```\nno code is read\n```\n")
    turns.reply_ended(1, complete=True)
    states.wait_for(LISTENING, 2)  # the reply was read, and it listens again
    assert len(speakers.pcm) > 0
    turns.stop()
    assert turns.state == OFF and states.seen[-1] == OFF
    assert sent == sent[:1]  # silence sent nothing


def test_a_stopped_reply_ends_the_conversation(voice: Voice) -> None:
    states = States()

    def dictation(on_text: Callable[[str], None], on_error: Callable[[str], None],
                  on_done: Callable[[], None]) -> Dictation:
        return Dictation(lambda _rate: Microphone(b""), lambda: None,  # type: ignore[arg-type, return-value]
                         lambda _l: None, on_text, on_error, on_done, end_of_speech=EndOfSpeech)

    turns = VoiceTurns(dictation, ReadAloud(lambda: voice, lambda _r: Speakers()),
                       lambda _t: True, states.note)
    turns.start()
    turns.state = WAITING  # as if a question had been sent
    turns.reply_started(5, "r")
    turns.reply_ended(5, complete=False)
    assert turns.state == OFF


def test_voice_activity_needs_speech_not_a_click() -> None:
    activity = VoiceActivity(threshold=0.05, onset_s=0.3, gap_s=0.3)
    assert not activity.push(0.5, 0.1)  # a click
    assert not any(activity.push(0.0, 0.1) for _ in range(4))  # the gap forgets it
    assert [activity.push(0.2, 0.1) for _ in range(3)] == [False, False, True]


class LiveMicrophone:
    """Silence until `speak` is set, then `pcm`, then silence until stopped (a microphone open
    while the reply is read)."""

    def __init__(self, pcm: bytes, speak: threading.Event) -> None:
        self._pcm, self._speak, self._stopped = pcm, speak, threading.Event()
        self.opened = 0

    def read(self, size: int) -> bytes:
        if self._speak.is_set() and self._pcm:
            chunk, self._pcm = self._pcm[:size], self._pcm[size:]
            return chunk
        return b"" if self._stopped.wait(0.01) else b"\0" * size

    def stop(self) -> None:
        self._stopped.set()


def test_speaking_while_the_reply_is_read_interrupts_it_and_is_the_next_turn(
        voice: Voice, transcriber: Transcriber) -> None:
    said = "Stop, tell me a joke instead."
    spoken = decode(voice.wav(said), 60).samples
    speak = threading.Event()
    monitor = LiveMicrophone((spoken * 32767).astype(np.int16).tobytes(), speak)
    states, sent, interrupted = States(), [], []
    speakers = Speakers()

    def dictation(on_text: Callable[[str], None], on_error: Callable[[str], None],
                  on_done: Callable[[], None]) -> Dictation:
        return Dictation(lambda _rate: Microphone(b""), lambda: transcriber, lambda _l: None,
                         on_text, on_error, on_done, end_of_speech=EndOfSpeech)

    reader = ReadAloud(lambda: voice, lambda _rate: speakers)
    turns = VoiceTurns(dictation, reader, lambda text: sent.append(text) is None, states.note,
                       open_monitor=lambda _rate: monitor,
                       on_interrupt=lambda: interrupted.append(True))
    turns.state = WAITING  # as if a question had been sent
    turns.reply_started(1, "reply-1")
    turns.reply_delta(1, "Once upon a time there was a very long story. ")  # still writing
    assert turns.state == SPEAKING
    speak.set()  # the user speaks over it
    states.wait_for(LISTENING)
    assert interrupted == [True] and reader.reading is None  # the reading stopped at once
    states.wait_for(WAITING)  # what was said is the next turn, heard on the same microphone
    assert len(sent) == 1 and word_error_rate(said, sent[0]) <= 0.2, sent
    turns.reply_delta(1, "The rest of the old reply is not read. ")
    turns.reply_ended(1, complete=False)  # the interrupted reply ends: the conversation goes on
    assert turns.state == WAITING
    turns.stop()
    assert turns.state == OFF
