"""Speech to text with faster-whisper (CTranslate2): a model folder, audio in (decoded by
speech/audio.py, never written to disk), segments with times out. Qt-free; callers run it on a
background thread.

    model = Transcriber.load(folder)                     # SpeechModelError when it is not one
    text = model.transcribe(audio.samples, language=None).text
    for segment in model.segments(audio.windows(path, ...)): ...   # long files, streamed

Nothing here reaches the network: the folder must hold model.bin, config.json and
tokenizer.json (faster-whisper fetches a missing tokenizer from the Hub, and takes a name that
is not a folder for a model to download).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from inglenook.speech.audio import SAMPLE_RATE, is_silent

REQUIRED_FILES = ("model.bin", "config.json", "tokenizer.json")
MAX_PROMPT_CHARS = 2000
DEFAULT_TEMPERATURES = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)  # whisper's fallback, as OpenAI's


class SpeechModelError(ValueError):
    """A speech model folder that cannot be used; str() is one sentence for the user."""


class TranscriptionTimeout(Exception):
    """The transcript took longer than its deadline allowed."""


@dataclass(frozen=True)
class Segment:
    id: int
    start: float  # seconds from the start of the audio
    end: float
    text: str
    avg_logprob: float = 0.0
    no_speech_prob: float = 0.0
    compression_ratio: float = 0.0
    temperature: float = 0.0
    tokens: tuple[int, ...] = ()


@dataclass(frozen=True)
class Transcript:
    text: str
    language: str
    duration: float
    segments: tuple[Segment, ...] = field(default=())


def check_model_folder(folder: Path) -> None:
    if not folder.is_dir():
        raise SpeechModelError(f"There is no speech model folder {folder}.")
    missing = [name for name in REQUIRED_FILES if not (folder / name).is_file()]
    if missing:
        raise SpeechModelError(f"{folder.name} is not a faster-whisper model: "
                               f"{', '.join(missing)} missing.")


def languages() -> tuple[str, ...]:
    from faster_whisper.tokenizer import _LANGUAGE_CODES

    return tuple(_LANGUAGE_CODES)


def check_language(language: str | None) -> str | None:
    """None or "" or "auto": detected. Else a whisper language code ("en", "de", …)."""
    if not language or language == "auto":
        return None
    code = language.strip().lower()
    if code not in languages():
        raise ValueError(f"'{language}' is not a language whisper knows; use a code such as "
                         "en, de, fr, es, ja, or leave it out to detect it.")
    return code


class Transcriber:
    def __init__(self, folder: Path, model: object) -> None:
        self.folder = folder
        self._model = model
        self._lock = threading.Lock()  # one transcription at a time: the cores are shared

    @property
    def name(self) -> str:
        return self.folder.name

    @staticmethod
    def load(folder: Path, threads: int = 0) -> Transcriber:
        check_model_folder(folder)
        from faster_whisper import WhisperModel

        try:
            model = WhisperModel(str(folder), device="cpu", compute_type="int8",
                                 cpu_threads=threads or min(8, os.cpu_count() or 2),
                                 local_files_only=True)
        except (RuntimeError, ValueError, OSError, KeyError) as exc:
            raise SpeechModelError(f"{folder.name} could not be loaded as a whisper model: "
                                   f"{str(exc)[:200]}") from None
        return Transcriber(folder, model)

    def segments(self, windows: Iterable[np.ndarray], language: str | None = None,
                 prompt: str = "", temperature: float | None = None,
                 deadline: float | None = None,
                 detected: list[str] | None = None) -> Iterator[Segment]:
        """Segments of audio given a window at a time (speech/audio.windows), their times
        counted from the start of the first. The language found in the first window with
        speech is kept for the rest (and appended to `detected`). `deadline`: a
        time.monotonic() after which TranscriptionTimeout ends it between segments."""
        language = check_language(language)
        offset, next_id = 0.0, 0
        for samples in windows:
            if not is_silent(samples):
                for seg in self._window(samples, language, prompt, temperature, deadline,
                                        detected):
                    yield Segment(next_id, round(offset + seg.start, 3),
                                  round(offset + seg.end, 3), seg.text.strip(),
                                  seg.avg_logprob, seg.no_speech_prob, seg.compression_ratio,
                                  seg.temperature or 0.0, tuple(seg.tokens))
                    next_id += 1
                if detected and language is None:
                    language = detected[0]
            offset += len(samples) / SAMPLE_RATE

    def _window(self, samples: np.ndarray, language: str | None, prompt: str,
                temperature: float | None, deadline: float | None,
                detected: list[str] | None) -> Iterator[Any]:
        temps = DEFAULT_TEMPERATURES if temperature is None else (min(1.0, max(0.0,
                                                                               temperature)),)
        with self._lock:
            found, info = self._model.transcribe(  # type: ignore[attr-defined]
                samples, language=language, beam_size=1, best_of=1, temperature=list(temps),
                initial_prompt=prompt[:MAX_PROMPT_CHARS] or None, vad_filter=False,
                condition_on_previous_text=False)
            if detected is not None and not detected:
                detected.append(info.language)
            for seg in found:  # the generator decodes as it is read: keep the lock
                yield seg
                if deadline is not None and time.monotonic() > deadline:
                    raise TranscriptionTimeout

    def transcribe(self, samples: np.ndarray, language: str | None = None, prompt: str = "",
                   temperature: float | None = None,
                   deadline: float | None = None) -> Transcript:
        detected: list[str] = []
        found = tuple(self.segments([samples], language, prompt, temperature, deadline,
                                    detected))
        return Transcript(" ".join(s.text for s in found).strip(),
                          check_language(language) or (detected[0] if detected else ""),
                          round(len(samples) / SAMPLE_RATE, 3), found)
