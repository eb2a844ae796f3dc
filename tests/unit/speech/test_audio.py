"""Audio in with bounds (speech/audio.py): every hostile or broken file is one clear sentence,
and every format the API offers comes back out decodable."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

from inglenook.speech import audio
from inglenook.speech.audio import AudioError, Encoder, decode, wav_bytes, windows

RATE = 22_050


def tone(seconds: float, rate: int = RATE) -> bytes:
    t = np.arange(int(seconds * rate)) / rate
    return (np.sin(2 * np.pi * 440 * t) * 8000).astype(np.int16).tobytes()


def test_a_wav_decodes_to_16_khz_mono() -> None:
    decoded = decode(wav_bytes(tone(1.5), RATE), max_seconds=60)
    assert decoded.samples.dtype == np.float32
    assert decoded.seconds == pytest.approx(1.5, abs=0.01)


@pytest.mark.parametrize("data, message", [
    (b"", "empty"),
    (b"Dear diary, today I uploaded a text file as audio.", "not an audio file"),
    (b"\x89PNG\r\n\x1a\n" + b"\0" * 64, "not an audio file"),
], ids=["empty", "text", "png"])
def test_what_is_not_audio_is_refused_plainly(data: bytes, message: str) -> None:
    with pytest.raises(AudioError, match=message):
        decode(data, max_seconds=60)


def with_header(rate: int | None = None, channels: int | None = None) -> bytes:
    data = bytearray(wav_bytes(tone(0.1), RATE))
    if rate is not None:
        data[24:28] = struct.pack("<I", rate)
    if channels is not None:
        data[22:24] = struct.pack("<H", channels)
    return bytes(data)


@pytest.mark.parametrize("data, message", [
    (with_header(rate=4_000_000_000), "sample rate of 4,000,000,000 Hz"),
    (with_header(rate=3), "sample rate of 3 Hz"),
    (with_header(channels=60_000), "60,000 channels"),
    (wav_bytes(b"", RATE), "no sound"),
], ids=["huge-rate", "tiny-rate", "channels", "zero-length"])
def test_a_header_that_lies_is_refused(data: bytes, message: str) -> None:
    with pytest.raises(AudioError, match=message):
        decode(data, max_seconds=60)


def test_a_data_size_larger_than_the_file_reads_what_is_there() -> None:
    data = bytearray(wav_bytes(tone(0.5), RATE))
    data[40:44] = struct.pack("<I", 2_000_000_000)
    assert decode(bytes(data), max_seconds=60).seconds == pytest.approx(0.5, abs=0.01)


def test_audio_longer_than_the_cap_is_refused_before_it_is_all_decoded() -> None:
    with pytest.raises(AudioError, match="longer than 2 seconds"):
        decode(wav_bytes(tone(3), RATE), max_seconds=2)


def test_a_long_file_comes_a_window_at_a_time(tmp_path: Path) -> None:
    path = tmp_path / "long.wav"
    path.write_bytes(wav_bytes(tone(5), RATE))
    sizes = [len(w) for w in windows(path, window_s=2, max_seconds=60)]
    assert sizes == [32_000, 32_000, 16_000]


def test_an_empty_file_on_disk_is_named(tmp_path: Path) -> None:
    path = tmp_path / "nothing.mp3"
    path.write_bytes(b"")
    with pytest.raises(AudioError, match=r"nothing\.mp3 is empty"):
        decode(path, max_seconds=60)


@pytest.mark.parametrize("fmt", [f for f in audio.FORMATS if f != "pcm"])
def test_every_format_streams_out_and_decodes_back(fmt: str) -> None:
    if fmt not in audio.available_formats():
        pytest.skip(f"FFmpeg here has no {fmt} encoder")
    encoder = Encoder(fmt, RATE)
    pcm = tone(1.0)
    out = b"".join(encoder.feed(pcm[i:i + 4410]) for i in range(0, len(pcm), 4410))
    out += encoder.finish()
    assert decode(out, max_seconds=60).seconds == pytest.approx(1.0, abs=0.08)


def test_pcm_is_openais_24_khz() -> None:
    encoder = Encoder("pcm", RATE)
    out = encoder.feed(tone(1.0)) + encoder.finish()
    assert len(out) == pytest.approx(2 * 24_000, rel=0.01)


def test_an_unknown_format_is_refused() -> None:
    with pytest.raises(AudioError, match="'aiff' is not one of"):
        Encoder("aiff", RATE)


def test_silence_is_recognised() -> None:
    assert audio.is_silent(np.zeros(16_000, np.float32))
    assert not audio.is_silent(decode(wav_bytes(tone(0.5), RATE), 60).samples)
