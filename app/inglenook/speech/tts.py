"""Text to speech with Piper (an ONNX voice and its JSON config): text in, 16-bit mono PCM out,
a sentence at a time so that playback (or an HTTP response) starts after the first one.

    voice = Voice.load(Path("en_US-joe-medium.onnx"))     # VoiceError when it is not a voice
    for pcm in voice.speak(sentences, speed=1.0): ...     # bytes, voice.sample_rate
    voice.wav("Hello there.")                              # a whole WAV file

What to say comes from speech/sentences.py (code blocks and reasoning never read); Piper's own
phonemizer splits further where it must. Thread-safe: one synthesis at a time per voice.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from inglenook.speech.audio import wav_bytes
from inglenook.speech.sentences import speakable

MAX_CONFIG_BYTES = 4 * 1024 * 1024
MAX_INPUT_CHARS = 4096  # OpenAI's own limit on `input`
MIN_SPEED, MAX_SPEED = 0.25, 4.0  # OpenAI's range


class VoiceError(ValueError):
    """A voice file that cannot be used; str() is one sentence for the user."""


@dataclass(frozen=True)
class VoiceFiles:
    model: Path  # NAME.onnx
    config: Path  # NAME.onnx.json

    @property
    def name(self) -> str:
        return self.model.name.removesuffix(".onnx")

    @staticmethod
    def of(model: Path) -> VoiceFiles:
        return VoiceFiles(model, model.with_name(model.name + ".json"))


def read_config(config: Path) -> dict:
    """The voice's JSON, checked for what synthesis needs."""
    try:
        if config.stat().st_size > MAX_CONFIG_BYTES:
            raise VoiceError(f"{config.name} is too large to be a voice's settings.")
        data = json.loads(config.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise VoiceError(f"A Piper voice needs its settings beside it: {config.name} is "
                         "missing.") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise VoiceError(f"{config.name} is not a Piper voice's settings ({exc}).") from None
    audio = data.get("audio") if isinstance(data, dict) else None
    if (not isinstance(audio, dict) or not isinstance(audio.get("sample_rate"), int)
            or not isinstance(data.get("phoneme_id_map"), dict)):
        raise VoiceError(f"{config.name} is not a Piper voice's settings (no sample rate or "
                         "phoneme map).")
    if not 8_000 <= audio["sample_rate"] <= 96_000:
        raise VoiceError(f"{config.name} claims a sample rate of {audio['sample_rate']} Hz.")
    return data


def _piper_voice(model: Path, settings: dict) -> object:
    """Piper's voice, its ONNX session made here rather than by PiperVoice.load: onnxruntime's
    threads otherwise spin while waiting for work, taking the cores the window's thread
    needs (a reply read aloud stalled it for 150 ms on two busy cores)."""
    import onnxruntime
    from piper import PiperVoice
    from piper.config import PiperConfig

    options = onnxruntime.SessionOptions()
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.add_session_config_entry("session.inter_op.allow_spinning", "0")
    session = onnxruntime.InferenceSession(str(model), sess_options=options,
                                           providers=["CPUExecutionProvider"])
    return PiperVoice(config=PiperConfig.from_dict(settings), session=session)


class Voice:
    """`steady`: the same audio for the same text every time (Piper's noise off, as tests and
    benches need); otherwise Piper's default variation, which sounds more natural."""

    def __init__(self, files: VoiceFiles, piper_voice: object, sample_rate: int,
                 steady: bool = False) -> None:
        self.files = files
        self.sample_rate = sample_rate
        self.steady = steady
        self._piper = piper_voice
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return self.files.name

    @staticmethod
    def load(model: Path, config: Path | None = None, steady: bool = False) -> Voice:
        files = VoiceFiles(model, config) if config else VoiceFiles.of(model)
        if not model.is_file():
            raise VoiceError(f"There is no voice file {model}.")
        settings = read_config(files.config)
        try:
            piper_voice = _piper_voice(model, settings)
        except Exception as exc:  # onnxruntime's InvalidProtobuf, Fail… share no base class
            raise VoiceError(f"{model.name} is not a Piper voice: {str(exc)[:200]}") from None
        return Voice(files, piper_voice, settings["audio"]["sample_rate"], steady)

    def speak(self, sentences: Iterable[str], speed: float = 1.0) -> Iterator[bytes]:
        """16-bit mono PCM at sample_rate, one piece per sentence (a silent pause between)."""
        from piper import SynthesisConfig

        if not MIN_SPEED <= speed <= MAX_SPEED:
            raise ValueError(f"speed must be between {MIN_SPEED} and {MAX_SPEED}")
        noise = 0.0 if self.steady else None  # None: the voice's own
        config = SynthesisConfig(length_scale=1.0 / speed, noise_scale=noise,
                                 noise_w_scale=noise)
        for sentence in sentences:
            with self._lock:
                chunks = list(self._piper.synthesize(sentence, config))  # type: ignore[attr-defined]
            for chunk in chunks:
                yield chunk.audio_int16_bytes

    def speak_text(self, markdown: str, speed: float = 1.0) -> Iterator[bytes]:
        return self.speak(speakable(markdown), speed)

    def wav(self, markdown: str, speed: float = 1.0) -> bytes:
        return wav_bytes(b"".join(self.speak_text(markdown, speed)), self.sample_rate)
