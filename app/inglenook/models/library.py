"""The models the app can load: the bundled one and the GGUF files in the models folder."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from inglenook import paths

_SPLIT_PART = re.compile(r"-(\d{5})-of-\d{5}\.gguf$", re.IGNORECASE)


@dataclass(frozen=True)
class ModelEntry:
    name: str
    path: str
    source: Literal["bundled", "local"]
    size_bytes: int


def installed_models(models_dir: Path | None = None) -> list[ModelEntry]:
    """Bundled model first, then *.gguf in the models folder (and one level of sub-folders),
    by name. Partial downloads never end in .gguf, so they never show up here."""
    entries: list[ModelEntry] = []
    bundled = paths.bundled_model_path()
    if bundled is not None:
        entries.append(ModelEntry(bundled.stem, str(bundled), "bundled", bundled.stat().st_size))
    root = models_dir or paths.models_dir()
    seen = {bundled.resolve()} if bundled is not None else set()
    candidates = sorted((*root.glob("*"), *root.glob("*/*")), key=lambda p: p.name.lower())
    for path in candidates:
        if path.suffix.lower() != ".gguf" or not path.is_file() or path.resolve() in seen:
            continue
        split = _SPLIT_PART.search(path.name)
        if split and int(split.group(1)) != 1:
            continue  # llama.cpp loads a split model from its first part
        seen.add(path.resolve())
        entries.append(ModelEntry(path.stem, str(path), "local", path.stat().st_size))
    return entries


def describe_size(size_bytes: int) -> str:
    if size_bytes < 1000:
        return f"{size_bytes} B"
    for unit, scale in (("KB", 1e3), ("MB", 1e6)):
        if round(size_bytes / scale) < 1000:  # so 999,999 bytes reads "1.0 MB", not "1000 KB"
            return f"{size_bytes / scale:.0f} {unit}"
    return f"{size_bytes / 1e9:.1f} GB"
