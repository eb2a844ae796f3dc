"""models/projector.py: a projector told by its header, checked against a model's n_embd, and
found beside its model by the Hub's file names."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from inglenook.core.load import LoadParams
from inglenook.models import fit
from inglenook.models.filenames import UnsafeFileName, saved_name
from inglenook.models.fit import Memory, ModelShape
from inglenook.models.gguf import read_header
from inglenook.models.library import installed_models
from inglenook.models.projector import (
    COMPUTE_BYTES,
    check_pair,
    looks_like_projector,
    name_affinity,
    projector_beside,
    projector_info,
    with_projector,
)
from tests.gguf_tools import write_gguf
from tests.mmproj_tools import write_mmproj


def model(path: Path, n_embd: int = 576) -> Path:
    return write_gguf(path, {"general.architecture": "llama", "llama.embedding_length": n_embd,
                             "llama.block_count": 2})


def test_a_projector_is_told_by_its_header(tmp_path: Path) -> None:
    info = projector_info(read_header(write_mmproj(tmp_path / "mmproj-f16.gguf", 576)))
    assert info is not None
    assert (info.projector_type, info.n_embd, info.vision) == ("mlp", 576, True)
    assert info.memory_bytes == info.weights_bytes + COMPUTE_BYTES > COMPUTE_BYTES
    assert projector_info(read_header(model(tmp_path / "m.gguf"))) is None


def test_a_projector_for_another_embedding_size_is_refused_with_the_reason(
        tmp_path: Path) -> None:
    wrong = write_mmproj(tmp_path / "mmproj-big.gguf", 4096)
    reason = check_pair(str(model(tmp_path / "small.gguf")), str(wrong))
    assert reason == ("mmproj-big.gguf makes embeddings of 4,096 values, but small.gguf "
                      "reads 576: it belongs to another model.")
    assert check_pair(str(model(tmp_path / "big.gguf", 4096)), str(wrong)) is None


def test_a_model_placing_images_with_m_rope_is_paired_and_checked_as_any(
        tmp_path: Path) -> None:
    def qwen(n_embd: int) -> Path:
        return write_gguf(tmp_path / f"Qwen2.5-VL-{n_embd}-Q4_K_M.gguf", {
            "general.architecture": "qwen2vl", "qwen2vl.embedding_length": n_embd,
            "qwen2vl.block_count": 2, "qwen2vl.rope.dimension_sections": [16, 24, 24, 0]})

    mmproj = str(write_mmproj(tmp_path / "mmproj-f16.gguf", 576))
    assert check_pair(str(qwen(576)), mmproj) is None  # read with M-RoPE positions now
    assert "it belongs to another model" in (check_pair(str(qwen(2048)), mmproj) or "")


def test_a_model_given_as_the_projector_is_refused(tmp_path: Path) -> None:
    m = str(model(tmp_path / "m.gguf"))
    assert check_pair(m, m) == "m.gguf is not a vision projector (mmproj) file."
    other = write_gguf(tmp_path / "mmproj-fake.gguf", {"general.architecture": "clip"})
    assert "not a vision projector" in (check_pair(m, str(other)) or "")


def test_the_fitting_projector_beside_a_model_is_found_f16_first(tmp_path: Path) -> None:
    m = model(tmp_path / "SmolVLM-Q4_K_M.gguf")
    write_mmproj(tmp_path / "mmproj-SmolVLM-Q8_0.gguf", 576)
    write_mmproj(tmp_path / "mmproj-SmolVLM-f16.gguf", 576)
    write_mmproj(tmp_path / "mmproj-Other-f16.gguf", 2048)  # another model's, same folder
    found = projector_beside(str(m))
    assert found is not None and Path(found.path).name == "mmproj-SmolVLM-f16.gguf"


def test_no_projector_beside_a_text_model(tmp_path: Path) -> None:
    m = model(tmp_path / "plain.gguf")
    write_mmproj(tmp_path / "mmproj-other.gguf", 2048)
    assert projector_beside(str(m)) is None
    assert looks_like_projector("Qwen2.5-VL-7B-mmproj-F16.gguf")
    assert not looks_like_projector("Qwen2.5-VL-7B-Q4_K_M.gguf")


def test_the_fit_planner_counts_the_projector() -> None:
    shape = ModelShape(n_layers=30, n_embd=576, n_head=9, n_head_kv=3, n_ctx_train=8192,
                       weights_bytes=100 * 2**20, architecture="llama")
    memory = Memory(ram_free=8 * 2**30, ram_total=16 * 2**30)
    alone = fit.plan(shape, 2048, "f16", memory)
    seeing = fit.plan(dataclasses.replace(shape, projector_bytes=300 * 2**20), 2048, "f16",
                      memory)
    assert seeing.total_bytes == alone.total_bytes + 300 * 2**20
    assert "for the vision projector" in seeing.note


@pytest.mark.parametrize("name", ["mmproj-model-f16.gguf", "llava-v1.6-mmproj-f16.gguf"])
def test_hub_projector_names(name: str) -> None:
    assert looks_like_projector(name)


def test_loading_a_model_takes_the_projector_beside_it_unless_one_was_chosen(
        tmp_path: Path) -> None:
    m = str(model(tmp_path / "vlm.gguf"))
    beside = write_mmproj(tmp_path / "mmproj-vlm-f16.gguf", 576)
    assert with_projector(LoadParams(m)).mmproj_path == str(beside)
    chosen = LoadParams(m, mmproj_path="/elsewhere/mmproj.gguf")
    assert with_projector(chosen) == chosen


def test_the_library_does_not_list_a_projector_as_a_model(tmp_path: Path) -> None:
    model(tmp_path / "vlm.gguf")
    write_mmproj(tmp_path / "mmproj-vlm-f16.gguf", 576)
    names = [e.name for e in installed_models(tmp_path)]
    assert "vlm" in names and "mmproj-vlm-f16" not in names


def test_a_generic_projector_name_is_saved_under_its_repository() -> None:
    assert saved_name("ggml-org/gemma-3-4b-it-GGUF", "mmproj-model-f16.gguf") == (
        "gemma-3-4b-it-mmproj-model-f16.gguf")
    assert saved_name("org/SmolVLM-GGUF", "mmproj-SmolVLM-f16.gguf") == "mmproj-SmolVLM-f16.gguf"
    assert saved_name("org/SmolVLM-GGUF", "SmolVLM-Q4_K_M.gguf") == "SmolVLM-Q4_K_M.gguf"
    with pytest.raises(UnsafeFileName):
        saved_name("org/x", "../mmproj-f16.gguf")


def test_in_a_shared_folder_only_a_projector_named_like_the_model_is_taken(
        tmp_path: Path) -> None:
    gemma = model(tmp_path / "gemma-3-4b-it-Q4_K_M.gguf", 2560)
    other = model(tmp_path / "other-7b-Q4_K_M.gguf", 2560)  # same embedding size
    write_mmproj(tmp_path / "gemma-3-4b-it-mmproj-model-f16.gguf", 2560)
    found = projector_beside(str(gemma))
    assert found is not None and Path(found.path).name == "gemma-3-4b-it-mmproj-model-f16.gguf"
    assert projector_beside(str(other)) is None  # it would fit, but it is gemma's
    assert name_affinity("gemma-3-4b-it-Q4_K_M.gguf", "gemma-3-4b-it-mmproj-f16.gguf") == 14
