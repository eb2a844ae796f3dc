"""The sha256 of a model file, recorded with each reply so it can be reproduced. Hashing a
multi-GB file takes seconds, so results are kept per (path, size, mtime) for the session."""

from __future__ import annotations

import os
import threading

from inglenook.core.files import sha256_file

CHUNK = 4 * 2**20
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
