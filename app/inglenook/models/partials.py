"""A download in progress, on disk: `<name>.gguf.part` and its resume record
`<name>.gguf.part.json`, next to where `<name>.gguf` will be. Neither ends in .gguf, so the
library never lists them; the record says what the bytes are, so that a resume (also after a
restart or a crash) continues only the same file, and the Models page can offer to.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from inglenook import paths

PART_SUFFIX = ".part"
RECORD_SUFFIX = ".part.json"


@dataclass(frozen=True)
class ResumeRecord:
    repo: str
    filename: str  # in the repository
    revision: str
    size: int
    sha256: str
    validator: str = ""  # the byte server's strong ETag, sent as If-Range
    commit: str | None = None  # the rest is for people reading the file
    url: str = ""

    def describes(self, repo: str, filename: str, sha256: str, size: int) -> bool:
        return (self.repo, self.filename, self.sha256, self.size) == (repo, filename, sha256, size)


def part_path(final: Path) -> Path:
    return final.with_name(final.name + PART_SUFFIX)


def record_path(final: Path) -> Path:
    return final.with_name(final.name + RECORD_SUFFIX)


def read_record(path: Path) -> ResumeRecord | None:
    """The record, or None when it is missing or not one we wrote (then nothing is resumed)."""
    try:
        rec = json.loads(path.read_text())
        if not isinstance(rec, dict) or rec.get("version") != 1:
            return None
        fields = (rec["repo"], rec["filename"], rec.get("revision") or "main", rec["size"],
                  rec["sha256"], rec.get("validator") or "")
    except (OSError, ValueError, KeyError):
        return None
    types = (str, str, str, int, str, str)
    if not all(isinstance(v, t) for v, t in zip(fields, types, strict=True)):
        return None
    return ResumeRecord(*fields)


def write_record(path: Path, record: ResumeRecord) -> None:
    """Replace the record atomically: a crash leaves the old one or the new one."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"version": 1, **asdict(record)}))
    os.replace(tmp, path)


@dataclass(frozen=True)
class Partial:
    """An interrupted or paused download found in a models folder."""

    part_path: Path
    final_path: Path
    repo: str
    filename: str
    revision: str
    size: int
    done_bytes: int


def find_partials(dest_dir: Path | None = None) -> list[Partial]:
    """Paused or interrupted downloads (those with a resume record) in the folder, by name."""
    root = Path(dest_dir) if dest_dir else paths.models_dir()
    found = []
    for rec_path in sorted(root.glob("*" + RECORD_SUFFIX)):
        final = rec_path.with_name(rec_path.name.removesuffix(RECORD_SUFFIX))
        rec = read_record(rec_path)
        part = part_path(final)
        if rec is None or not part.is_file():
            continue
        found.append(Partial(part, final, rec.repo, rec.filename, rec.revision, rec.size,
                             part.stat().st_size))
    return found


def discard_partial(final: Path) -> None:
    """Delete a download's partial file and resume record (cancel with delete)."""
    for path in (part_path(final), record_path(final)):
        path.unlink(missing_ok=True)
