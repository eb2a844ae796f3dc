"""The saved approximate indexes of a knowledge database (ann.py): in their folder beside it,
per collection c<id>.usearch (usearch's own format) and c<id>.json, its manifest: what the
index must match to be taken (the collection's created_at and model), the log seq it reflects,
its count, and the file's size and crc32 (a file cut short or damaged is never loaded: usearch
trusts the links it reads). Written and read under `.lock` (several processes: the window and
a command); each file replaces the old at once (os.replace), the index before its manifest.
"""

from __future__ import annotations

import contextlib
import json
import os
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inglenook.core.files import write_atomic
from inglenook.paths import private

LOCK_TIMEOUT_S = 60.0  # a lock held longer than this: the files are not used this time
FORMAT = 1  # of the manifest; raise when the files change meaning


@dataclass(frozen=True)
class Owner:
    """A collection as its index must match it: a reused id or another model is another
    index."""

    collection_id: int
    created_at: float
    model: str


@dataclass(frozen=True)
class Saved:
    """An index read from its file: `index` None when it had no vector."""

    seq: int
    index: Any


class Files:
    def __init__(self, folder: Path) -> None:
        self.folder = folder

    @contextlib.contextmanager
    def locked(self, timeout: float | None = None) -> Iterator[None]:
        """Raises TimeoutError after `timeout` seconds (None: LOCK_TIMEOUT_S), OSError where
        the folder cannot be made."""
        from filelock import FileLock

        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        with FileLock(str(self.folder / ".lock"),
                      timeout=LOCK_TIMEOUT_S if timeout is None else timeout):
            yield

    def _paths(self, collection_id: int) -> tuple[Path, Path]:
        return (self.folder / f"c{collection_id}.usearch",
                self.folder / f"c{collection_id}.json")

    def _manifest(self, collection_id: int) -> dict[str, Any] | None:
        with contextlib.suppress(OSError, ValueError):
            info = json.loads(self._paths(collection_id)[1].read_text())
            if isinstance(info, dict):
                return info
        return None

    def save(self, owner: Owner, seq: int, index: Any) -> bool:
        """Write the collection's index as of `seq` (index None: it has no vector), unless the
        file there is of the same collection and newer (another process saved after applying
        more); whether it was written. Under `locked`."""
        old = self._manifest(owner.collection_id)
        if old is not None and (old.get("created_at"), old.get("model")) == (
                owner.created_at, owner.model) and type(old.get("seq")) is int and \
                old["seq"] > seq:
            return False
        data, manifest = self._paths(owner.collection_id)
        size = crc = 0
        if index is None:
            with contextlib.suppress(FileNotFoundError):
                data.unlink()
        else:
            partial = data.with_name(data.name + ".partial")
            index.save(str(partial))
            private(partial, 0o600)  # what the user's documents say, as their database
            size, crc = partial.stat().st_size, crc32(partial)
            os.replace(partial, data)
        info = {"format": FORMAT, "created_at": owner.created_at, "model": owner.model,
                "seq": seq, "count": 0 if index is None else len(index), "bytes": size,
                "crc32": crc}
        write_atomic(manifest, json.dumps(info).encode())  # mkstemp's file: 0600 already
        return True

    def load(self, owner: Owner) -> Saved | None:
        """The saved index of this collection if its manifest matches it and its file is
        whole; None: there is none to trust (it is built again). Under `locked`."""
        from usearch.index import Index

        info = self._manifest(owner.collection_id)
        if info is None or (info.get("format"), info.get("created_at"), info.get("model")) != (
                FORMAT, owner.created_at, owner.model) or type(info.get("seq")) is not int:
            return None
        if info.get("count") == 0:
            return Saved(info["seq"], None)
        data = self._paths(owner.collection_id)[0]
        try:
            if data.stat().st_size != info.get("bytes") or crc32(data) != info.get("crc32"):
                return None
            index = Index.restore(str(data))
        except (OSError, ValueError, RuntimeError):  # usearch's words for a bad file
            return None
        if index is None or not index.multi or len(index) != info.get("count"):
            return None
        return Saved(info["seq"], index)

    def delete(self, collection_id: int) -> None:
        for path in self._paths(collection_id):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()

    def saved(self) -> dict[int, int]:
        """{collection id: seq} of the manifests there."""
        found = {}
        for manifest in self.folder.glob("c*.json"):
            info = self._manifest(int(manifest.stem[1:])) if manifest.stem[1:].isdigit() \
                else None
            if info is not None and type(info.get("seq")) is int:
                found[int(manifest.stem[1:])] = info["seq"]
        return found


def crc32(path: Path) -> int:
    crc = 0
    with open(path, "rb") as f:
        while block := f.read(1 << 24):
            crc = zlib.crc32(block, crc)
    return crc
