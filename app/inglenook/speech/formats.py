"""A transcript written out as OpenAI's `response_format`s: json, text, srt, vtt, verbose_json
(the same for the API and `inglenook transcribe`)."""

from __future__ import annotations

import json
from typing import Any

from inglenook.speech.stt import Transcript

FORMATS = ("json", "text", "srt", "vtt", "verbose_json")
MEDIA_TYPES = {"json": "application/json", "verbose_json": "application/json",
               "text": "text/plain; charset=utf-8", "srt": "application/x-subrip",
               "vtt": "text/vtt; charset=utf-8"}


def _stamp(seconds: float, comma: bool) -> str:
    ms = max(0, round(seconds * 1000))
    h, rest = divmod(ms, 3_600_000)
    m, rest = divmod(rest, 60_000)
    s, ms = divmod(rest, 1000)
    return f"{h:02d}:{m:02d}:{s:02d}{',' if comma else '.'}{ms:03d}"


def as_dict(t: Transcript, verbose: bool) -> dict[str, Any]:
    if not verbose:
        return {"text": t.text}
    return {"task": "transcribe", "language": t.language, "duration": t.duration,
            "text": t.text,
            "segments": [{"id": s.id, "seek": 0, "start": s.start, "end": s.end,
                          "text": s.text, "tokens": list(s.tokens),
                          "temperature": s.temperature, "avg_logprob": s.avg_logprob,
                          "compression_ratio": s.compression_ratio,
                          "no_speech_prob": s.no_speech_prob} for s in t.segments]}


def render(t: Transcript, fmt: str) -> str:
    if fmt == "text":
        return t.text + "\n"
    if fmt in ("json", "verbose_json"):
        return json.dumps(as_dict(t, fmt == "verbose_json"), ensure_ascii=False)
    if fmt == "srt":
        return "".join(f"{i}\n{_stamp(s.start, True)} --> {_stamp(s.end, True)}\n{s.text}\n\n"
                       for i, s in enumerate(t.segments, 1))
    if fmt == "vtt":
        return "WEBVTT\n\n" + "".join(
            f"{_stamp(s.start, False)} --> {_stamp(s.end, False)}\n{s.text}\n\n"
            for s in t.segments)
    raise ValueError(f"'{fmt}' is not one of {', '.join(FORMATS)}")
