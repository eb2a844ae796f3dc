"""Speech model files that are not what they claim, and which model a name means
(speech/catalog.py): OpenAI's names mean the installed defaults."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from inglenook import paths
from inglenook.speech import catalog
from inglenook.speech.stt import SpeechModelError, Transcriber, check_language
from inglenook.speech.tts import Voice, VoiceError
from tests.speech_models import joe_voice, link_into_speech_dir


def test_a_folder_without_a_model_is_refused_without_the_network(tmp_path: Path) -> None:
    (tmp_path / "model.bin").write_bytes(b"not a model")
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(SpeechModelError, match=r"tokenizer\.json missing"):
        Transcriber.load(tmp_path)


def test_a_model_bin_that_is_garbage_is_refused(tmp_path: Path) -> None:
    for name in ("model.bin", "config.json", "tokenizer.json"):
        (tmp_path / name).write_bytes(b"garbage")
    with pytest.raises(SpeechModelError, match="could not be loaded"):
        Transcriber.load(tmp_path)


def test_a_voice_file_that_is_not_one_is_refused(tmp_path: Path) -> None:
    fake = tmp_path / "fake.onnx"
    fake.write_bytes(b"\0" * 100)
    with pytest.raises(VoiceError, match="settings beside it"):
        Voice.load(fake)
    files = joe_voice()
    assert files is not None
    fake.with_name("fake.onnx.json").write_text(files.config.read_text())
    with pytest.raises(VoiceError, match="not a Piper voice"):
        Voice.load(fake)
    fake.with_name("fake.onnx.json").write_text(json.dumps({"audio": "loud"}))
    with pytest.raises(VoiceError, match="no sample rate"):
        Voice.load(fake)


def test_a_language_is_a_whisper_code() -> None:
    assert check_language("auto") is None and check_language("DE") == "de"
    with pytest.raises(ValueError, match="'klingon' is not a language"):
        check_language("klingon")


def test_openai_names_mean_the_installed_defaults() -> None:
    folder = link_into_speech_dir()
    for name in (None, "whisper-1", "faster-whisper-base"):
        assert catalog.whisper_folder(name) == folder
    bundled = joe_voice()
    for name in (None, "tts-1", "gpt-4o-mini-tts", "alloy", "en_US-joe-medium"):
        assert catalog.voice_files(name) == bundled
    with pytest.raises(SpeechModelError, match="no speech model named 'large'"):
        catalog.whisper_folder("large")
    with pytest.raises(VoiceError, match="no voice named 'robot'"):
        catalog.voice_files("robot")


def test_the_bundled_whisper_is_joined_into_the_speech_folder_once() -> None:
    dest = paths.speech_models_dir() / "joined"
    catalog.join_whisper_parts(dest)
    parts = catalog.bundled_whisper_parts()
    assert parts is not None
    size = sum(p.stat().st_size for p in (parts[0] / "model.bin.part1",
                                          parts[1] / "model.bin.part2"))
    assert (dest / "model.bin").stat().st_size == size
    assert not list(dest.glob("*.partial"))
