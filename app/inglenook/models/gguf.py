"""A bounded, defensive reader for GGUF headers.

Malformed GGUF files have caused heap overflows in llama.cpp (CVE-2025-49847, CVE-2026-27940), so
every file is read here before the engine sees it, and refused with a message the user can act on.
Every length is checked against the bytes that are left before it is used, big arrays are skipped
rather than loaded, and the whole read is bounded in entries, bytes and time.
"""

from __future__ import annotations

import math
import os
import stat
import struct
import time
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFValueType, LlamaFileType

MAGIC = b"GGUF"
SUPPORTED_VERSIONS = (2, 3)
HEADER_SIZE = 24  # magic, u32 version, u64 tensor count, u64 metadata count
MAX_TENSORS = 1_000_000
MAX_KVS = 100_000
MAX_KEY_BYTES = 65_535
MAX_STRING_BYTES = 16 * 2**20  # chat templates are kilobytes; nothing legitimate comes near this
MAX_DIMS = 4  # GGML_MAX_DIMS
MAX_TENSOR_NAME = 63  # GGML_MAX_NAME is 64 including the C string's trailing NUL
DEFAULT_ALIGNMENT = 32
INT64_MAX = 2**63 - 1
# The smallest possible encodings, used to refuse counts the file cannot possibly hold.
MIN_KV_BYTES = 8 + 4 + 1  # key length, value type, a one-byte value
MIN_TENSOR_BYTES = 8 + 4 + 8 + 4 + 8  # name length, n_dims, one dim, type, offset
_BUFFER = 1 << 20  # large enough that skipping a tokenizer's strings mostly seeks inside the buffer
_TIME_CHECK_EVERY = 1024

_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_SCALARS: dict[int, struct.Struct] = {
    GGUFValueType.UINT8: struct.Struct("<B"),
    GGUFValueType.INT8: struct.Struct("<b"),
    GGUFValueType.UINT16: struct.Struct("<H"),
    GGUFValueType.INT16: struct.Struct("<h"),
    GGUFValueType.UINT32: _U32,
    GGUFValueType.INT32: struct.Struct("<i"),
    GGUFValueType.FLOAT32: struct.Struct("<f"),
    GGUFValueType.BOOL: struct.Struct("<B"),
    GGUFValueType.UINT64: _U64,
    GGUFValueType.INT64: struct.Struct("<q"),
    GGUFValueType.FLOAT64: struct.Struct("<d"),
}


class GGUFError(ValueError):
    """Message is user-facing, one sentence or two, says what is wrong with the file."""


def _corrupt(detail: str) -> GGUFError:
    return GGUFError(f"This GGUF file is corrupt: {detail}")


@dataclass(frozen=True)
class ArrayInfo:
    """An array value that was bounds-checked and skipped rather than loaded; a short array of
    numbers (a per-layer count, such as a hybrid model's KV heads) keeps its values."""

    type: str  # element type, e.g. "string", "int32"
    length: int
    values: tuple[int | float, ...] = ()


@dataclass(frozen=True)
class TensorInfo:
    name: str
    shape: tuple[int, ...]  # GGUF order: the first dimension is the contiguous one
    type: str  # e.g. "Q4_1", "F32"
    offset: int  # relative to GGUFHeader.data_offset
    nbytes: int

    @property
    def n_elements(self) -> int:
        return math.prod(self.shape)


@dataclass(frozen=True)
class GGUFHeader:
    path: str
    version: int
    tensor_count: int
    kv_count: int
    alignment: int
    data_offset: int
    file_size: int
    metadata: dict[str, object]  # scalars and strings; arrays as ArrayInfo
    tensors: tuple[TensorInfo, ...] = ()

    def _int(self, key: str) -> int:
        value = self.metadata.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

    def _str(self, key: str) -> str | None:
        value = self.metadata.get(key)
        return value if isinstance(value, str) else None

    @property
    def architecture(self) -> str:
        return self._str("general.architecture") or ""

    @property
    def name(self) -> str:
        return (self._str("general.name") or "").strip() or Path(self.path).stem

    @property
    def context_length(self) -> int:
        return self._int(f"{self.architecture}.context_length")

    @property
    def block_count(self) -> int:
        return self._int(f"{self.architecture}.block_count")

    @property
    def chat_template(self) -> str | None:
        return self._str("tokenizer.chat_template")

    @property
    def tokenizer_model(self) -> str:
        """tokenizer.ggml.model: "llama" (SentencePiece), "gpt2" (BPE)..."""
        return self._str("tokenizer.ggml.model") or ""

    @property
    def quantization(self) -> str:
        """Human name of general.file_type, e.g. "Q4_K_M"; "" when absent or unknown."""
        if "general.file_type" not in self.metadata:
            return ""
        try:
            file_type = LlamaFileType(self._int("general.file_type"))
        except ValueError:
            return ""
        if file_type is LlamaFileType.GUESSED:
            return ""
        return file_type.name.removeprefix("MOSTLY_").removeprefix("ALL_")

    @property
    def parameter_count(self) -> int:
        return sum(t.n_elements for t in self.tensors)

    @property
    def tensor_bytes(self) -> int:
        return sum(t.nbytes for t in self.tensors)


def read_header(path: str | os.PathLike[str], *, max_seconds: float = 2.0,
                check_tensor_data: bool = True) -> GGUFHeader:
    """Read and validate a GGUF file's header; raise GGUFError if it is not safe to load.

    check_tensor_data=False skips only the check that the tensor data ends inside the file, so
    that the first megabytes of a model (fetched with an HTTP Range request) parse as a header;
    such a file is not loadable, and `file_size` is then the prefix's size."""
    name = os.fspath(path)
    try:
        st = os.stat(name)
    except FileNotFoundError:
        raise GGUFError(f"The file {name} does not exist.") from None
    except OSError as e:
        raise GGUFError(f"Cannot read {name}: {e.strerror or e}.") from None
    # Refuse before open(): opening a FIFO or a device could block or never end.
    if stat.S_ISDIR(st.st_mode):
        raise GGUFError(f"{name} is a folder, not a GGUF file.")
    if not stat.S_ISREG(st.st_mode):
        raise GGUFError(f"{name} is not a regular file.")
    try:
        with open(name, "rb", buffering=_BUFFER) as f:
            size = os.fstat(f.fileno()).st_size  # the file we opened, not the one we stat'ed
            return _parse(f, name, size, max_seconds, check_tensor_data)
    except OSError as e:
        raise GGUFError(f"Cannot read {name}: {e.strerror or e}.") from None


class _Reader:
    """Little-endian reads that never go past the end of the file as it was when opened."""

    def __init__(self, f: BinaryIO, size: int, max_seconds: float) -> None:
        self.f, self.size, self.pos = f, size, 0
        self.max_seconds = max_seconds
        self.deadline = time.monotonic() + max_seconds
        self.ticks = 0

    def need(self, n: int, what: str) -> None:
        left = self.size - self.pos
        if n > left:
            raise GGUFError(
                f"This GGUF file is truncated or corrupt: {what} would need {n} bytes at offset "
                f"{self.pos}, but only {left} remain."
            )

    def read(self, n: int, what: str) -> bytes:
        self.need(n, what)
        data = self.f.read(n)
        if len(data) != n:
            raise GGUFError("The file changed size while it was being read.")
        self.pos += n
        return data

    def skip(self, n: int, what: str) -> None:
        self.need(n, what)
        self.f.seek(n, os.SEEK_CUR)
        self.pos += n

    def unpack(self, fmt: struct.Struct, what: str) -> int | float:
        return fmt.unpack(self.read(fmt.size, what))[0]

    def u32(self, what: str) -> int:
        return int(self.unpack(_U32, what))

    def u64(self, what: str) -> int:
        return int(self.unpack(_U64, what))

    def string(self, what: str, limit: int) -> bytes:
        n = self.u64(f"the length of {what}")
        if n > limit:
            raise _corrupt(f"{what} is {n:,} bytes long (at most {limit:,}).")
        return self.read(n, what)

    def tick(self) -> None:
        self.ticks += 1
        if self.ticks % _TIME_CHECK_EVERY == 0:
            self.check_time()

    def check_time(self) -> None:
        if time.monotonic() > self.deadline:
            raise GGUFError(
                f"Reading this GGUF file's header took too long (over {self.max_seconds:g} s); "
                "the file may be corrupt or on a very slow disk."
            )


def _read_value(r: _Reader, vtype: int, what: str) -> object:
    fmt = _SCALARS.get(vtype)
    if fmt is not None:
        value = r.unpack(fmt, what)
        return bool(value) if vtype == GGUFValueType.BOOL else value
    if vtype == GGUFValueType.STRING:
        return r.string(what, MAX_STRING_BYTES).decode("utf-8", errors="replace")
    if vtype == GGUFValueType.ARRAY:
        return _skip_array(r, what)
    raise _corrupt(f"{what} has an unknown value type ({vtype}).")


_BLOCK = 1 << 20
MAX_KEPT_NUMBERS = 4096  # an array of numbers this short is read: one entry per layer or so


def _skip_strings(r: _Reader, n: int, what: str) -> None:
    """Past `n` length-prefixed strings, a block of the file at a time: a 262k vocabulary
    read one string at a time took about a second of CPU, with the GIL held."""
    done = 0
    while done < n:
        r.check_time()
        block = r.f.read(min(_BLOCK, r.size - r.pos))
        used = 0
        while done < n and used + 8 <= len(block):
            end = used + 8 + _U64.unpack_from(block, used)[0]
            if end > len(block):
                break
            used, done = end, done + 1
        r.f.seek(used - len(block), os.SEEK_CUR)
        r.pos += used
        if not used:  # a string longer than a block (or the file ends): one at a time
            r.skip(r.u64(f"a string length in {what}"), f"a string in {what}")
            done += 1


def _skip_array(r: _Reader, what: str) -> ArrayInfo:
    etype = r.u32(f"the element type of {what}")
    n = r.u64(f"the length of {what}")
    fmt = _SCALARS.get(etype)
    if fmt is not None and n <= MAX_KEPT_NUMBERS:
        data = r.read(n * fmt.size, f"the {n:,} elements of {what}")
        values = tuple(value for (value,) in fmt.iter_unpack(data))
        return ArrayInfo(GGUFValueType(etype).name.lower(), n, values)
    if fmt is not None:
        r.skip(n * fmt.size, f"the {n:,} elements of {what}")
    elif etype == GGUFValueType.STRING:
        r.need(n * 8, f"the {n:,} strings of {what}")  # each needs at least its 8-byte length
        _skip_strings(r, n, what)
    elif etype == GGUFValueType.ARRAY:  # so no recursion: llama.cpp refuses nested arrays too
        raise _corrupt(f"{what} is an array of arrays, which llama.cpp cannot load.")
    else:
        raise _corrupt(f"{what} has an unknown element type ({etype}).")
    return ArrayInfo(GGUFValueType(etype).name.lower(), n)


def _check_preamble(r: _Reader) -> tuple[int, int, int]:
    if r.size == 0:
        raise GGUFError("This file is empty, not a GGUF model.")
    if r.size < 4 or r.read(4, "the magic") != MAGIC:
        raise GGUFError("Not a GGUF file (the first bytes are not 'GGUF').")
    if r.size < HEADER_SIZE:
        raise GGUFError(f"This GGUF file is truncated: it is only {r.size} bytes long.")
    raw = r.read(4, "the version")
    version = int.from_bytes(raw, "little")
    if version not in SUPPORTED_VERSIONS:
        if int.from_bytes(raw, "big") in (1, 2, 3):
            raise GGUFError("This is a big-endian GGUF file, which is not supported here.")
        if version == 1:
            raise GGUFError(
                "This is a GGUF version 1 file, an obsolete format llama.cpp no longer "
                "loads; download a newer conversion of the model."
            )
        raise GGUFError(f"GGUF version {version} is not supported (only versions 2 and 3 are).")
    tensor_count = r.u64("the tensor count")
    kv_count = r.u64("the metadata count")
    if tensor_count > MAX_TENSORS:
        raise _corrupt(f"it claims {tensor_count:,} tensors (at most {MAX_TENSORS:,}).")
    if kv_count > MAX_KVS:
        raise _corrupt(f"it claims {kv_count:,} metadata entries (at most {MAX_KVS:,}).")
    r.need(
        tensor_count * MIN_TENSOR_BYTES + kv_count * MIN_KV_BYTES,
        f"{tensor_count:,} tensor descriptions and {kv_count:,} metadata entries",
    )
    return version, tensor_count, kv_count


def _read_metadata(r: _Reader, kv_count: int) -> dict[str, object]:
    metadata: dict[str, object] = {}
    for i in range(kv_count):
        r.tick()
        try:
            key = r.string(f"metadata key #{i}", MAX_KEY_BYTES).decode("utf-8")
        except UnicodeDecodeError:
            raise _corrupt(f"metadata key #{i} is not valid UTF-8.") from None
        if key in metadata:
            raise _corrupt(f"the metadata key {key!r} appears twice.")
        vtype = r.u32(f"the type of metadata {key!r}")
        # llama.cpp aborts (GGML_ASSERT) if the alignment is stored as anything but a u32.
        if key == "general.alignment" and vtype != GGUFValueType.UINT32:
            raise _corrupt("general.alignment is not a 32-bit unsigned integer.")
        metadata[key] = _read_value(r, vtype, f"metadata {key!r}")
    return metadata


def _read_tensor(r: _Reader, i: int, seen: set[bytes]) -> TensorInfo:
    raw = r.string(f"the name of tensor #{i}", MAX_TENSOR_NAME)
    name = raw.decode("utf-8", errors="replace")
    if raw in seen:
        raise _corrupt(f"the tensor {name!r} appears twice.")
    seen.add(raw)
    n_dims = r.u32(f"the number of dimensions of tensor {name!r}")
    if not 1 <= n_dims <= MAX_DIMS:
        raise _corrupt(f"tensor {name!r} has {n_dims} dimensions (1 to {MAX_DIMS} are allowed).")
    shape = struct.unpack(f"<{n_dims}Q", r.read(8 * n_dims, f"the shape of tensor {name!r}"))
    if min(shape) < 1 or math.prod(shape) > INT64_MAX:
        raise _corrupt(f"tensor {name!r} has an impossible shape {shape}.")
    type_id = r.u32(f"the type of tensor {name!r}")
    try:
        qtype = GGMLQuantizationType(type_id)
        block, type_size = GGML_QUANT_SIZES[qtype]
    except (ValueError, KeyError):
        raise GGUFError(
            f"Tensor {name!r} has an unknown type (id {type_id}); the file is corrupt "
            "or needs a newer version of Inglenook."
        ) from None
    if shape[0] % block:
        raise _corrupt(
            f"tensor {name!r} has a first dimension of {shape[0]}, "
            f"not a multiple of the {qtype.name} block size ({block})."
        )
    offset = r.u64(f"the offset of tensor {name!r}")
    return TensorInfo(name, shape, qtype.name, offset, math.prod(shape) // block * type_size)


def _parse(f: BinaryIO, path: str, size: int, max_seconds: float,
           check_tensor_data: bool = True) -> GGUFHeader:
    r = _Reader(f, size, max_seconds)
    version, tensor_count, kv_count = _check_preamble(r)
    metadata = _read_metadata(r, kv_count)
    alignment = metadata.get("general.alignment", DEFAULT_ALIGNMENT)
    assert isinstance(alignment, int)  # _read_metadata only lets a u32 through
    if alignment <= 0 or alignment & (alignment - 1):
        raise _corrupt(f"its alignment ({alignment}) is not a power of two.")
    seen: set[bytes] = set()
    tensors = []
    for i in range(tensor_count):
        r.tick()
        tensors.append(_read_tensor(r, i, seen))
    r.check_time()
    data_offset = -(-r.pos // alignment) * alignment  # the tensor data starts at the next boundary
    expected = 0
    for t in tensors:
        if t.offset % alignment:
            raise _corrupt(
                f"tensor {t.name!r} starts at offset {t.offset}, "
                f"not a multiple of the file's alignment ({alignment})."
            )
        # llama.cpp requires the tensors to be packed in order, each padded to the alignment.
        if t.offset != expected:
            raise _corrupt(f"tensor {t.name!r} starts at offset {t.offset}, expected {expected}.")
        expected += -(-t.nbytes // alignment) * alignment
    data_end = data_offset + (tensors[-1].offset + tensors[-1].nbytes if tensors else 0)
    if check_tensor_data and tensors and data_end > size:
        raise GGUFError(
            f"This GGUF file is truncated: tensor data ends at {data_end:,} bytes "
            f"but the file has {size:,}."
        )
    counts = (version, tensor_count, kv_count)
    return GGUFHeader(path, *counts, alignment, data_offset, size, metadata, tuple(tensors))
