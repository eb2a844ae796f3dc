"""The folder of API requests' images (paths.request_image_dir()), bounded while the server runs.

A request's image is written there, under its sha256, for the engine to read: only once the
request is let through (server/images.py decodes and checks it first). No database knows which
request still needs a file, so the folder goes by age and size, at every write as well as at
start (the window's start-up prune, `serve`'s start): files older than MAX_AGE_S go, and when
the folder would pass MAX_BYTES (or MAX_FILES) the oldest go first, though never one younger
than IN_USE_S (a request waiting for the engine may still read it). When that is not enough,
or the disk keeps less than MIN_FREE_BYTES free, the request is answered 507 with a sentence,
as is a write that meets a full disk: a client can no longer fill the disk with images.
"""

from __future__ import annotations

import errno
import functools
import os
import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from inglenook import paths
from inglenook.chat.images import store_image
from inglenook.server.errors import ApiError

MAX_BYTES = 512 * 1024 * 1024  # ~16 images at the 32 MiB limit, hundreds of photos
MAX_FILES = 4096
MAX_AGE_S = 3600.0  # as the window's start-up prune (chat/images.MIN_AGE_S)
IN_USE_S = 600.0  # a request waits at most this long for the engine in practice
RESCAN_S = 60.0  # the folder is read again this often (another process may write it too)
MIN_FREE_BYTES = 256 * 1024 * 1024  # never take the disk's last space (the chats' database)
_FULL = (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC))


@dataclass
class _File:
    size: int
    mtime: float


class RequestImageCache:
    """The folder's files as last seen (one scan, then kept up to date by this process's writes
    and prunes); thread-safe."""

    def __init__(self, folder: Path | None = None) -> None:
        self._folder = folder
        self._files: dict[str, _File] | None = None  # name -> size, time; None: not scanned
        self._scanned: Path | None = None  # the folder they are of
        self._scanned_at = 0.0
        self._lock = threading.Lock()

    @property
    def folder(self) -> Path:
        return self._folder or paths.request_image_dir()

    def store(self, data: bytes, sha256: str, suffix: str) -> Path:
        """The bytes kept under their hash for the engine to read; ApiError 507 when the folder
        is full of images in use or the disk is (nothing is left half-written)."""
        name = f"{sha256}.{suffix}"
        with self._lock:
            files, _ = self._prune(len(data), keep=name)
            if name not in files:
                self._check_room(len(data), files)
            try:
                path = store_image(data, sha256, suffix, self.folder)
                os.utime(path)  # this request uses it now: the age counts from here
            except OSError as exc:
                self._files = None  # scanned again next time
                if exc.errno in _FULL:
                    raise ApiError(507, "The server's disk is full: the image could not be "
                                   "kept for the model to read. Try again once space is freed.",
                                   code="insufficient_storage") from None
                raise ApiError(500, f"The image could not be kept for the model to read "
                               f"({exc.strerror or exc}).", code="image_not_written") from None
            files[name] = _File(len(data), time.time())
            return path

    def prune(self) -> int:
        """Remove the files older than MAX_AGE_S (and the oldest past the bounds); how many."""
        with self._lock:
            return self._prune(0, keep="", rescan=True)[1]

    def _check_room(self, size: int, files: dict[str, _File]) -> None:
        total = sum(f.size for f in files.values())
        if total + size > MAX_BYTES or len(files) >= MAX_FILES:
            raise ApiError(507, f"The server's image cache is full ({total / 2**20:,.0f} MiB of "
                           "images sent in the last minutes, still in use); try again later.",
                           code="insufficient_storage")
        try:
            free = shutil.disk_usage(self.folder).free
        except OSError:
            return  # the write says what is wrong
        if free - size < MIN_FREE_BYTES:
            raise ApiError(507, f"The server's disk is nearly full ({free / 2**20:,.0f} MiB "
                           "free): the image was not kept. Try again once space is freed.",
                           code="insufficient_storage")

    def _prune(self, incoming: int, keep: str,
               rescan: bool = False) -> tuple[dict[str, _File], int]:
        """The folder's files once those past their age, then the oldest past the bounds
        (not in use), are removed; and how many went."""
        folder, now = self.folder, time.time()
        if (self._files is None or rescan or folder != self._scanned
                or now - self._scanned_at >= RESCAN_S):
            self._files, self._scanned, self._scanned_at = self._scan(folder), folder, now
        files = self._files
        gone = [n for n, f in files.items() if n != keep and f.mtime <= now - MAX_AGE_S]
        total = sum(f.size for f in files.values()) + incoming
        count = len(files) + (1 if incoming else 0)
        for name, f in sorted(files.items(), key=lambda item: item[1].mtime):
            if total <= MAX_BYTES and count <= MAX_FILES:
                break
            if name != keep and f.mtime <= now - IN_USE_S and name not in gone:
                gone.append(name)
                total, count = total - f.size, count - 1
        removed = 0
        for name in gone:
            try:
                os.unlink(folder / name)
                removed += 1
            except FileNotFoundError:
                pass
            except OSError:
                continue  # another process holds it: tried again next time
            files.pop(name, None)
        return files, removed

    @staticmethod
    def _scan(folder: Path) -> dict[str, _File]:
        found: dict[str, _File] = {}
        with os.scandir(folder) as entries:
            for entry in entries:
                try:
                    if entry.is_file(follow_symlinks=False) and not entry.name.startswith("."):
                        info = entry.stat(follow_symlinks=False)
                        found[entry.name] = _File(info.st_size, info.st_mtime)
                except OSError:
                    continue  # gone meanwhile
        return found


@functools.cache
def request_image_cache() -> RequestImageCache:
    """The process's one cache (every server of the process writes the same folder). Tests
    point paths elsewhere per test: the folder is looked up at each use."""
    return RequestImageCache()
