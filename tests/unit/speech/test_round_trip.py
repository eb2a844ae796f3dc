"""Speech both ways with the real models: Piper speaks a known sentence, faster-whisper hears it
back (tests/speech_models.py; nothing from the Hub). A few seconds of audio each, so the whole
file takes seconds. espeak-ng, where installed, is a second, independent voice."""

from __future__ import annotations

import shutil
import subprocess
import time

import numpy as np
import pytest

from inglenook.speech.audio import SAMPLE_RATE, decode, wav_bytes
from inglenook.speech.stt import Transcriber, TranscriptionTimeout
from inglenook.speech.tts import Voice
from inglenook.speech.wer import word_error_rate

SENTENCE = "The quick brown fox jumps over the lazy dog."


@pytest.fixture(scope="module")
def spoken(voice: Voice) -> bytes:
    return voice.wav(SENTENCE)


def test_a_steady_voice_says_a_text_alike_every_time(voice: Voice, spoken: bytes) -> None:
    """Piper's noise varies its audio from call to call (so what whisper heard in a test
    depended on the tests before it: "quip-brown fox"); a steady voice has none."""
    assert voice.steady and voice.wav(SENTENCE) == spoken


def test_piper_speaks_and_whisper_hears_the_words(spoken: bytes,
                                                  transcriber: Transcriber) -> None:
    heard = transcriber.transcribe(decode(spoken, 60).samples, language="en")
    assert word_error_rate(SENTENCE, heard.text) <= 0.1, heard.text
    assert heard.language == "en"
    assert heard.segments and heard.segments[0].start < heard.segments[-1].end
    assert heard.segments[-1].end <= heard.duration + 0.5


def test_the_language_is_detected_when_not_given(spoken: bytes,
                                                 transcriber: Transcriber) -> None:
    assert transcriber.transcribe(decode(spoken, 60).samples).language == "en"


def test_silence_gives_no_invented_words(transcriber: Transcriber) -> None:
    heard = transcriber.transcribe(np.zeros(2 * SAMPLE_RATE, np.float32), language="en")
    assert heard.text == "" and heard.segments == ()


def test_segment_times_count_across_windows(spoken: bytes, transcriber: Transcriber) -> None:
    samples = decode(spoken, 60).samples
    pause = np.zeros(SAMPLE_RATE * 3, np.float32)  # a silent window is skipped, but counted
    found = list(transcriber.segments([pause, samples], language="en"))
    assert found and found[0].start >= 3.0
    assert word_error_rate(SENTENCE, " ".join(s.text for s in found)) <= 0.1


def test_a_faster_speed_is_shorter(voice: Voice, spoken: bytes) -> None:
    fast = voice.wav(SENTENCE, speed=2.0)
    assert len(fast) < 0.7 * len(spoken)


@pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng is not installed")
def test_a_second_voice_espeak_ng_is_heard_too(transcriber: Transcriber) -> None:
    wav = subprocess.run(["espeak-ng", "--stdout", SENTENCE], check=True,
                         capture_output=True, timeout=60).stdout
    heard = transcriber.transcribe(decode(wav, 60).samples, language="en")
    assert word_error_rate(SENTENCE, heard.text) <= 0.25, heard.text


def test_a_wav_of_what_piper_says_is_well_formed(voice: Voice) -> None:
    pcm = b"".join(voice.speak(["Hi."]))
    assert len(pcm) % 2 == 0 and wav_bytes(pcm, voice.sample_rate)[:4] == b"RIFF"


def test_a_transcription_past_its_deadline_stops(spoken: bytes,
                                                 transcriber: Transcriber) -> None:
    with pytest.raises(TranscriptionTimeout):
        transcriber.transcribe(decode(spoken, 60).samples, language="en",
                               deadline=time.monotonic() - 1)
