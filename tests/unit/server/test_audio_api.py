"""OpenAI's audio endpoints through the official openai SDK against a real server on loopback
(tests/helpers/api.py), with the bundled speech models (no engine is started: these routes do
not use one). OpenAI's model and voice names must work unchanged."""

from __future__ import annotations

import json
from collections.abc import Iterator

import openai
import pytest

from inglenook.engine.client import EngineClient
from inglenook.server import audio as audio_routes
from inglenook.speech.audio import decode, wav_bytes
from inglenook.speech.wer import word_error_rate
from tests.helpers.api import Served, request, serving
from tests.speech_models import link_into_speech_dir

SENTENCE = "The library opens early in the morning."
TOKEN = "speech-test-token"


@pytest.fixture
def served() -> Iterator[Served]:
    link_into_speech_dir()
    with serving(EngineClient(), token=TOKEN) as s:
        yield s


@pytest.fixture
def client(served: Served) -> openai.OpenAI:
    return openai.OpenAI(base_url=served.base_url, api_key=TOKEN, max_retries=0)


def test_speech_then_transcription_through_the_sdk(client: openai.OpenAI) -> None:
    spoken = client.audio.speech.create(model="tts-1", voice="alloy", input=SENTENCE,
                                        response_format="wav")
    wav = spoken.read()
    assert wav[:4] == b"RIFF" and decode(wav, 60).seconds > 1.5
    heard = client.audio.transcriptions.create(model="whisper-1", file=("said.wav", wav),
                                               language="en")
    assert word_error_rate(SENTENCE, heard.text) <= 0.1, heard.text
    verbose = client.audio.transcriptions.create(
        model="whisper-1", file=("said.wav", wav), response_format="verbose_json",
        timestamp_granularities=["segment"])
    assert verbose.language == "en" and verbose.segments
    assert verbose.segments[0].start == 0.0 and verbose.duration == pytest.approx(
        decode(wav, 60).seconds, abs=0.05)
    srt = client.audio.transcriptions.create(model="whisper-1", file=("said.wav", wav),
                                             response_format="srt", language="en")
    assert str(srt).startswith("1\n00:00:00,000 --> 00:00:0")


@pytest.mark.parametrize("fmt, magic", [("mp3", (b"ID3", b"\xff\xfb", b"\xff\xf3")),
                                        ("flac", (b"fLaC",)), ("opus", (b"OggS",))])
def test_speech_in_each_format_decodes(client: openai.OpenAI, fmt: str,
                                       magic: tuple[bytes, ...]) -> None:
    with client.audio.speech.with_streaming_response.create(
            model="gpt-4o-mini-tts", voice="echo", input="Hello there.",
            response_format=fmt, speed=1.25) as response:
        data = b"".join(response.iter_bytes())
    assert data.startswith(magic) and decode(data, 60).seconds > 0.3


def test_a_streamed_transcription_gives_deltas_then_the_text(client: openai.OpenAI,
                                                             voice) -> None:  # type: ignore[no-untyped-def]
    wav = voice.wav("Good morning. See you soon.")
    events = list(client.audio.transcriptions.create(
        model="whisper-1", file=("a.wav", wav), language="en", stream=True))
    assert [e.type for e in events][-1] == "transcript.text.done"
    deltas = "".join(e.delta for e in events if e.type == "transcript.text.delta")
    assert deltas.strip() == events[-1].text
    assert word_error_rate("Good morning. See you soon.", events[-1].text) <= 0.2


def test_a_file_that_is_not_audio_is_a_clear_400(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.audio.transcriptions.create(model="whisper-1",
                                           file=("notes.mp3", b"Just some text, honest."))
    assert "could not be read as audio" in caught.value.message
    assert caught.value.body["param"] == "file"  # type: ignore[index]
    with pytest.raises(openai.BadRequestError, match="zero length"):
        client.audio.transcriptions.create(model="whisper-1", file=("e.wav", wav_bytes(b"",
                                                                                     16000)))


@pytest.mark.parametrize("kwargs, message", [
    ({"response_format": "aiff"}, "'response_format' must be one of"),
    ({"voice": "robot"}, "no voice named 'robot'"),
    ({"speed": 9}, "'speed' must be a number from 0.25 to 4"),
    ({"input": "```\nonly code\n```"}, "nothing to say"),
])
def test_bad_speech_requests_are_refused(client: openai.OpenAI, kwargs: dict,
                                         message: str) -> None:
    args = {"model": "tts-1", "voice": "alloy", "input": "Hi.", **kwargs}
    with pytest.raises(openai.BadRequestError, match=message):
        client.audio.speech.create(**args)


def test_the_token_and_host_rules_hold(served: Served) -> None:
    body = json.dumps({"model": "tts-1", "input": "Hi.", "voice": "alloy"}).encode()
    assert request(served.port, "POST", "/v1/audio/speech", body).status == 401
    assert request(served.port, "POST", "/v1/audio/speech", body, {
        "Host": "evil.example", "Authorization": f"Bearer {TOKEN}"}).status == 403
    assert request(served.port, "POST", "/v1/audio/speech", body, {
        "Origin": "https://evil.example", "Authorization": f"Bearer {TOKEN}"}).status == 403


def test_an_upload_over_the_cap_is_refused_unread(served: Served,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(audio_routes, "MAX_UPLOAD_BYTES", 1024)
    response = request(served.port, "POST", "/v1/audio/transcriptions", b"x" * 200_000, {
        "Authorization": f"Bearer {TOKEN}",
        "Content-Type": "multipart/form-data; boundary=b"})
    assert response.status == 413


def test_a_json_body_is_told_to_use_a_form(served: Served) -> None:
    response = request(served.port, "POST", "/v1/audio/transcriptions", {"file": "x"},
                       {"Authorization": f"Bearer {TOKEN}"})
    assert response.status == 400 and "multipart/form-data" in response.json()["error"][
        "message"]
