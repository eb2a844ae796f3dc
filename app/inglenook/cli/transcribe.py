"""`inglenook transcribe FILE`: speech to text with faster-whisper, on this machine.

The file is decoded a window at a time (speech/audio.windows) and each segment is printed as it
is recognised with --format text, so a long recording costs one window of memory and shows
progress; srt, vtt and the JSON formats are written at the end. The audio is never copied.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from inglenook.cli.common import INTERRUPTED_EXIT, fail

WINDOW_S = 300.0  # five minutes of audio decoded at a time
MAX_HOURS = 12.0


def add_parser(commands: argparse._SubParsersAction) -> None:
    from inglenook.speech.formats import FORMATS

    p = commands.add_parser("transcribe", help="write down what is said in an audio file")
    p.add_argument("file", type=Path, help="audio or video file (wav, mp3, flac, ogg, m4a, …)")
    p.add_argument("--model", default=None,
                   help="a faster-whisper model folder or the name of an installed one "
                        "(default: the first installed, else the bundled base model)")
    p.add_argument("--language", default=None,
                   help="language code such as en or de (default: detected)")
    p.add_argument("--prompt", default="", help="words to expect (names, spelling)")
    p.add_argument("--format", choices=FORMATS, default="text", help="output (default: text)")


def run(args: argparse.Namespace) -> int:
    from inglenook.speech import formats
    from inglenook.speech.audio import SAMPLE_RATE, AudioError, probe, windows
    from inglenook.speech.catalog import LoadedModels
    from inglenook.speech.stt import SpeechModelError, Transcript, check_language

    try:
        probe(args.file)  # a file that is not audio is said before a model loads
    except AudioError as exc:
        return fail(f"{args.file.name}: {exc}")
    try:
        language = check_language(args.language)
        model = LoadedModels().transcriber(args.model)
    except (ValueError, SpeechModelError) as exc:
        return fail(str(exc))
    detected: list[str] = []
    found = []
    samples = 0

    def counted() -> Iterator[np.ndarray]:
        nonlocal samples
        for window in windows(args.file, WINDOW_S, MAX_HOURS * 3600):
            samples += len(window)
            yield window

    try:
        for segment in model.segments(counted(), language, args.prompt, detected=detected):
            found.append(segment)
            if args.format == "text":
                print(segment.text, flush=True)
    except AudioError as exc:
        return fail(f"{args.file.name}: {exc}")
    except KeyboardInterrupt:
        return INTERRUPTED_EXIT
    if args.format != "text":
        transcript = Transcript(" ".join(s.text for s in found).strip(),
                                language or (detected[0] if detected else ""),
                                round(samples / SAMPLE_RATE, 3), tuple(found))
        out = formats.render(transcript, args.format)
        sys.stdout.write(out if out.endswith("\n") else out + "\n")
    return 0
