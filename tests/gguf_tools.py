"""GGUF files for tests: a minimal writer, byte-level pieces for hand-made malformed files, and
a rewriter that changes the metadata of a copy of a real model while keeping its tensors intact.

Byte pieces (`preamble`, `kv`, `tensor_info`, ...) let a test build exactly the broken file it
wants; `write_gguf` builds well-formed ones. Values are typed by `Typed`, or inferred:
bool → BOOL, int → UINT32 (INT32/INT64/UINT64 when it does not fit), float → FLOAT32,
str → STRING, list → ARRAY of the type inferred from its first element.
"""

from __future__ import annotations

import os
import shutil
import struct
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import BinaryIO, NamedTuple

from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFValueType

V = GGUFValueType
DEFAULT_ALIGNMENT = 32
SCALAR_FORMATS: dict[int, str] = {
    V.UINT8: "<B",
    V.INT8: "<b",
    V.UINT16: "<H",
    V.INT16: "<h",
    V.UINT32: "<I",
    V.INT32: "<i",
    V.FLOAT32: "<f",
    V.BOOL: "<?",
    V.UINT64: "<Q",
    V.INT64: "<q",
    V.FLOAT64: "<d",
}
_INT_TYPES = {V.UINT8, V.INT8, V.UINT16, V.INT16, V.UINT32, V.INT32, V.UINT64, V.INT64}

TensorSpec = tuple[str, Sequence[int], int, "bytes | None"]  # name, shape, ggml type, data


class Typed(NamedTuple):
    """A metadata value with an explicit GGUF type; for ARRAY, value is (element_type, items)."""

    type: int
    value: object


def u32(n: int) -> bytes:
    return struct.pack("<I", n)


def u64(n: int) -> bytes:
    return struct.pack("<Q", n)


def gguf_string(s: str | bytes) -> bytes:
    data = s.encode() if isinstance(s, str) else s
    return u64(len(data)) + data


def preamble(
    tensor_count: int, kv_count: int, *, version: int = 3, magic: bytes = b"GGUF"
) -> bytes:
    return magic + u32(version) + u64(tensor_count) + u64(kv_count)


def infer_type(value: object) -> int:
    if isinstance(value, Typed):
        return value.type
    if isinstance(value, bool):
        return V.BOOL
    if isinstance(value, int):
        if 0 <= value < 2**32:
            return V.UINT32
        if -(2**31) <= value < 0:
            return V.INT32
        return V.INT64 if value < 0 or value < 2**63 else V.UINT64
    if isinstance(value, float):
        return V.FLOAT32
    if isinstance(value, str):
        return V.STRING
    if isinstance(value, list | tuple):
        return V.ARRAY
    raise TypeError(f"no GGUF type for {value!r}")


def encode_value(vtype: int, value: object) -> bytes:
    """The payload of a value of type `vtype` (without the type id itself)."""
    if isinstance(value, Typed):
        value = value.value
    if vtype in SCALAR_FORMATS:
        return struct.pack(SCALAR_FORMATS[vtype], value)
    if vtype == V.STRING:
        assert isinstance(value, str | bytes)
        return gguf_string(value)
    if vtype == V.ARRAY:
        if isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], list):
            etype, items = value  # (element_type, items) from a Typed array
        else:
            items = list(value)  # type: ignore[call-overload]
            etype = infer_type(items[0]) if items else V.INT32
            if etype == V.UINT32 and any(isinstance(i, int) and i < 0 for i in items):
                etype = V.INT32
        return u32(etype) + u64(len(items)) + b"".join(encode_value(etype, i) for i in items)
    raise ValueError(f"unknown GGUF value type {vtype}")


def kv(key: str | bytes, value: object, vtype: int | None = None) -> bytes:
    """One metadata entry: key, type id, payload."""
    vtype = infer_type(value) if vtype is None else vtype
    return gguf_string(key) + u32(vtype) + encode_value(vtype, value)


def tensor_nbytes(shape: Sequence[int], ggml_type: int) -> int:
    block, type_size = GGML_QUANT_SIZES[GGMLQuantizationType(ggml_type)]
    n = 1
    for d in shape:
        n *= d
    return n // block * type_size


def tensor_info(name: str | bytes, shape: Sequence[int], ggml_type: int, offset: int) -> bytes:
    dims = b"".join(u64(d) for d in shape)
    return gguf_string(name) + u32(len(shape)) + dims + u32(ggml_type) + u64(offset)


def pad(n: int, alignment: int = DEFAULT_ALIGNMENT) -> int:
    return -(-n // alignment) * alignment


def write_gguf(
    path: str | os.PathLike[str],
    metadata: Mapping[str, object],
    tensors: Sequence[TensorSpec] | None = None,
    *,
    version: int = 3,
) -> Path:
    """Write a well-formed GGUF file. Tensor data of None means zeros of the right size."""
    alignment = metadata.get("general.alignment", DEFAULT_ALIGNMENT)
    alignment = alignment.value if isinstance(alignment, Typed) else alignment
    assert isinstance(alignment, int)
    infos, blobs, offset = [], [], 0
    for name, shape, ggml_type, data in tensors or ():
        blob = bytes(tensor_nbytes(shape, ggml_type)) if data is None else data
        infos.append(tensor_info(name, shape, ggml_type, offset))
        blobs.append(blob + bytes(pad(len(blob), alignment) - len(blob)))
        offset += len(blobs[-1])
    head = preamble(len(infos), len(metadata), version=version)
    head += b"".join(kv(k, v) for k, v in metadata.items()) + b"".join(infos)
    out = Path(path)
    out.write_bytes(head + bytes(pad(len(head), alignment) - len(head)) + b"".join(blobs))
    return out


# --- Rewriting a real file ---------------------------------------------------------------------


def _read_str(f: BinaryIO) -> bytes:
    (n,) = struct.unpack("<Q", f.read(8))
    return f.read(n)


def _skip_value(f: BinaryIO, vtype: int) -> None:
    if vtype in SCALAR_FORMATS:
        f.seek(struct.calcsize(SCALAR_FORMATS[vtype]), os.SEEK_CUR)
    elif vtype == V.STRING:
        _read_str(f)
    elif vtype == V.ARRAY:
        etype, n = struct.unpack("<IQ", f.read(12))
        if etype in SCALAR_FORMATS:
            f.seek(n * struct.calcsize(SCALAR_FORMATS[etype]), os.SEEK_CUR)
        else:
            for _ in range(n):
                _skip_value(f, etype)
    else:
        raise ValueError(f"unknown GGUF value type {vtype}")


class _Layout(NamedTuple):
    version: int
    tensor_count: int
    alignment: int
    entries: list[tuple[str, int, bytes]]  # key, value type, the entry's raw bytes
    tensor_infos: bytes
    data_offset: int


def _layout(path: str | os.PathLike[str]) -> _Layout:
    """Where everything is in a trusted (already validated) GGUF file."""
    with open(path, "rb") as f:
        magic, version, tensor_count, kv_count = struct.unpack("<4sIQQ", f.read(24))
        assert magic == b"GGUF", path
        entries, alignment = [], DEFAULT_ALIGNMENT
        for _ in range(kv_count):
            start = f.tell()
            key = _read_str(f).decode()
            (vtype,) = struct.unpack("<I", f.read(4))
            if key == "general.alignment":
                (alignment,) = struct.unpack("<I", f.read(4))
            else:
                _skip_value(f, vtype)
            end = f.tell()
            f.seek(start)
            entries.append((key, vtype, f.read(end - start)))
        infos_start = f.tell()
        for _ in range(tensor_count):
            _read_str(f)
            (n_dims,) = struct.unpack("<I", f.read(4))
            f.seek(8 * n_dims + 4 + 8, os.SEEK_CUR)
        infos_end = f.tell()
        f.seek(infos_start)
        infos = f.read(infos_end - infos_start)
    return _Layout(version, tensor_count, alignment, entries, infos, pad(infos_end, alignment))


def metadata_types(path: str | os.PathLike[str]) -> dict[str, int]:
    """The GGUF value type of every metadata key of a file, in file order."""
    return {key: vtype for key, vtype, _ in _layout(path).entries}


def _compatible(vtype: int, value: object) -> bool:
    if vtype == V.BOOL:
        return isinstance(value, bool)
    if vtype in _INT_TYPES:
        return isinstance(value, int) and not isinstance(value, bool)
    if vtype in (V.FLOAT32, V.FLOAT64):
        return isinstance(value, int | float) and not isinstance(value, bool)
    return vtype == V.STRING and isinstance(value, str)


def rewrite_metadata(
    src: str | os.PathLike[str], dst: str | os.PathLike[str], changes: Mapping[str, object | None]
) -> Path:
    """Copy a GGUF file, replacing, adding or (with None) removing metadata keys.

    A replaced key keeps its original type when the new value fits it (llama.cpp checks types,
    e.g. a context length must stay UINT32). Tensor infos and data are copied byte for byte;
    their offsets are relative to the data section, so only the padding before it is recomputed.
    """
    if "general.alignment" in changes:
        raise ValueError("changing general.alignment would move every tensor")
    layout = _layout(src)
    entries, seen = [], set()
    for key, vtype, raw in layout.entries:
        seen.add(key)
        if key not in changes:
            entries.append(raw)
        elif (value := changes[key]) is not None:
            keep = not isinstance(value, Typed) and _compatible(vtype, value)
            entries.append(kv(key, value, vtype if keep else None))
    entries += [kv(k, v) for k, v in changes.items() if k not in seen and v is not None]
    head = preamble(layout.tensor_count, len(entries), version=layout.version)
    head += b"".join(entries) + layout.tensor_infos
    alignment = layout.alignment
    out = Path(dst)
    with open(src, "rb") as fin, open(out, "wb") as fout:
        fout.write(head + bytes(pad(len(head), alignment) - len(head)))
        fin.seek(layout.data_offset)
        shutil.copyfileobj(fin, fout, 1 << 22)
    return out


def _string_array(raw: bytes, key: str) -> list[str]:
    """The items of a raw STRING-array entry (as _layout keeps it)."""
    pos = 8 + len(key.encode()) + 4  # key, value type
    etype, n = struct.unpack_from("<IQ", raw, pos)
    assert etype == V.STRING, key
    pos += 12
    items = []
    for _ in range(n):
        (length,) = struct.unpack_from("<Q", raw, pos)
        items.append(raw[pos + 8: pos + 8 + length].decode("utf-8"))
        pos += 8 + length
    return items


def _int32_array(raw: bytes, key: str) -> list[int]:
    pos = 8 + len(key.encode()) + 4
    etype, n = struct.unpack_from("<IQ", raw, pos)
    assert etype == V.INT32, key
    return list(struct.unpack_from(f"<{n}i", raw, pos + 12))


def read_tokens(path: str | os.PathLike[str]) -> tuple[list[str], list[int]]:
    """The vocabulary of a GGUF file: token texts and token types (1 normal, 3 control, 4
    user-defined...)."""
    raw = {key: entry for key, _, entry in _layout(path).entries}
    return (_string_array(raw["tokenizer.ggml.tokens"], "tokenizer.ggml.tokens"),
            _int32_array(raw["tokenizer.ggml.token_type"], "tokenizer.ggml.token_type"))


TOKEN_TYPE_CONTROL = 3
TOKEN_TYPE_USER_DEFINED = 4


def replace_tokens(
    src: str | os.PathLike[str], dst: str | os.PathLike[str],
    tokens: Mapping[int, tuple[str, int]], changes: Mapping[str, object | None] | None = None,
) -> Path:
    """Copy a GGUF file giving some token ids a new text and type ({id: (text, type)}), plus
    metadata `changes`. With a model's own special tokens as the ids, this gives a real model
    another family's control tokens (`<|eot_id|>`, `<start_of_turn>`, `[INST]`...) while its
    tensors stay valid: the embedding rows are the same, only what the text reads as changes."""
    texts, types = read_tokens(src)
    for token, (text, ttype) in tokens.items():
        assert text not in texts or texts.index(text) == token, f"{text!r} is already a token"
        texts[token], types[token] = text, ttype
    return rewrite_metadata(src, dst, {
        "tokenizer.ggml.tokens": Typed(V.ARRAY, (V.STRING, texts)),
        "tokenizer.ggml.token_type": Typed(V.ARRAY, (V.INT32, types)),
        **(changes or {}),
    })
