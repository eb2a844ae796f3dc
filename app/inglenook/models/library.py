"""The models the app can load: the bundled one and the GGUF files in the models folder; what
importing one into the folder and removing one from it does. Qt-free: the Library page and
`inglenook models` share every rule here.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from inglenook import paths
from inglenook.models.filenames import (
    looks_like_embedding,
    looks_like_projector,
    parse_quant,
    split_name,
)
from inglenook.models.gguf import GGUFError, GGUFHeader, read_header
from inglenook.models.projector import is_projector

ImportMode = Literal["copy", "link"]


class LibraryError(Exception):
    """The message is for the user."""


@dataclass(frozen=True)
class ModelEntry:
    name: str
    path: str  # a split model's first part
    source: Literal["bundled", "local"]
    size_bytes: int  # every part of a split model together
    embedding: bool = False  # an embedding model: for Knowledge and /v1/embeddings, not chat


def split_parts(path: Path) -> list[Path]:
    """All the files of the model whose (first) file is `path`."""
    split = split_name(path.name)
    if split is None:
        return [path]
    return [path.with_name(name) for name in split.all_parts]


def files_size(files: list[Path] | tuple[Path, ...]) -> int:
    """Bytes of the files that exist (a link counts as what it points to)."""
    total = 0
    for file in files:
        with contextlib.suppress(OSError):
            total += file.stat().st_size
    return total


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
        split = split_name(path.name)
        if split and split.index != 1:
            continue  # llama.cpp loads a split model from its first part
        if _is_projector_file(path):
            continue  # a vision model's second file: loaded with its model, not on its own
        seen.add(path.resolve())
        entries.append(ModelEntry(path.stem, str(path), "local", files_size(split_parts(path)),
                                  _is_embedding_file(path)))
    return entries


def _is_projector_file(path: Path) -> bool:
    """Named as the Hub names projectors, and its header says it is one (only those files'
    headers are read, so listing stays cheap)."""
    if not looks_like_projector(path.name):
        return False
    try:
        return is_projector(read_header(path))
    except (OSError, GGUFError):
        return False


_EMBEDDING: dict[tuple[str, int, int], bool] = {}  # (path, size, mtime): read once a file


def _is_embedding_file(path: Path) -> bool:
    """Named as embedding models are, and its header names a pooling (the same rule as the
    engine's, engine/host/embedding.py). Only those files' headers are read, once each while
    the file is unchanged: a header with its vocabulary takes ~70 ms, and the model picker
    lists the library each time it opens."""
    if not looks_like_embedding(path.name):
        return False
    try:
        stat = path.stat()
        key = (str(path), stat.st_size, stat.st_mtime_ns)
        if key not in _EMBEDDING:
            header = read_header(path)
            _EMBEDDING[key] = f"{header.architecture}.pooling_type" in header.metadata
    except (OSError, GGUFError):
        return False
    return _EMBEDDING[key]


def find_installed(name: str, entries: list[ModelEntry]) -> list[ModelEntry]:
    """The entries a user may mean by `name`: the entry's name, or the file name of any of its
    parts, or a split model's name without the part numbers ("big-Q4_K_M.gguf")."""
    found = []
    for entry in entries:
        path = Path(entry.path)
        split = split_name(path.name)
        names = {entry.name, *(p.name for p in split_parts(path))}
        if split is not None:
            names |= {split.model_name, split.model_name.removesuffix(".gguf")}
        if name in names:
            found.append(entry)
    return found


def quantization(header: GGUFHeader | None, path: str) -> str:
    """What the header says, else what the file name says, else ""."""
    return (header.quantization if header is not None else "") or parse_quant(path)


def is_inside(path: Path, root: Path) -> bool:
    """Whether `path`, links resolved, lies in `root` (links resolved too)."""
    real, base = os.path.realpath(path), os.path.realpath(root)
    return os.path.commonpath([real, base]) == base


# -- importing ------------------------------------------------------------------------------------
def import_model(source: Path, mode: ImportMode, models_dir: Path) -> tuple[Path, str]:
    """Copy `source` (all its parts, for a split model) into the models folder, or link to it
    there. Slow for a big copy: run it off the GUI thread. Returns the library path and a
    sentence for the user; LibraryError (or GGUFError) says why not."""
    header = read_header(source)  # refuse a file the engine would refuse, before copying GBs
    parts = split_parts(source)
    missing = [p.name for p in parts if not p.is_file()]
    if missing:
        raise LibraryError(f"{source.name} is one part of a split model, and these parts are "
                           f"missing next to it: {', '.join(missing)}.")
    if is_inside(source.parent, models_dir):
        raise LibraryError(f"{source.name} is already in the models folder.")
    taken = [p.name for p in parts if os.path.lexists(models_dir / p.name)]
    if taken:
        raise LibraryError(f"A model named {taken[0]} is already in the library.")
    note = ""
    if mode == "link":
        try:
            for part in parts:
                os.symlink(part.resolve(), models_dir / part.name)
            return models_dir / source.name, f"{header.name} now links to {source}."
        except (OSError, NotImplementedError):  # e.g. Windows without the symlink privilege
            for part in parts:
                if (models_dir / part.name).is_symlink():
                    (models_dir / part.name).unlink()
            note = " Links are not possible here, so the file was copied."
    for part in parts:
        target = models_dir / part.name
        temp = target.with_name(target.name + ".importing")  # never listed: not .gguf
        try:
            shutil.copyfile(part, temp)
            os.replace(temp, target)
        except OSError as exc:
            temp.unlink(missing_ok=True)
            raise LibraryError(f"Could not copy {part.name}: {exc.strerror or exc}.") from None
    return models_dir / source.name, f"{header.name} was copied into the models folder.{note}"


# -- removing -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Removal:
    """What deleting a library entry would do: refuse (`refusal` says why) or remove `files`
    (every part of a split model; for a linked model only the links, never their targets)."""

    files: tuple[Path, ...] = ()
    link_only: bool = False
    refusal: str = ""

    @property
    def size_bytes(self) -> int:
        """What deleting frees on disk: nothing for links."""
        return 0 if self.link_only else files_size(self.files)


def plan_removal(entry: ModelEntry, models_dir: Path) -> Removal:
    path = Path(entry.path)
    if entry.source == "bundled":
        return Removal(refusal=f"{entry.name} is the bundled model that ships with Inglenook; "
                               "it cannot be deleted.")
    if not is_inside(path.parent, models_dir):
        return Removal(refusal=f"{path} is not in the models folder, so Inglenook did not "
                               "download it and will not delete it.")
    parts = tuple(p for p in split_parts(path) if os.path.lexists(p))
    return Removal(parts, link_only=all(p.is_symlink() for p in parts))


def remove(removal: Removal) -> None:
    """Carry out a plan: unlink every file (a link, never what it points to). LibraryError
    names what could not be removed; the parts removed before stay removed, and listing the
    library again shows what is left."""
    if removal.refusal:
        raise LibraryError(removal.refusal)
    for file in removal.files:
        try:
            file.unlink(missing_ok=True)
        except OSError as exc:
            raise LibraryError(f"Could not delete {file.name}: {exc.strerror or exc}.") from None
