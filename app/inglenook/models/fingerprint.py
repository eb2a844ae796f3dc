"""The sha256 of a model file, recorded with each reply so it can be reproduced. Hashing a
multi-GB file takes seconds, so results are kept per (path, size, mtime) for the session."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

from inglenook.core.files import ReadRefused, read_bounded, sha256_file

CHUNK = 4 * 2**20
MAX_MEMO_BYTES = 2**20  # the remembered sha256s (a line per model file)
_cache: dict[tuple[str, int, int], str] = {}
_lock = threading.Lock()


def known_sha256(path: str) -> str:
    """The sha256 of the file as it is now when already computed this session, else ""."""
    try:
        stat = os.stat(path)
    except OSError:
        return ""
    with _lock:
        return _cache.get((os.path.realpath(path), stat.st_size, stat.st_mtime_ns), "")


def sha256_of(path: str) -> str:
    stat = os.stat(path)
    key = (os.path.realpath(path), stat.st_size, stat.st_mtime_ns)
    with _lock:
        if key in _cache:
            return _cache[key]
    found = sha256_file(path, CHUNK)
    with _lock:
        _cache[key] = found
    return _cache[key]


def remember(path: str, sha256: str) -> None:
    """A sha256 known without hashing again: a download checked it as the bytes arrived."""
    try:
        stat = os.stat(path)
    except OSError:
        return
    with _lock:
        _cache[(os.path.realpath(path), stat.st_size, stat.st_mtime_ns)] = sha256


def sha256_remembered(path: str, memo: Path) -> str:
    """sha256_of, remembered across processes in the JSON file `memo` by (path, size, mtime),
    so that a multi-GB model is hashed once, not at every load."""
    stat = os.stat(path)
    key = f"{os.path.realpath(path)}|{stat.st_size}|{stat.st_mtime_ns}"
    try:
        known = json.loads(read_bounded(memo, MAX_MEMO_BYTES)[0])
        if not isinstance(known, dict):
            known = {}
    except (ReadRefused, ValueError):
        known = {}
    found = known.get(key)
    if isinstance(found, str) and len(found) == 64:
        return found
    digest = sha256_of(path)
    known = {k: v for k, v in known.items() if not k.startswith(f"{os.path.realpath(path)}|")}
    known[key] = digest
    partial = memo.with_name(f"{memo.name}.{os.getpid()}.part")
    try:
        partial.write_text(json.dumps(known), encoding="utf-8")
        os.replace(partial, memo)
    except OSError:
        partial.unlink(missing_ok=True)
    return digest
