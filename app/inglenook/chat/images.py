"""A message's images as the engine is given them: content-addressed files (Qt-free).

The bytes of an image live with its message in the store (the `attachments` table); the engine
reads images from files (an ImageRef crosses the pipe as a sha256 and a path, never pixels). So
each image sent is written once under paths.image_cache_dir(), named by its bytes' sha256, and
the engine checks the hash when it reads it. The folder is derived data: `prune` removes the
files no stored message holds (at start-up, off the GUI thread), `forget` those of a chat
deleted for good (chat/forget.py), and a file removed by hand is written again from the store at
the next send. The API server's images (`store_request_image`) have no message to hold them:
they live in paths.request_image_dir(), out of `forget`'s reach (a running request may be
reading one), and go by age at start-up.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from pathlib import Path

from inglenook import paths
from inglenook.core.attachments import Attachment
from inglenook.core.files import sha256_file
from inglenook.core.messages import ImageRef
from inglenook.store import db
from inglenook.store.messages import image_blobs

SUFFIXES = {"image/png": "png", "image/jpeg": "jpeg", "image/gif": "gif",
            "image/webp": "webp", "image/bmp": "bmp"}
MIN_AGE_S = 3600.0
_KEPT_HASHES = 256
_hashes: OrderedDict[tuple[int, int], str] = OrderedDict()  # (hash(), len) -> sha256
_hashes_lock = threading.Lock()  # ready() runs off the GUI thread
_checked: set[str] = set()  # cache files written or checked in this run


def remembered_sha256(data: bytes) -> str:
    """The bytes' sha256, remembered for the last _KEPT_HASHES images: a chat with a photo in
    its history hashes it once, not at every reply (Python's own hash of bytes is cheaper, and
    kept by the bytes object: once computed, free)."""
    key = (hash(data), len(data))
    with _hashes_lock:
        found = _hashes.get(key)
        if found is not None:
            _hashes.move_to_end(key)
            return found
    found = hashlib.sha256(data).hexdigest()
    with _hashes_lock:
        _hashes[key] = found
        while len(_hashes) > _KEPT_HASHES:
            _hashes.popitem(last=False)
    return found


def store_image(data: bytes, sha256: str, suffix: str, folder: Path | None = None) -> Path:
    """The bytes under their hash in the image cache (or `folder`); written once (to a
    temporary name, then renamed, so the engine never reads half a file). A file found there is
    checked against the hash once per run (the engine would refuse one that changed, at every
    send), and written again if it does not match. OSError when it cannot be written."""
    path = (folder or paths.image_cache_dir()) / f"{sha256}.{suffix}"
    key = str(path)
    if key in _checked and path.is_file():
        return path
    if path.is_file() and path.stat().st_size == len(data) and _holds(path, sha256):
        _checked.add(key)
        return path
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=".part-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    _checked.add(key)
    return path


def store_request_image(data: bytes, sha256: str, suffix: str) -> Path:
    """An API request's image, as store_image writes it, in paths.request_image_dir(). Its
    time is set to now even when the file was there: the start-up prune keeps files younger
    than MIN_AGE_S, and this request uses it now."""
    path = store_image(data, sha256, suffix, paths.request_image_dir())
    os.utime(path)
    return path


def _holds(path: Path, sha256: str) -> bool:
    try:
        return sha256_file(path, 1 << 20) == sha256
    except OSError:
        return False


def image_ref(attachment: Attachment) -> ImageRef:
    """An image part of a stored message as the engine reads it (OSError: the cache folder
    cannot be written)."""
    sha = remembered_sha256(attachment.data)
    suffix = SUFFIXES.get(attachment.mime, "img")
    return ImageRef(sha, str(store_image(attachment.data, sha, suffix)))


def ready(attachments: Iterable[Attachment]) -> None:
    """Off the GUI thread, before a reply is begun: each image hashed and its file in the cache
    written or checked, so that making the request (image_ref, on the GUI thread) finds both
    done. After a restart, a chat with 20 photos in its history had its GUI thread hash 34 MB
    twice (~190 ms); with the same bytes objects, image_ref then costs a lookup each."""
    for attachment in attachments:
        with contextlib.suppress(OSError):  # said when the request is made
            image_ref(attachment)


def prune(used: Iterable[str], min_age_s: float = MIN_AGE_S) -> int:
    """Remove the cache's image files whose sha256 is not in `used` (those of every stored
    image), and the API requests' older than `min_age_s`; how many went. Files newer than
    `min_age_s` stay: a message being sent, or a request, may be reading one now. Never follows
    a link out of the folders: only their own regular files are removed."""
    keep = set(used)
    return (_prune_folder(paths.image_cache_dir(), keep, min_age_s)
            + _prune_folder(paths.request_image_dir(), set(), min_age_s))


def _prune_folder(folder: Path, keep: set[str], min_age_s: float) -> int:
    before = time.time() - min_age_s
    return _remove(folder, lambda entry: entry.name.split(".", 1)[0] not in keep
                   and entry.stat().st_mtime <= before)


def forget(sha256s: Iterable[str]) -> int:
    """Remove the cache files of these images (a purged chat's that no other message holds),
    whatever their age; how many went. Only the folder's own regular files are removed: never
    the API requests' (paths.request_image_dir()), which a running request may be reading."""
    wanted = set(sha256s)
    if not wanted:
        return 0
    return _remove(paths.image_cache_dir(), lambda entry: entry.name.split(".", 1)[0] in wanted)


def _remove(folder: Path, chosen: Callable[[os.DirEntry[str]], bool]) -> int:
    """Remove the folder's own regular files that are `chosen`; how many went."""
    removed = 0
    for entry in os.scandir(folder):
        if not entry.is_file(follow_symlinks=False) or not chosen(entry):
            continue
        try:
            os.unlink(entry.path)
            removed += 1
        except OSError:
            pass  # another process has it, or it went already: tried again next time
        _checked.discard(entry.path)
    return removed


def prune_cache(database: Path, min_age_s: float = MIN_AGE_S) -> int:
    """`prune` against every image the conversation database holds (a deleted chat's too while
    Undo may bring it back): at start-up, off the GUI thread. It reads the images one at a
    time."""
    conn = db.connect(database, read_only=True)
    try:
        used = {hashlib.sha256(data).hexdigest() for data in image_blobs(conn)}
    finally:
        conn.close()
    return prune(used, min_age_s)
