"""What the Discover page says about a repository's files: a fit label per file, whether the
bundled engine can load them at all, the file to recommend, whether a file is installed already.
Qt-free, so that it is tested without widgets.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass

from inglenook import paths
from inglenook.core.units import describe_size
from inglenook.models import compat, fit
from inglenook.models.catalog import CatalogEntry
from inglenook.models.filenames import UnsafeFileName, saved_name
from inglenook.models.gguf import GGUFError
from inglenook.models.hub import GGUFModel, HubFile, RepoListing
from inglenook.models.projector import COMPUTE_BYTES
from inglenook.models.remote_header import remote_header

DEFAULT_CTX = 8192
KV_TYPE = "f16"
FIT_TEXT = {"fits": "Fits", "tight": "Tight", "won't fit": "Won't fit"}


@dataclass(frozen=True)
class FitReport:
    """What the planner says about one repository's files."""

    repo: str
    shape: fit.ModelShape
    n_ctx: int
    memory: fit.Memory
    plans: dict[str, fit.FitPlan]  # by GGUFModel.name
    recommended: str | None  # a quantization
    # Whether the bundled engine knows the model's architecture and tokenizer; None when the
    # header was not read this time and no verdict was passed in.
    verdict: compat.Compatibility | None = None


def header_file(listing: RepoListing) -> str:
    """The file whose header describes the repository's model: the smallest (projectors are
    listed apart)."""
    return listing.models[0].parts[0].path


def plan_fits(repo: str, listing: RepoListing, shape: fit.ModelShape | None,
              verdict: compat.Compatibility | None = None) -> FitReport:
    """Slow (network): read the header of the repository's smallest model file (once per
    repository: pass the shape and verdict from before), check it against the bundled engine
    and plan every file against free memory now."""
    if shape is None:
        header = remote_header(repo, header_file(listing), listing.commit or "main")
        verdict = compat.check(header)
        try:
            shape = fit.shape_from_header(header)
        except GGUFError as exc:
            if not verdict.wont_load:
                raise
            # An architecture the engine does not know may not give the numbers fit needs
            # either: that it won't load is the news.
            raise GGUFError(f"{verdict.summary}. {verdict.detail}") from exc
    memory = fit.system_memory(gpu_offload=fit.offload_available())
    n_ctx = min(DEFAULT_CTX, shape.n_ctx_train) if shape.n_ctx_train else DEFAULT_CTX
    projector = listing.projector
    if projector is not None:  # downloaded and loaded with every model of the repository
        shape = dataclasses.replace(shape, projector_bytes=projector.size + COMPUTE_BYTES)
    plans = {m.name: fit.plan(dataclasses.replace(shape, weights_bytes=m.size), n_ctx, KV_TYPE,
                              memory) for m in listing.models}
    best = fit.recommend([(m.quant, m.size) for m in listing.models if m.quant], shape, n_ctx,
                         KV_TYPE, memory)
    return FitReport(repo, shape, n_ctx, memory, plans, best, verdict)


def fit_breakdown(plan: fit.FitPlan) -> str:
    """The plan's sentence and the sum behind it, for a tooltip."""
    return (f"{plan.note}\nWeights {describe_size(plan.weights_bytes)} + KV cache "
            f"{describe_size(plan.kv_bytes)} + buffers {describe_size(plan.overhead_bytes)} = "
            f"{describe_size(plan.total_bytes)}")


def is_recommended(model: GGUFModel, report: FitReport | None,
                   entry: CatalogEntry | None) -> bool:
    """A catalog entry's own choice wins; otherwise the planner's quantization. Nothing is
    recommended that the bundled engine cannot load."""
    if report is not None and report.verdict is not None and report.verdict.wont_load:
        return False
    if entry is not None:
        names = {n.rsplit("/", 1)[-1] for n in entry.recommended}
        return model.parts[0].path.rsplit("/", 1)[-1] in names or model.name in names
    return report is not None and model.quant == report.recommended


def vision_note(listing: RepoListing) -> str:
    """What the repository's projector means for its downloads; "" for a text-only one."""
    projector = listing.projector
    if projector is None:
        return ""
    return (f"A vision model: every download includes its projector "
            f"{projector.path.rsplit('/', 1)[-1]} ({describe_size(projector.size)}), which lets "
            "it read images.")


def download_files(listing: RepoListing, model: GGUFModel) -> tuple[HubFile, ...]:
    """What downloading `model` fetches: its parts, then the repository's projector."""
    projector = listing.projector
    return model.parts + ((projector,) if projector is not None else ())


def is_installed(repo: str, files: Iterable[HubFile]) -> bool:
    """Whether every one of the repository's files is in the models folder already."""
    try:
        return all((paths.models_dir() / saved_name(repo, f.path)).is_file() for f in files)
    except UnsafeFileName:
        return False
