"""What it takes to reproduce a reply: saved with it and shown by Details."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from inglenook.core.load import ModelInfo
from inglenook.core.messages import GenerationRequest
from inglenook.core.replies import Finish, Stats


def provenance(model: ModelInfo | None, request: GenerationRequest | None,
               stats: Stats | None, finish: Finish | None, sha256: str = "") -> dict:
    data: dict = {}
    if model is not None:
        data["model"] = {"name": model.name, "file": Path(model.path).name, "path": model.path,
                         "sha256": sha256, "quantization": model.quantization,
                         "size_bytes": model.size_bytes, "architecture": model.architecture,
                         "n_ctx": model.n_ctx, "kv_cache_type": model.kv_cache_type,
                         "flash_attn": model.flash_attn, "template": model.template_source}
    if request is not None:
        data["sampling"] = request.sampling.to_dict()
        data["system_prompt"] = next(
            (m.content for m in request.messages if m.role == "system"), "")
    if stats is not None:
        data["stats"] = dataclasses.asdict(stats)
        data["seed"] = stats.seed
    if finish is not None:
        data["finish"] = finish.reason
        if finish.message:
            data["error"] = finish.message
    return data
