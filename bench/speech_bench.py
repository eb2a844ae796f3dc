"""Voice (issue 38), printed as one JSON line (run by bench/run.py):

  stt_realtime_factor        seconds of audio ÷ seconds to transcribe them (faster-whisper
                             base, int8, language detected): the sentences in one recording
                             (~30 s; whisper's encoder always reads 30 s windows)
  stt_realtime_factor_short  the same, each sentence alone (a dictated message: mostly padding)
  stt_word_error_rate        word error rate of those transcripts, Piper's voice (goal ≤ 0.1)
  stt_word_error_rate_espeak the same with espeak-ng's voice (null where it is not installed)
  tts_realtime_factor        seconds of audio ÷ seconds to synthesize them (Piper, joe medium)
  stt_cpu_realtime_factor    seconds of audio ÷ CPU seconds the transcription used (all
                             threads): what a busy, shared machine cannot skew
  tts_cpu_realtime_factor    the same for synthesis
  tts_first_audio_ms         a streamed reply read aloud as the window does (speech/
                             read_aloud.py, the voice loaded, as it is once Read replies aloud
                             is on): the delta that completes its first sentence given →
                             the first sound handed to the speakers; the median. The first
                             piece is a few words (sentences.lead_in): a voice makes a whole
                             piece before any of it sounds
  tts_first_audio_sentence_ms  the same with the whole first sentence made first (as before
                             lead_in cut it short): what the short first piece saves
  tts_first_audio_cpu_ms     CPU time (all threads) the first piece takes to make: what the
                             first sound costs where a core is free, which a busy, shared
                             machine cannot skew

The models come from the packages the Makefile installs (tests/speech_models.py): nothing from
the Hub. `--quick`: one sentence, figures meaningless.
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

from inglenook.speech.audio import SAMPLE_RATE, decode, wav_bytes
from inglenook.speech.read_aloud import ReadAloud
from inglenook.speech.sentences import SentenceStream, lead_in
from inglenook.speech.stt import Transcriber
from inglenook.speech.tts import Voice
from inglenook.speech.wer import word_error_rate

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.speech_models import joe_voice, whisper_base

from common import log  # bench/common.py

SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "Please water the plants while I am away.",
    "A gentle breeze carried the smell of fresh bread through the village.",
    "She asked whether the museum would be open on the holiday.",
    "Turn left at the old church and follow the river to the bridge.",
    "Our team finished the project a week before the deadline.",
    "Could you bring a warm coat, because the evening will be cold?",
    "The library keeps rare maps in a quiet room upstairs.",
]


class Speakers:
    """Notes when the first sound reaches it."""

    def __init__(self) -> None:
        self.first = 0.0
        self.heard = threading.Event()

    def __call__(self, _rate: int) -> Speakers:
        return self

    def write(self, _pcm: bytes) -> None:
        if not self.heard.is_set():
            self.first = time.perf_counter()
            self.heard.set()

    def close(self) -> None:
        pass

    def stop(self) -> None:
        pass


def first_sound(voice: Voice, sentence: str) -> float:
    """ms from the delta that completes a reply's first sentence to its first sound, read as
    the window reads a streaming reply (a few characters a delta)."""
    speakers = Speakers()
    reader = ReadAloud(lambda: voice, speakers)
    reader.begin("bench")
    twin, reply = SentenceStream(), f"{sentence} And then the reply goes on."
    started = 0.0
    for i in range(0, len(reply), 4):
        delta = reply[i:i + 4]
        if twin.feed(delta):  # this delta completes it: the reader's stream says so too
            started = time.perf_counter()
            reader.feed(delta)
            break
        reader.feed(delta)
    speakers.heard.wait(60)
    reader.stop()
    ms = (speakers.first - started) * 1000
    log(f"  first sound of {sentence!r}: {ms:.0f} ms (first piece {lead_in(sentence)[0]!r})")
    return ms


def main() -> int:
    quick = "--quick" in sys.argv
    sentences = SENTENCES[:1] if quick else SENTENCES
    folder, files = whisper_base(), joe_voice()
    if folder is None or files is None:
        log("The speech model packages are missing: run `make setup`.")
        return 1
    voice = Voice.load(files.model, files.config)
    model = Transcriber.load(folder)
    list(voice.speak(["Warm up."]))

    tts_audio = tts_time = tts_cpu = 0.0
    spoken: list[bytes] = []
    for sentence in sentences:
        started, cpu = time.perf_counter(), time.process_time()
        pcm = b"".join(voice.speak([sentence]))
        tts_time += time.perf_counter() - started
        tts_cpu += time.process_time() - cpu
        tts_audio += len(pcm) / 2 / voice.sample_rate
        spoken.append(wav_bytes(pcm, voice.sample_rate))

    first_audio = [first_sound(voice, sentence) for sentence in sentences]
    first_cpu = []
    for sentence in sentences:
        cpu = time.process_time()
        next(iter(voice.speak(lead_in(sentence)[:1])))
        first_cpu.append((time.process_time() - cpu) * 1000)
    whole_sentence = []
    for sentence in sentences:
        started = time.perf_counter()
        next(iter(voice.speak([sentence])))
        whole_sentence.append((time.perf_counter() - started) * 1000)

    stt_audio = stt_time = stt_cpu = 0.0
    errors = []
    model.transcribe(decode(spoken[0], 60).samples)  # warm up
    for sentence, wav in zip(sentences, spoken, strict=True):
        samples = decode(wav, 60).samples
        started, cpu = time.perf_counter(), time.process_time()
        heard = model.transcribe(samples)
        stt_time += time.perf_counter() - started
        stt_cpu += time.process_time() - cpu
        stt_audio += len(samples) / SAMPLE_RATE
        errors.append(word_error_rate(sentence, heard.text))
        log(f"  {heard.text!r} (WER {errors[-1]:.2f})")

    pause = np.zeros(SAMPLE_RATE // 2, np.float32)
    joined = np.concatenate([part for wav in spoken for part in (decode(wav, 60).samples,
                                                                   pause)])
    started, cpu = time.perf_counter(), time.process_time()
    model.transcribe(joined)
    long_time, long_cpu = time.perf_counter() - started, time.process_time() - cpu
    long_audio = len(joined) / SAMPLE_RATE

    espeak_wer = None
    if shutil.which("espeak-ng"):
        espeak_errors = []
        for sentence in sentences:
            wav = subprocess.run(["espeak-ng", "--stdout", sentence], check=True,
                                 capture_output=True, timeout=60).stdout
            heard = model.transcribe(decode(wav, 60).samples)
            espeak_errors.append(word_error_rate(sentence, heard.text))
        espeak_wer = round(statistics.mean(espeak_errors), 3)

    print(json.dumps({
        "stt_realtime_factor": round(long_audio / long_time, 2),
        "stt_realtime_factor_short": round(stt_audio / stt_time, 2),
        "stt_cpu_realtime_factor": round(long_audio / long_cpu, 2),
        "stt_word_error_rate": round(statistics.mean(errors), 3),
        "stt_word_error_rate_espeak": espeak_wer,
        "tts_realtime_factor": round(tts_audio / tts_time, 2),
        "tts_cpu_realtime_factor": round(tts_audio / tts_cpu, 2),
        "tts_first_audio_ms": round(statistics.median(first_audio), 1),
        "tts_first_audio_sentence_ms": round(statistics.median(whole_sentence), 1),
        "tts_first_audio_cpu_ms": round(statistics.median(first_cpu), 1),
    }))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
