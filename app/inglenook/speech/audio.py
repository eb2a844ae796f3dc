"""Audio in and out, with bounds and without Qt: what speech to text reads and what text to speech
writes. Decoding goes through PyAV (FFmpeg's decoders, bundled with faster-whisper), in memory:
the audio is never written to disk.

    decode(data, max_seconds)            whole file → Audio (16 kHz mono float32), refused when
                                         longer than max_seconds
    windows(source, window_s, max_s)     the same, a window at a time (a 3-hour recording costs
                                         one window of memory)
    Encoder(fmt, rate)                   PCM in, a file's bytes out piece by piece (streaming)

Every bad file is an AudioError with one sentence for the user: empty, not audio, a header
that lies about its rate or channels, silence longer than allowed.
"""

from __future__ import annotations

import io
import struct
import wave
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

SAMPLE_RATE = 16_000  # what whisper reads
MAX_SOURCE_RATE = 384_000  # the highest rate real recorders write
MAX_CHANNELS = 32
OPENAI_PCM_RATE = 24_000  # OpenAI's `pcm` is raw 24 kHz 16-bit mono; clients assume it
FORMATS = ("wav", "pcm", "flac", "mp3", "opus")
MEDIA_TYPES = {"wav": "audio/wav", "pcm": "audio/pcm", "flac": "audio/flac",
               "mp3": "audio/mpeg", "opus": "audio/ogg"}
# The encoder, container and the sample rates each codec takes (Opus only these).
_CODECS = {"flac": ("flac", "flac", None), "mp3": ("libmp3lame", "mp3", None),
           "opus": ("libopus", "ogg", (48_000, 24_000, 16_000, 12_000, 8_000))}


class AudioError(ValueError):
    """A file that cannot be read as audio, or that breaks a bound; str() is one sentence."""


@dataclass(frozen=True)
class Audio:
    samples: np.ndarray  # float32, mono, SAMPLE_RATE

    @property
    def seconds(self) -> float:
        return len(self.samples) / SAMPLE_RATE


Source = bytes | Path


def check_wav_header(data: bytes) -> None:
    """A RIFF/WAVE header's own claims, checked before FFmpeg trusts them: a rate of 4 GHz or
    65,535 channels is a hostile file, not a recording."""
    if len(data) < 12 or data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        return
    pos = 12
    while pos + 8 <= len(data):
        tag, size = data[pos:pos + 4], struct.unpack("<I", data[pos + 4:pos + 8])[0]
        if tag == b"fmt ":
            if size < 16 or pos + 24 > len(data):
                raise AudioError("The WAV file's format header is cut short.")
            _fmt, channels, rate = struct.unpack("<HHI", data[pos + 8:pos + 16])
            bits = struct.unpack("<H", data[pos + 22:pos + 24])[0]
            _check_shape(rate, channels)
            if bits == 0 or bits > 64:
                raise AudioError(f"The WAV file claims {bits} bits per sample.")
            return
        pos += 8 + size + (size & 1)
    raise AudioError("The WAV file has no format header.")


def _check_shape(rate: int, channels: int) -> None:
    if not 1_000 <= rate <= MAX_SOURCE_RATE:
        raise AudioError(f"The file claims a sample rate of {rate:,} Hz; audio is between "
                         f"1,000 and {MAX_SOURCE_RATE:,}.")
    if not 1 <= channels <= MAX_CHANNELS:
        raise AudioError(f"The file claims {channels:,} channels; at most {MAX_CHANNELS}.")


def _open(source: Source) -> Any:  # an av InputContainer
    import av

    if isinstance(source, bytes):
        if not source:
            raise AudioError("The file is empty.")
        check_wav_header(source)
        target: io.BytesIO | str = io.BytesIO(source)
    else:
        try:
            size = source.stat().st_size
            with source.open("rb") as f:
                head = f.read(4096)
        except OSError as exc:
            raise AudioError(f"Cannot read {source.name}: {exc.strerror or exc}.") from None
        if size == 0:
            raise AudioError(f"{source.name} is empty.")
        check_wav_header(head)
        target = str(source)
    try:
        container = av.open(target, mode="r", metadata_errors="ignore")
    except (av.FFmpegError, UnicodeDecodeError, ValueError) as exc:
        raise AudioError("This is not an audio file that can be read "
                         f"({type(exc).__name__}).") from None
    if not container.streams.audio:
        container.close()
        raise AudioError("This is not an audio file (nothing in it is sound).")
    stream = container.streams.audio[0]
    try:
        _check_shape(stream.codec_context.sample_rate or 0, stream.codec_context.channels or 0)
    except AudioError:
        container.close()
        raise
    return container


def probe(source: Source) -> None:
    """AudioError unless the file opens as audio of a sane shape (cheap: nothing decoded)."""
    _open(source).close()


def windows(source: Source, window_s: float, max_seconds: float) -> Iterator[np.ndarray]:
    """The audio as 16 kHz mono float32, `window_s` seconds at a time (the last one shorter);
    AudioError when it runs past max_seconds, or when nothing in it decodes."""
    import av

    container = _open(source)
    resampler = av.AudioResampler(format="s16", layout="mono", rate=SAMPLE_RATE)
    window = int(window_s * SAMPLE_RATE)
    cap = int(max_seconds * SAMPLE_RATE)
    pending: list[np.ndarray] = []
    held = total = 0
    try:
        for frame in _frames(container):
            for out in resampler.resample(frame):
                chunk = out.to_ndarray().reshape(-1)
                total += len(chunk)
                if total > cap:
                    raise AudioError(f"The audio is longer than {_duration(max_seconds)}.")
                pending.append(chunk)
                held += len(chunk)
                while held >= window:
                    joined = np.concatenate(pending)
                    yield _float(joined[:window])
                    pending, held = [joined[window:]], len(joined) - window
        for out in resampler.resample(None):
            pending.append(out.to_ndarray().reshape(-1))
    finally:
        container.close()
    rest = np.concatenate(pending) if pending else np.zeros(0, np.int16)
    if total == 0 and len(rest) == 0:
        raise AudioError("The file holds no sound (zero length).")
    if len(rest):
        yield _float(rest)


def _frames(container: Any) -> Iterator[Any]:
    import av

    try:
        yield from container.decode(audio=0)
    except av.error.InvalidDataError:  # a corrupt tail: keep what decoded, as players do
        return
    except av.FFmpegError as exc:
        raise AudioError(f"The audio could not be decoded ({type(exc).__name__}).") from None


def _float(samples: np.ndarray) -> np.ndarray:
    return samples.astype(np.float32) / 32768.0


def decode(source: Source, max_seconds: float) -> Audio:
    """The whole file, at most max_seconds long."""
    parts = list(windows(source, 60.0, max_seconds))
    return Audio(np.concatenate(parts) if parts else np.zeros(0, np.float32))


def _duration(seconds: float) -> str:
    return f"{seconds / 60:g} minutes" if seconds >= 120 else f"{seconds:g} seconds"


def is_silent(samples: np.ndarray, threshold: float = 1e-3) -> bool:
    """Nothing above a whisper of noise: transcribing it only invites invented words."""
    return len(samples) == 0 or float(np.sqrt(np.mean(np.square(samples)))) < threshold


def wav_header(rate: int, frames: int | None = None) -> bytes:
    """A 16-bit mono WAV header; without `frames` the sizes say "unknown" (0xFFFFFFFF), as
    streamed WAV does, and players read to the end."""
    data = 0xFFFFFFFF - 36 if frames is None else frames * 2
    return (b"RIFF" + struct.pack("<I", min(0xFFFFFFFF, 36 + data)) + b"WAVEfmt "
            + struct.pack("<IHHIIHH", 16, 1, 1, rate, rate * 2, 2, 16)
            + b"data" + struct.pack("<I", data))


def wav_bytes(pcm: bytes, rate: int) -> bytes:
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(pcm)
    return buffer.getvalue()


def available_formats() -> tuple[str, ...]:
    """The formats this installation can write: wav and pcm always, the others when FFmpeg's
    encoder for them is there."""
    import av

    found = ["wav", "pcm"]
    for name, (codec, _container, _rates) in _CODECS.items():
        try:
            av.codec.Codec(codec, "w")
            found.append(name)
        except Exception:  # av.codec.codec.UnknownCodecError and kin: not built in
            continue
    return tuple(found)


class _Sink:
    """Where the muxer writes: not seekable, so it streams, and each piece is taken at once."""

    def __init__(self) -> None:
        self.pieces: list[bytes] = []

    def write(self, data: bytes) -> int:
        self.pieces.append(bytes(data))
        return len(data)

    def seekable(self) -> bool:
        return False

    def take(self) -> bytes:
        out, self.pieces = b"".join(self.pieces), []
        return out


class Encoder:
    """16-bit mono PCM at `rate` in, the bytes of a `fmt` file out as they are ready:

        enc = Encoder("mp3", 22050)
        for pcm in chunks: send(enc.feed(pcm))
        send(enc.finish())
    """

    def __init__(self, fmt: str, rate: int) -> None:
        if fmt not in FORMATS:
            raise AudioError(f"'{fmt}' is not one of {', '.join(FORMATS)}.")
        if fmt not in available_formats():
            raise AudioError(f"This installation cannot encode {fmt}; use wav or pcm.")
        self.fmt, self.rate = fmt, rate
        self._started = False
        # PyAV's objects, typed loosely: its stubs make every stream kind possible
        self._resampler: Any = None
        self._container: Any = None
        self._stream: Any = None
        self._sink = _Sink()
        if fmt == "pcm" and rate != OPENAI_PCM_RATE:
            self._resampler = self._new_resampler(OPENAI_PCM_RATE)
        elif fmt in _CODECS:
            import av

            codec, container_name, rates = _CODECS[fmt]
            out_rate = rate if rates is None or rate in rates else rates[0]
            self._container = av.open(self._sink, mode="w", format=container_name)
            self._stream = self._container.add_stream(codec, rate=out_rate)
            self._stream.layout = "mono"
            fmt_name = self._stream.codec_context.codec.audio_formats[0].name
            self._resampler = self._new_resampler(out_rate, fmt_name)

    @staticmethod
    def _new_resampler(rate: int, fmt: str = "s16") -> Any:
        import av

        return av.AudioResampler(format=fmt, layout="mono", rate=rate)

    def _frame(self, pcm: bytes) -> Any:
        import av

        samples = np.frombuffer(pcm, np.int16).reshape(1, -1)
        frame = av.AudioFrame.from_ndarray(samples, format="s16", layout="mono")
        frame.sample_rate = self.rate
        return frame

    def feed(self, pcm: bytes) -> bytes:
        if self.fmt == "wav":
            head = b"" if self._started else wav_header(self.rate)
            self._started = True
            return head + pcm
        if not pcm:
            return b""
        if self.fmt == "pcm":
            return pcm if self._resampler is None else b"".join(
                bytes(f.to_ndarray().astype(np.int16).tobytes())
                for f in self._resampler.resample(self._frame(pcm)))
        return self._encode(self._resampler.resample(self._frame(pcm)))

    def _encode(self, frames: Any) -> bytes:
        for frame in frames:
            for packet in self._stream.encode(frame):
                self._container.mux(packet)
        return self._sink.take()

    def finish(self) -> bytes:
        if self.fmt == "wav":
            return b"" if self._started else wav_header(self.rate)
        if self.fmt == "pcm":
            return b"" if self._resampler is None else b"".join(
                bytes(f.to_ndarray().astype(np.int16).tobytes())
                for f in self._resampler.resample(None))
        out = self._encode(self._resampler.resample(None))
        for packet in self._stream.encode(None):
            self._container.mux(packet)
        self._container.close()
        return out + self._sink.take()
