"""OpenAI's audio endpoints, answered on this machine (speech/), under the same security
middleware and request log as every route:

  POST /v1/audio/transcriptions   multipart: file, model, language, prompt, temperature,
                                  response_format (json, text, srt, vtt, verbose_json),
                                  stream (server-sent transcript.text.delta events)
  POST /v1/audio/speech           JSON: model, input, voice, response_format (wav, mp3, opus,
                                  flac, pcm), speed; the audio streamed sentence by sentence

OpenAI's model and voice names (whisper-1, tts-1, gpt-4o-mini-tts, alloy, …) mean the installed
defaults (speech/catalog.py). The upload is held in memory, never spooled to disk, and is
bounded in size (OpenAI's 25 MB), length and transcription time.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncGenerator, Iterator
from typing import Any

from starlette.datastructures import FormData, Headers, UploadFile
from starlette.formparsers import MultiPartException, MultiPartParser
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from inglenook.server.errors import ApiError
from inglenook.server.fields import number, obj, only_known, parse_json, text
from inglenook.server.replying import Serving, read_body
from inglenook.speech import catalog, formats
from inglenook.speech.audio import MEDIA_TYPES, AudioError, Encoder, decode
from inglenook.speech.catalog import OPENAI_TTS, OPENAI_VOICES, LoadedModels
from inglenook.speech.sentences import speakable
from inglenook.speech.stt import (
    MAX_PROMPT_CHARS,
    SpeechModelError,
    Transcript,
    TranscriptionTimeout,
    check_language,
)
from inglenook.speech.tts import MAX_INPUT_CHARS, MAX_SPEED, MIN_SPEED, VoiceError

MAX_UPLOAD_BYTES = 25 * 1024 * 1024  # OpenAI's own limit on an audio file
MAX_AUDIO_S = 2 * 3600.0  # decoded audio held in memory: 16 kHz float32, ~460 MB at most
TRANSCRIBE_TIMEOUT_S = 600.0
TRANSCRIPTION_FIELDS = {"file", "model", "language", "prompt", "temperature",
                        "response_format", "stream", "timestamp_granularities[]",
                        "chunking_strategy", "include[]"}
SPEECH_FIELDS = {"model", "input", "voice", "response_format", "speed", "instructions",
                 "stream_format"}


class _InMemoryParser(MultiPartParser):
    """Starlette's parser spools a file part over 1 MB to a temporary file: the upload is
    already bounded, so it stays in memory."""

    spool_max_size = MAX_UPLOAD_BYTES + 1


async def _form(request: Request) -> FormData:
    ctype = request.headers.get("content-type", "")
    if not ctype.startswith("multipart/form-data"):
        raise ApiError(400, "Send the audio as multipart/form-data with a 'file' part.",
                       code="invalid_content_type")
    body = await read_body(request, MAX_UPLOAD_BYTES + 64 * 1024)

    async def stream() -> AsyncGenerator[bytes, None]:
        yield body

    try:
        return await _InMemoryParser(Headers(scope=request.scope), stream(), max_files=1,
                                     max_fields=32, max_part_size=64 * 1024).parse()
    except MultiPartException as exc:
        raise ApiError(400, f"The form could not be read: {exc.message}",
                       code="invalid_form") from None


def _field(form: FormData, name: str, limit: int = 256) -> str:
    value = form.get(name)
    if value is None:
        return ""
    if not isinstance(value, str) or len(value) > limit:
        raise ApiError(400, f"'{name}' must be text of at most {limit} characters.",
                       param=name)
    return value


def _temperature(form: FormData) -> float | None:
    raw = _field(form, "temperature")
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 1.0:
        raise ApiError(400, "'temperature' must be a number from 0 to 1.", param="temperature")
    return value


def routes(serving: Serving) -> list[Route]:
    models = catalog.loaded

    async def transcriptions(request: Request) -> Response:
        try:
            return await _transcribe(request, models)
        except ApiError as exc:
            serving.board.refused(exc.message)
            raise

    async def speech(request: Request) -> Response:
        try:
            return await _speech(request, serving, models)
        except ApiError as exc:
            serving.board.refused(exc.message)
            raise

    return [Route("/v1/audio/transcriptions", transcriptions, methods=["POST"]),
            Route("/v1/audio/speech", speech, methods=["POST"])]


async def _transcribe(request: Request, models: LoadedModels) -> Response:
    form = await _form(request)
    try:
        only_known(dict(form), TRANSCRIPTION_FIELDS)
        upload = form.get("file")
        if not isinstance(upload, UploadFile):
            raise ApiError(400, "The audio file is missing: send it as the 'file' part.",
                           param="file")
        fmt = _field(form, "response_format") or "json"
        if fmt not in formats.FORMATS:
            raise ApiError(400, f"'response_format' must be one of "
                           f"{', '.join(formats.FORMATS)}.", param="response_format")
        granularities = form.getlist("timestamp_granularities[]")
        if any(g not in ("segment",) for g in granularities):
            raise ApiError(400, "Only segment timestamps are given here, not word ones.",
                           param="timestamp_granularities")
        try:
            language = check_language(_field(form, "language"))
        except ValueError as exc:
            raise ApiError(400, str(exc), param="language") from None
        prompt = _field(form, "prompt", MAX_PROMPT_CHARS)
        temperature = _temperature(form)
        stream = _field(form, "stream").lower() == "true"
        model_name = _field(form, "model") or None
        data = await upload.read()
    finally:
        await form.close()
    try:
        audio = await asyncio.to_thread(decode, data, MAX_AUDIO_S)
    except AudioError as exc:
        raise ApiError(400, f"The file could not be read as audio: {exc}", param="file",
                       code="invalid_audio") from None
    del data
    try:
        model = await asyncio.to_thread(models.transcriber, model_name)
    except SpeechModelError as exc:
        raise ApiError(400, str(exc), param="model", code="model_not_found") from None
    deadline = time.monotonic() + TRANSCRIBE_TIMEOUT_S
    if stream:
        return StreamingResponse(_events(model.segments([audio.samples], language, prompt,
                                                        temperature, deadline)),
                                 media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache"})
    try:
        transcript: Transcript = await asyncio.to_thread(
            model.transcribe, audio.samples, language, prompt, temperature, deadline)
    except TranscriptionTimeout:
        raise ApiError(504, f"Transcribing took longer than {TRANSCRIBE_TIMEOUT_S:g} s; send "
                       "a shorter file.", code="timeout") from None
    out = formats.render(transcript, fmt)
    if fmt.endswith("json"):
        return Response(out, media_type=formats.MEDIA_TYPES[fmt])
    return PlainTextResponse(out, media_type=formats.MEDIA_TYPES[fmt])


def _events(segments: Iterator[Any]) -> Iterator[bytes]:
    """OpenAI's streamed transcription: a delta per segment, then the whole text. Run by
    Starlette on a worker thread, so each segment is decoded there."""
    said: list[str] = []
    try:
        for segment in segments:
            delta = segment.text if not said else " " + segment.text
            said.append(segment.text)
            yield _sse({"type": "transcript.text.delta", "delta": delta})
    except TranscriptionTimeout:
        pass  # what was heard so far is the text
    yield _sse({"type": "transcript.text.done", "text": " ".join(said).strip()})


def _sse(event: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(event, ensure_ascii=False)}\n\n".encode()


async def _speech(request: Request, serving: Serving, models: LoadedModels) -> Response:
    body = obj(parse_json(await read_body(request, serving.config.max_body_bytes)))
    only_known(body, SPEECH_FIELDS)
    model = text(body, "model", 256)
    if not model:
        raise ApiError(400, "'model' is required (tts-1 means the installed voice).",
                       param="model")
    said = text(body, "input", MAX_INPUT_CHARS)
    sentences = speakable(said)
    if not sentences:
        raise ApiError(400, "'input' holds nothing to say.", param="input")
    voice_name = text(body, "voice", 256)
    fmt = text(body, "response_format", 16) or "mp3"
    if fmt not in MEDIA_TYPES:
        raise ApiError(400, f"'response_format' must be one of {', '.join(MEDIA_TYPES)}.",
                       param="response_format")
    speed = number(body, "speed", MIN_SPEED, MAX_SPEED) or 1.0
    text(body, "instructions", 4096)  # a voice's manner cannot be steered here; accepted
    if (text(body, "stream_format", 16) or "audio") != "audio":
        raise ApiError(400, "Only stream_format 'audio' is offered here.",
                       param="stream_format")
    # The voice: a named one wins; OpenAI's names fall back to the model, then the default.
    name = voice_name if voice_name and voice_name not in OPENAI_VOICES else (
        model if model not in OPENAI_TTS else None)
    try:
        voice = await asyncio.to_thread(models.voice, name)
    except VoiceError as exc:
        raise ApiError(400, str(exc), param="voice" if voice_name else "model",
                       code="voice_not_found") from None
    try:
        encoder = Encoder(fmt, voice.sample_rate)
    except AudioError as exc:
        raise ApiError(400, str(exc), param="response_format") from None

    def audio() -> Iterator[bytes]:  # Starlette iterates it on a worker thread
        for pcm in voice.speak(sentences, float(speed)):
            if piece := encoder.feed(pcm):
                yield piece
        yield encoder.finish()

    return StreamingResponse(audio(), media_type=MEDIA_TYPES[fmt])
