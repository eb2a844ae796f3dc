"""`inglenook say` and `inglenook transcribe`, run as the command line runs them (cli.main),
with the bundled speech models linked into the test's home (tests/speech_models.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from inglenook.cli import main
from inglenook.speech.audio import decode
from inglenook.speech.wer import word_error_rate
from tests.speech_models import link_into_speech_dir

SENTENCE = "Please water the plants on Friday."


@pytest.fixture(autouse=True)
def speech_models() -> None:
    link_into_speech_dir()


def test_say_then_transcribe_gives_the_words_back(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "said.flac"
    reply = f"{SENTENCE}\n\n```python\nprint('not read')\n```\n"
    assert main(["say", reply, "-o", str(out)]) == 0
    assert decode(out.read_bytes(), 60).seconds < 4  # the code block was not read
    assert not list(tmp_path.glob("*.partial"))
    assert main(["transcribe", str(out), "--language", "en", "--format", "verbose_json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert word_error_rate(SENTENCE, result["text"]) <= 0.1, result["text"]
    assert result["language"] == "en" and result["segments"][0]["start"] == 0.0


def test_a_file_that_is_not_audio_is_one_line(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("Not a recording.\n" * 50)
    assert main(["transcribe", str(notes)]) == 1
    assert capsys.readouterr().err.startswith("inglenook: notes.txt: This is not an audio file")


def test_bad_voice_speed_and_language_are_refused(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["say", "Hi.", "-o", str(tmp_path / "a.wav"), "--voice", "robot"]) == 1
    assert "no voice named 'robot'" in capsys.readouterr().err
    assert main(["say", "Hi.", "-o", str(tmp_path / "a.wav"), "--speed", "9"]) == 1
    assert "--speed must be between" in capsys.readouterr().err
    assert main(["say", "```\ncode only\n```", "-o", str(tmp_path / "a.wav")]) == 1
    assert "nothing to say" in capsys.readouterr().err
    assert not list(tmp_path.glob("*.wav")) and not list(tmp_path.glob(".*partial"))
    wav = tmp_path / "b.wav"
    wav.write_bytes(b"RIFF\0\0\0\0WAVEfmt " + b"\0" * 40)
    assert main(["transcribe", str(wav), "--language", "xx"]) == 1
    assert "format header is cut short" in capsys.readouterr().err
