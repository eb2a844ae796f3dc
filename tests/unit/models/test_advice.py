"""What the Discover page says about a repository's files, without widgets."""

from __future__ import annotations

import pytest

from inglenook import paths
from inglenook.models import fit
from inglenook.models.advice import (
    FIT_TEXT,
    fit_breakdown,
    is_installed,
    is_recommended,
    plan_fits,
)
from inglenook.models.catalog import CatalogEntry
from inglenook.models.hub import GGUFModel, HubFile, RepoListing

GB = 10**9
SHAPE = fit.ModelShape(n_layers=24, n_embd=2048, n_head=16, n_head_kv=4, n_ctx_train=4096,
                       weights_bytes=1, architecture="llama")


def model(quant: str, size: int, parts: int = 1) -> GGUFModel:
    if parts == 1:
        files = (HubFile(f"sub/m.{quant}.gguf", size, None),)
    else:
        files = tuple(HubFile(f"m.{quant}-{i:05d}-of-{parts:05d}.gguf", size // parts, None)
                      for i in range(1, parts + 1))
    return GGUFModel(f"m.{quant}.gguf", quant, files, parts)


LISTING = RepoListing("org/m", None, (model("Q2_K", 1 * GB), model("Q4_K_M", 2 * GB),
                                      model("Q8_0", 4 * GB, parts=2), model("F16", 8 * GB)))


def test_plan_fits_labels_every_file_and_recommends_a_quant(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fit, "system_memory", lambda gpu_offload=False: fit.Memory(6 * GB, 8 * GB))
    report = plan_fits("org/m", LISTING, SHAPE)  # a shape given: nothing is fetched
    assert report.n_ctx == 4096  # the model's trained context, below the default 8192
    labels = {name: FIT_TEXT[p.label] for name, p in report.plans.items()}
    assert labels == {"m.Q2_K.gguf": "Fits", "m.Q4_K_M.gguf": "Fits", "m.Q8_0.gguf": "Tight",
                      "m.F16.gguf": "Won't fit"}
    assert report.recommended == "Q4_K_M"
    assert is_recommended(LISTING.models[1], report, None)
    assert not is_recommended(LISTING.models[0], report, None)
    plan = report.plans["m.Q4_K_M.gguf"]
    assert fit_breakdown(plan).splitlines() == [
        plan.note, f"Weights 2.0 GB + KV cache {plan.kv_bytes / 1e6:.0f} MB + buffers "
                   f"{plan.overhead_bytes / 1e6:.0f} MB = {plan.total_bytes / 1e9:.1f} GB"]


def test_a_catalog_entry_recommends_its_own_files() -> None:
    entry = CatalogEntry("org/m", "M", "Org", "1B", 4096, "MIT", "A model.",
                         ("m.Q8_0.gguf",), ())
    assert is_recommended(LISTING.models[2], None, entry)  # by the split model's name
    assert not is_recommended(LISTING.models[1], None, entry)


def test_a_model_is_installed_only_with_every_part() -> None:
    split = LISTING.models[2]
    assert not is_installed("org/m", split.parts)
    (paths.models_dir() / split.parts[0].path).write_bytes(b"GGUF")
    assert not is_installed("org/m", split.parts)
    (paths.models_dir() / split.parts[1].path).write_bytes(b"GGUF")
    assert is_installed("org/m", split.parts)
    (paths.models_dir() / "m.Q2_K.gguf").write_bytes(b"GGUF")  # the repository's folder: dropped
    assert is_installed("org/m", LISTING.models[0].parts)
    assert not is_installed("org/m", [HubFile("../x.gguf", 1, None)])
