"""What `inglenook models quantize` checks before it starts: names, the size estimate."""

from __future__ import annotations

from pathlib import Path

import pytest

from inglenook import paths
from inglenook.engine.quantize import TYPES, QuantizeError, estimate_bytes, plan
from inglenook.models.gguf import read_header
from tests.gguf_tools import rewrite_metadata


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


def test_the_estimate_errs_large_and_orders_the_types(bundled_model: Path) -> None:
    header = read_header(bundled_model)
    sizes = {kind: estimate_bytes([header], kind) for kind in TYPES}
    assert sizes["F16"] > sizes["Q8_0"] > sizes["Q4_0"]
    # This model's rows (576) are no multiple of 256: k-quants fall back, up to Q8_0.
    assert sizes["Q4_0"] < sizes["Q2_K"] <= sizes["Q4_K_M"] <= sizes["Q8_0"]
    # 135M parameters at 16 bits is 271 MB; the estimate may only be above it.
    assert sizes["F16"] >= 2 * header.parameter_count
