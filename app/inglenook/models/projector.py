"""Vision projectors (mmproj GGUF files): telling one from a model, checking it against a model,
and finding a model's projector beside it.

A projector's header says what it is: general.architecture "clip" and `clip.projector_type`
(`clip.vision.projector_type` in newer files). Its output size (`clip.vision.projection_dim`)
must be the text model's n_embd: libmtmd refuses the pair otherwise, and we say why before
loading anything. The Hub lays a vision model out as one or more model files and one projector
per precision in the same folder (`mmproj-model-f16.gguf`, `mmproj-<Model>-Q8_0.gguf`,
`<model>-mmproj-f16.gguf`): a projector is paired with a model beside it whose n_embd it fits.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from inglenook.core.load import LoadParams
from inglenook.models.filenames import looks_like_projector, precision_rank, without_quant
from inglenook.models.gguf import GGUFError, GGUFHeader, read_header

# libmtmd's compute buffers for one image, over the weights: a ViT's attention over ~1,000-4,000
# patches in f32 (llama.cpp logs 20-300 MiB for common projectors); counted generously.
COMPUTE_BYTES = 256 * 2**20
MAX_CANDIDATES = 16  # projector files looked at in one folder


@dataclass(frozen=True)
class ProjectorInfo:
    path: str
    projector_type: str
    n_embd: int  # output size; 0: the header does not say (libmtmd checks at load)
    vision: bool
    weights_bytes: int

    @property
    def memory_bytes(self) -> int:
        """What loading it adds: its weights (read into memory, not mapped) and buffers."""
        return self.weights_bytes + COMPUTE_BYTES


def _text(header: GGUFHeader, *keys: str) -> str:
    for key in keys:
        value = header.metadata.get(key)
        if isinstance(value, str) and value:
            return value
    return ""


def _count(header: GGUFHeader, key: str) -> int:
    value = header.metadata.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def is_projector(header: GGUFHeader) -> bool:
    return header.architecture == "clip" and bool(
        _text(header, "clip.projector_type", "clip.vision.projector_type"))


def projector_info(header: GGUFHeader) -> ProjectorInfo | None:
    """The header read as a projector's; None when it is not one (a model, say)."""
    if not is_projector(header):
        return None
    vision = header.metadata.get("clip.has_vision_encoder")
    return ProjectorInfo(
        path=header.path,
        projector_type=_text(header, "clip.vision.projector_type", "clip.projector_type"),
        n_embd=_count(header, "clip.vision.projection_dim"),
        vision=vision is not False,  # older files leave it out; audio-only ones say False
        weights_bytes=header.tensor_bytes)


def mismatch(projector: ProjectorInfo, model: GGUFHeader) -> str | None:
    """Why this projector cannot be used with this model, in a sentence; None if it can."""
    name = Path(projector.path).name
    if is_projector(model):
        return f"{Path(model.path).name} is a projector itself, not a model."
    if not projector.vision:
        return f"{name} reads no images (an audio projector)."
    n_embd = _count(model, f"{model.architecture}.embedding_length")
    if projector.n_embd and n_embd and projector.n_embd != n_embd:
        return (f"{name} makes embeddings of {projector.n_embd:,} values, but "
                f"{Path(model.path).name} reads {n_embd:,}: it belongs to another model.")
    return None


def check_pair(model_path: str, projector_path: str) -> str | None:
    """`mismatch` from the two files; a file that cannot be read is a reason too."""
    try:
        model, header = read_header(model_path), read_header(projector_path)
    except (GGUFError, OSError) as exc:
        return f"The projector or its model cannot be read: {exc}"
    projector = projector_info(header)
    if projector is None:
        return f"{Path(projector_path).name} is not a vision projector (mmproj) file."
    return mismatch(projector, model)


def projector_beside(model_path: str) -> ProjectorInfo | None:
    """The projector in the model's folder that fits it; None when there is none, or when the
    folder holds several models and no projector is named like this one (the models folder is
    flat: a projector of the same embedding size may be another model's). Among those named
    alike, the closest name wins, then f16 (what the Hub's vision repositories recommend)."""
    folder = Path(model_path).parent
    name = Path(model_path).name
    if looks_like_projector(name):
        return None
    try:
        ggufs = [e.name for e in os.scandir(folder)
                 if e.is_file() and e.name.lower().endswith(".gguf")]
        model = read_header(model_path)
    except (OSError, GGUFError):
        return None
    names = sorted(n for n in ggufs if looks_like_projector(n))[:MAX_CANDIDATES]
    fitting = []
    for candidate in names:
        try:
            info = projector_info(read_header(folder / candidate))
        except (OSError, GGUFError):
            continue
        if info is not None and mismatch(info, model) is None:
            fitting.append((name_affinity(name, candidate), info))
    alone = len(ggufs) - len(names) == 1  # this model is the folder's only one
    fitting = [(a, i) for a, i in fitting if a >= MIN_AFFINITY or alone]
    fitting.sort(key=lambda f: (-f[0], precision_rank(Path(f[1].path).name),
                                Path(f[1].path).name))
    return fitting[0][1] if fitting else None


MIN_AFFINITY = 3  # shared leading characters that make a projector this model's


def name_affinity(model_name: str, projector_name: str) -> int:
    """How many leading characters the model's name and the projector's share once "mmproj"
    and the precision are taken out ("gemma-3-4b-it-Q4_K_M.gguf" ~ "gemma-3-4b-it-mmproj-f16.gguf":
    14)."""
    a = without_quant(model_name.lower().removesuffix(".gguf"))
    b = re.sub(r"[-_.]?mmproj[-_.]?", "-", projector_name.lower().removesuffix(".gguf"))
    b = without_quant(b.strip("-"))
    shared = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        shared += 1
    return shared


def opened_files(chosen: Sequence[str]) -> tuple[str, str]:
    """What "Open a GGUF file…" makes of the files chosen: (the model, its projector or "").
    A projector chosen alone, two models, or a projector that does not fit the model raise
    ValueError with the reason, before anything loads; a model whose header cannot be read is
    left to the load, which says why."""
    models: list[str] = []
    projectors: list[str] = []
    for path in chosen:
        try:
            seen = is_projector(read_header(path))
        except (GGUFError, OSError):
            seen = looks_like_projector(Path(path).name)
        (projectors if seen else models).append(path)
    if not models:
        raise ValueError(f"{Path(projectors[0]).name} is a vision projector, not a model: choose "
                         "it together with its model (select both files).")
    if len(models) > 1 or len(projectors) > 1:
        raise ValueError("Choose one model, and at most one vision projector for it.")
    if not projectors:
        return models[0], ""
    reason = check_pair(models[0], projectors[0])
    if reason:
        raise ValueError(f"The vision projector cannot be used: {reason}")
    return models[0], projectors[0]


_FOUND: dict[tuple[str, int, int, int], str] = {}  # (model, size, mtime, folder mtime) → projector


def _found_key(model_path: str) -> tuple[str, int, int, int] | None:
    try:
        model, folder = os.stat(model_path), os.stat(Path(model_path).parent)
    except OSError:
        return None
    return (model_path, model.st_size, model.st_mtime_ns, folder.st_mtime_ns)


def vision_projector(model_path: str, chosen: str = "") -> str:
    """The projector this model loads with ("" none): the one chosen for it (its defaults'
    mmproj_path) when that file is there, else the one beside it. Reads GGUF headers the first
    time (call it off the GUI thread); remembered while the model and its folder are unchanged,
    for `known_projector`."""
    if chosen:
        return chosen if os.path.isfile(chosen) else ""
    key = _found_key(model_path)
    if key is None:
        return ""
    if key not in _FOUND:
        found = projector_beside(model_path)
        _FOUND[key] = found.path if found is not None else ""
    return _FOUND[key]


def known_projector(model_path: str, chosen: str = "") -> str | None:
    """`vision_projector` when it needs no header read (a few stat calls: the GUI thread may
    ask); None when it is not known yet."""
    if chosen:
        return chosen if os.path.isfile(chosen) else ""
    key = _found_key(model_path)
    return _FOUND.get(key) if key is not None else ""


def with_projector(params: LoadParams) -> LoadParams:
    """`params` with the projector beside the model when none was chosen (as LM Studio pairs
    a vision model's files); a chosen one is kept, and checked when it loads."""
    if params.mmproj_path or not params.model_path:
        return params
    found = vision_projector(params.model_path)
    return params.replace(mmproj_path=found) if found else params
