"""`inglenook say TEXT -o FILE`: text to speech with a Piper voice, on this machine.

TEXT is read as a reply would be (speech/sentences.py: code blocks and reasoning are not read);
`-` reads it from standard input. The format follows the file's suffix (wav, flac, mp3, opus,
pcm) unless --format says otherwise; `-o -` writes to standard output.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from inglenook.cli.common import INTERRUPTED_EXIT, fail

SUFFIXES = {".wav": "wav", ".flac": "flac", ".mp3": "mp3", ".opus": "opus", ".ogg": "opus",
            ".pcm": "pcm", ".raw": "pcm"}


def add_parser(commands: argparse._SubParsersAction) -> None:
    from inglenook.speech.audio import FORMATS

    p = commands.add_parser("say", help="speak text into an audio file")
    p.add_argument("text", help="what to say ('-': read it from standard input)")
    p.add_argument("-o", "--output", required=True,
                   help="the audio file to write ('-': standard output)")
    p.add_argument("--voice", default=None,
                   help="a Piper voice (.onnx with its .onnx.json beside it) or an installed "
                        "voice's name (default: the first installed)")
    p.add_argument("--speed", type=float, default=1.0, help="0.25 to 4 (default 1)")
    p.add_argument("--format", choices=FORMATS, default=None,
                   help="audio format (default: from the file's suffix, else wav)")


def run(args: argparse.Namespace) -> int:
    from inglenook.speech.audio import AudioError, Encoder
    from inglenook.speech.catalog import LoadedModels
    from inglenook.speech.sentences import speakable
    from inglenook.speech.tts import MAX_SPEED, MIN_SPEED, VoiceError

    text = sys.stdin.read() if args.text == "-" else args.text
    sentences = speakable(text)
    if not sentences:
        return fail("there is nothing to say in that text.")
    if not MIN_SPEED <= args.speed <= MAX_SPEED:
        return fail(f"--speed must be between {MIN_SPEED} and {MAX_SPEED}.")
    fmt = args.format or SUFFIXES.get(Path(args.output).suffix.lower(), "wav")
    try:
        voice = LoadedModels().voice(args.voice)
        encoder = Encoder(fmt, voice.sample_rate)
    except (VoiceError, AudioError) as exc:
        return fail(str(exc))
    try:
        with _output(args.output) as out:
            for pcm in voice.speak(sentences, args.speed):
                out.write(encoder.feed(pcm))
            out.write(encoder.finish())
    except OSError as exc:
        return fail(f"cannot write {args.output}: {exc.strerror or exc}")
    except KeyboardInterrupt:
        return INTERRUPTED_EXIT
    return 0


@contextlib.contextmanager
def _output(name: str) -> Iterator[BinaryIO]:
    """Standard output, or a file written beside and renamed when complete: an interrupted
    run leaves no half file under the name asked for."""
    if name == "-":
        yield sys.stdout.buffer
        sys.stdout.buffer.flush()
        return
    target = Path(name)
    fd, partial = tempfile.mkstemp(dir=target.parent if str(target.parent) else ".",
                                   prefix=f".{target.name}.", suffix=".partial")
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
        os.chmod(partial, 0o644)
        os.replace(partial, target)
    finally:
        Path(partial).unlink(missing_ok=True)
