"""Requests to the engine host and events back, framed over a pipe.

Each frame is a 4-byte big-endian length and a UTF-8 JSON object {"type": name, ...fields}.
JSON rather than pickle: the host parses untrusted model files, so the window never unpickles
anything the host sends.
"""

from __future__ import annotations

import dataclasses
import json
import struct
import types
import typing
from dataclasses import dataclass
from typing import IO, Any

from inglenook.core.load import LoadParams, LoadRefusal, ModelInfo
from inglenook.core.messages import WINDOW, GenerationRequest
from inglenook.core.replies import Finish, Stats, TokenLogprob

MAX_FRAME = 64 * 1024 * 1024
_HEADER = struct.Struct(">I")


class ProtocolError(Exception):
    pass


# Requests (client -> host)
@dataclass(frozen=True)
class Load:
    params: LoadParams


@dataclass(frozen=True)
class Unload:
    pass


@dataclass(frozen=True)
class Generate:
    request: GenerationRequest


@dataclass(frozen=True)
class Cancel:
    request_id: int


@dataclass(frozen=True)
class Inspect:
    """The prompt a Generate of this request would evaluate, answered with a PromptView; nothing
    is generated."""

    request: GenerationRequest


@dataclass(frozen=True)
class DropState:
    """Forget the KV-cache state kept for a conversation (it was deleted); no answer. With
    `everything`: every state kept, in memory and on disk, of every model ("Forget cached
    states")."""

    conversation: str
    principal: str = WINDOW
    everything: bool = False


@dataclass(frozen=True)
class StateUsage:
    """Answered with a StateReport."""


@dataclass(frozen=True)
class MemoryUsage:
    """Answered with a MemoryReport."""


@dataclass(frozen=True)
class Tune:
    """Measure decoding and prompt speed at a few thread counts and batch sizes with the loaded
    model, each trial about `seconds_per_trial` long; answered with a TuneResult. With `apply`,
    the fastest thread counts are used from now on (a batch size needs a reload). Cancel with
    its request_id. Conversation states are kept (saved first, as for another chat)."""

    request_id: int
    seconds_per_trial: float = 0.5
    apply: bool = True


@dataclass(frozen=True)
class Quantize:
    """Write `source` quantized to llama.cpp's file type `ftype` at `output` (engine/quantize.py
    drives this in a host of its own and checks the result); answered with QuantizeProgress
    events and one Quantized. llama.cpp cannot interrupt a quantization: the driver cancels by
    ending the process."""

    source: str
    output: str
    ftype: int
    threads: int = 0  # 0: all logical cores
    allow_requantize: bool = False


@dataclass(frozen=True)
class Embed:
    """Vectors for `texts` from the loaded model in embedding mode, answered with one Embedded.
    A text longer than the embedding context is cut to it (`truncate`) or fails the request."""

    request_id: int
    texts: tuple[str, ...]
    truncate: bool = True
    token_lists: tuple[tuple[int, ...], ...] = ()  # instead of texts: already tokenized


@dataclass(frozen=True)
class CountImages:
    """Positions images of these sizes (width, height, as core/images reads them) take with
    the loaded projector, answered with one ImagesCounted; nothing is encoded."""

    request_id: int
    sizes: tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class Shutdown:
    pass


# Events (host -> client)
@dataclass(frozen=True)
class Ready:
    pid: int
    gpu_offload_supported: bool
    physical_cores: int
    vram_free: int = 0  # bytes on the GPUs llama.cpp can offload to, when the host started
    vram_total: int = 0


@dataclass(frozen=True)
class LoadProgress:
    fraction: float


@dataclass(frozen=True)
class Loaded:
    info: ModelInfo


@dataclass(frozen=True)
class LoadFailed:
    message: str
    refusal: LoadRefusal | None = None  # a load not tried, with what would make it load


@dataclass(frozen=True)
class Unloaded:
    pass


@dataclass(frozen=True)
class Started:
    request_id: int


@dataclass(frozen=True)
class PromptProgress:
    request_id: int
    done: int
    total: int


@dataclass(frozen=True)
class Delta:
    request_id: int
    text: str


@dataclass(frozen=True)
class Logprobs:
    """The chosen tokens (and their alternatives) of the text the next Delta carries, for a
    request that asked for them (GenerationRequest.logprobs)."""

    request_id: int
    tokens: tuple[TokenLogprob, ...]


@dataclass(frozen=True)
class ReplyStats:
    request_id: int
    stats: Stats


@dataclass(frozen=True)
class Finished:
    request_id: int
    finish: Finish


@dataclass(frozen=True)
class PromptToken:
    id: int
    piece: str  # its text; a character split over tokens comes with the one completing it
    special: bool  # a control token: only the chat template's markup can produce one


@dataclass(frozen=True)
class PromptView:
    """The prompt exactly as the model would see it, after context fitting. `error` is set (and
    the rest empty) when there is none: no model, a template error, a message too long."""

    request_id: int
    prompt: str = ""  # the tokens read back as text, control tokens included
    tokens: tuple[PromptToken, ...] = ()
    n_ctx: int = 0
    dropped_messages: int = 0  # history left out to fit the context (see Stats)
    defused: bool = False  # the template reshapes message text: control strings in it defused
    error: str = ""
    dropped_start: int = 0  # index of the first message left out (see Stats)
    image_positions: int = 0  # of `tokens`, the images' (shown as one mark per image)


@dataclass(frozen=True)
class StateReport:
    """The KV-cache states the engine keeps for conversations (bytes, counts) and its budgets."""

    ram_bytes: int = 0
    disk_bytes: int = 0
    in_ram: int = 0
    on_disk: int = 0
    ram_budget: int = 0
    disk_budget: int = 0


@dataclass(frozen=True)
class MemoryReport:
    """What the engine process holds, in bytes: llama.cpp's buffers as it allocated them (the
    weights, mapped or copied; the KV cells of every slot and the part holding tokens now; the
    compute buffers), the conversations' saved states, and the process's resident memory
    measured by the system (what the status bar shows). All 0 with no model (rss aside)."""

    weights_bytes: int = 0
    kv_bytes: int = 0
    kv_used_bytes: int = 0
    compute_bytes: int = 0
    states_ram_bytes: int = 0
    states_disk_bytes: int = 0
    rss_bytes: int = 0


@dataclass(frozen=True)
class TuneTrial:
    kind: str  # "decode" (one token at a time) or "prompt" (batches of n_batch tokens)
    n_threads: int
    n_batch: int  # for "prompt"; 1 for "decode"
    tok_s: float


@dataclass(frozen=True)
class TuneResult:
    """The fastest settings measured (LoadParams.n_threads, n_threads_batch, n_batch) and every
    trial; `error` set (the rest empty) when none could be measured."""

    request_id: int
    n_threads: int = 0
    n_threads_batch: int = 0
    n_batch: int = 0
    decode_tok_s: float = 0.0
    prompt_tok_s: float = 0.0
    trials: tuple[TuneTrial, ...] = ()
    applied: bool = False  # the thread counts are in use now
    cancelled: bool = False
    error: str = ""
    # The settings in use when it began and their speeds, measured alongside (before/after).
    before_n_threads: int = 0
    before_n_threads_batch: int = 0
    before_n_batch: int = 0
    before_decode_tok_s: float = 0.0
    before_prompt_tok_s: float = 0.0


@dataclass(frozen=True)
class TuneProgress:
    """`done` of `total` trials measured (a tune on a busy machine takes a while)."""

    request_id: int
    done: int
    total: int


@dataclass(frozen=True)
class QuantizeProgress:
    """Tensors written so far, and the share of the source's tensor bytes they hold (tensors
    differ in size by 100x, so the share is what an ETA is computed from)."""

    done: int
    total: int
    fraction: float
    tensor: str = ""


@dataclass(frozen=True)
class Quantized:
    output: str
    seconds: float
    error: str = ""


@dataclass(frozen=True)
class Embedded:
    """One unit-length vector per text, as base64 of float32 rows (`dimensions` values each):
    JSON floats would be four times the size. `tokens` read per text; `truncated` the indexes
    of the texts that were cut. `pooling` is how token states became one vector; `note` says
    when it was not read from the model (a chat model used as embedder). `error` set (the rest
    empty) when there are none."""

    request_id: int
    data: str = ""
    dimensions: int = 0
    tokens: tuple[int, ...] = ()
    truncated: tuple[int, ...] = ()
    pooling: str = ""
    embedding_model: bool = False  # the model's header names a pooling: made for this
    note: str = ""
    error: str = ""
    refused: bool = False  # the error is the input's (too long, empty, a bad token)

    def vectors(self) -> Any:
        """The rows, a (texts, dimensions) float32 numpy array."""
        import base64

        import numpy as np

        data = np.frombuffer(base64.b64decode(self.data), dtype=np.float32)
        return data.reshape(-1, self.dimensions) if self.dimensions else data.reshape(0, 0)


@dataclass(frozen=True)
class ImagesCounted:
    """One count per size asked, and the projector that counted them (its file: the window
    keeps a count with the projector it holds for). `error` set (the rest empty) when there
    are none: no model, a model without a projector."""

    request_id: int
    tokens: tuple[int, ...] = ()
    projector: str = ""
    error: str = ""


_TYPES: dict[str, type] = {
    cls.__name__: cls
    for cls in (Load, Unload, Generate, Cancel, Inspect, DropState, StateUsage, MemoryUsage,
                Tune, Quantize, Embed, CountImages, Shutdown, Ready, LoadProgress, Loaded,
                LoadFailed, Unloaded, Started, PromptProgress, Delta, Logprobs, ReplyStats,
                Finished, PromptView, StateReport, MemoryReport, TuneResult, TuneProgress,
                QuantizeProgress, Quantized, Embedded, ImagesCounted)
}


def _build(cls: type, data: dict[str, Any]) -> Any:
    hints = typing.get_type_hints(cls)
    values = {}
    for f in dataclasses.fields(cls):
        if f.name in data:
            values[f.name] = _convert(hints[f.name], data[f.name])
    return cls(**values)


def _convert(hint: Any, value: Any) -> Any:
    if dataclasses.is_dataclass(hint) and isinstance(value, dict):
        return _build(hint, value)  # type: ignore[arg-type]
    if typing.get_origin(hint) in (typing.Union, types.UnionType) and isinstance(value, dict):
        inner = [h for h in typing.get_args(hint) if dataclasses.is_dataclass(h)]
        if len(inner) == 1:  # an optional value (ReasoningFormat | None)
            return _build(inner[0], value)  # type: ignore[arg-type]
    if typing.get_origin(hint) is tuple and isinstance(value, list):
        (item_hint, *_) = typing.get_args(hint)
        return tuple(_convert(item_hint, v) for v in value)
    return value


def encode(message: Any) -> bytes:
    payload = dataclasses.asdict(message)
    payload["type"] = type(message).__name__
    # A lone surrogate (a bad paste) cannot be UTF-8; it becomes "?" rather than an error.
    body = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode(
        "utf-8", errors="replace")
    return _HEADER.pack(len(body)) + body


def decode(body: bytes) -> Any:
    try:
        data = json.loads(body.decode("utf-8"))
        cls = _TYPES[data.pop("type")]
        return _build(cls, data)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ProtocolError(f"bad frame: {exc}") from exc


def write_frame(stream: IO[bytes], message: Any) -> None:
    stream.write(encode(message))
    stream.flush()


def read_frame(stream: IO[bytes]) -> Any | None:
    """The next message, or None at a clean end of stream."""
    header = _read_exactly(stream, _HEADER.size)
    if header is None:
        return None
    (length,) = _HEADER.unpack(header)
    if length > MAX_FRAME:
        raise ProtocolError(f"frame of {length} bytes is too large")
    body = _read_exactly(stream, length)
    if body is None:
        raise ProtocolError("stream ended inside a frame")
    return decode(body)


def _read_exactly(stream: IO[bytes], n: int) -> bytes | None:
    chunks = []
    remaining = n
    while remaining:
        chunk = stream.read(remaining)
        if not chunk:
            if remaining == n:
                return None
            raise ProtocolError("stream ended inside a frame")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)
