"""What a smaller copy will be before it is made (models/quantize_plan.py): names, the type of
each tensor, the size, and whether it would be smaller at all."""

from __future__ import annotations

from pathlib import Path

import pytest
from gguf.constants import GGMLQuantizationType

from inglenook import paths
from inglenook.models.gguf import read_header
from inglenook.models.quantize_plan import TYPES, QuantizeError, estimate_bytes, plan, tensor_types
from tests.gguf_tools import rewrite_metadata, write_gguf


def test_the_copy_is_named_after_the_source_and_its_new_type(bundled_model: Path) -> None:
    job = plan(bundled_model, "q5_k_m", allow_requantize=True)
    assert job.output == paths.models_dir() / "SmolLM2-135M-Instruct-Q5_K_M.gguf"
    assert job.type == "Q5_K_M" and job.requantize and job.free_bytes > job.estimate_bytes


def test_a_float_source_is_not_requantized(bundled_model: Path, tmp_path: Path) -> None:
    f16 = rewrite_metadata(bundled_model, tmp_path / "model-f16.gguf", {"general.file_type": 1})
    job = plan(f16, "Q4_K_M")
    assert not job.requantize and job.output.name == "model-Q4_K_M.gguf"


def test_an_existing_copy_is_not_overwritten(bundled_model: Path) -> None:
    (paths.models_dir() / "SmolLM2-135M-Instruct-Q8_0.gguf").write_bytes(b"mine")
    with pytest.raises(QuantizeError, match="already exists"):
        plan(bundled_model, "Q8_0", allow_requantize=True)


def test_each_tensor_gets_the_type_llama_cpp_gives_it(bundled_model: Path) -> None:
    """SmolLM2-135M: 576-column rows (no multiple of 256), 1536 in ffn_down, 30 layers, tied
    embeddings. Q4_K_M: k-quants fall back where a row cannot take them (Q4_K to Q5_0, Q6_K to
    Q8_0), ffn_down keeps Q4_K except its more-bits layers, the tied embedding is the output."""
    header = read_header(bundled_model)
    types = tensor_types(header, "Q4_K_M")
    assert types["token_embd.weight"] == "Q8_0"  # output: Q6_K, which falls back to Q8_0
    assert types["blk.0.attn_norm.weight"] == "F32"  # 1-D: kept
    assert types["blk.5.ffn_gate.weight"] == types["blk.5.attn_q.weight"] == "Q5_0"
    more_bits = [i for i in range(30) if types[f"blk.{i}.ffn_down.weight"] == "Q6_K"]
    assert more_bits == [0, 1, 2, 5, 8, 11, 14, 17, 20, 23, 26, 27, 28, 29]
    assert {types[f"blk.{i}.ffn_down.weight"] for i in range(30) if i not in more_bits} == {
        "Q4_K"}
    assert [i for i in range(30) if types[f"blk.{i}.attn_v.weight"] == "Q8_0"] == more_bits


def test_a_model_whose_rows_take_k_quants(tmp_path: Path) -> None:
    """Rows of 256: the output tensor at Q6_K, the embedding at the mix's type, and the size
    the sum of each tensor's blocks."""
    tensors = [("token_embd.weight", (256, 512), GGMLQuantizationType.F16, None),
               ("output.weight", (256, 512), GGMLQuantizationType.F16, None),
               ("output_norm.weight", (256,), GGMLQuantizationType.F32, None)]
    for i in range(8):
        tensors += [(f"blk.{i}.attn_v.weight", (256, 256), GGMLQuantizationType.F16, None),
                    (f"blk.{i}.ffn_down.weight", (512, 256), GGMLQuantizationType.F16, None)]
    model = write_gguf(tmp_path / "tiny-F16.gguf", {
        "general.architecture": "llama", "general.file_type": 1, "llama.block_count": 8,
        "llama.attention.head_count": 4, "llama.attention.head_count_kv": 4}, tensors)
    header = read_header(model)
    types = tensor_types(header, "Q4_K_M")
    assert (types["output.weight"], types["token_embd.weight"]) == ("Q6_K", "Q4_K")
    assert [types[f"blk.{i}.ffn_down.weight"] for i in range(8)] == [
        "Q6_K", "Q4_K", "Q4_K", "Q6_K", "Q4_K", "Q4_K", "Q6_K", "Q6_K"]
    q6, q4 = 210 / 256, 144 / 256  # bytes per weight of a Q6_K and a Q4_K block
    weights = (256 * 512 * (q6 + q4) + 256 * 4  # output, embedding, norm (F32)
               + sum(256 * 256 * (q6 if types[f"blk.{i}.attn_v.weight"] == "Q6_K" else q4)
                     + 512 * 256 * (q6 if types[f"blk.{i}.ffn_down.weight"] == "Q6_K" else q4)
                     for i in range(8)))
    estimate = estimate_bytes([header], "Q4_K_M")
    assert 0 <= estimate - header.data_offset - weights <= 64 * 1024 + 32 * len(tensors)
    assert plan(model, "Q4_K_M").smaller


def test_a_copy_that_would_not_be_smaller_is_known_before_it_starts(
        bundled_model: Path) -> None:
    q4_k_m = plan(bundled_model, "Q4_K_M", allow_requantize=True)
    assert not q4_k_m.smaller and q4_k_m.estimate_bytes > q4_k_m.source_bytes
    assert "would not be smaller" in q4_k_m.not_smaller() and "98 MB" in q4_k_m.not_smaller()
    q4_0 = plan(bundled_model, "Q4_0", allow_requantize=True)
    assert q4_0.smaller and not q4_0.not_smaller()
    header = read_header(bundled_model)
    sizes = {kind: estimate_bytes([header], kind) for kind in TYPES}
    assert sizes["F16"] > sizes["Q8_0"] > sizes["Q4_K_M"] > sizes["Q4_0"]
