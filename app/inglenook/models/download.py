"""Downloads from the Hub that resume, retry, verify, and never leave a broken .gguf behind.

A download of `<name>.gguf` writes `<name>.gguf.part` in the destination folder, plus one small
resume record `<name>.gguf.part.json` (see partials.py). Bytes are hashed as they
arrive (and the partial bytes again on resume); only a file of the right size and the Hub's LFS
sha256 is fsynced and moved into place with os.replace, so the .gguf appears whole or not at all.

huggingface_hub's own downloader is not used: it does not resume across restarts and checks the
size only.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import random
import shutil
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import httpx2

from inglenook import paths
from inglenook.core.files import sha256_file
from inglenook.core.units import amount
from inglenook.models import hub
from inglenook.models.filenames import GGUF_ONLY, UnsafeFileName, saved_name
from inglenook.models.partials import (
    ResumeRecord,
    discard_partial,
    part_path,
    read_record,
    record_path,
    write_record,
)
from inglenook.models.transfer import (
    CONTENT_RANGE,
    ProgressCallback,
    ProgressMeter,
    Sha256Worker,
)

try:
    import fcntl
except ImportError:  # Windows: no advisory lock; two Inglenooks should not download one file
    fcntl = None  # type: ignore[assignment]

DISK_MARGIN = 256 << 20  # left free after the download, so the disk is not filled to the brim
_READ_BLOCK = 1 << 20
_HASH_BATCH = 1 << 20
_NET_READ = 256 << 10
GIT_BLOB = "git-blob:"  # what stands for a sha256 when the Hub gives git's id of a small file
MAX_GIT_FILE = 32 << 20  # the Hub keeps larger files in LFS, with a sha256


class DownloadError(Exception):
    """The message is for the user: what went wrong and what is left on disk."""


class InsufficientSpace(DownloadError):
    pass


class ChecksumMismatch(DownloadError):
    pass


class DownloadBusy(DownloadError):
    pass


class DownloadCancelled(DownloadError):
    """Stopped because the cancel event was set; the partial file is kept (pause)."""

    def __init__(self, message: str, kept_bytes: int) -> None:
        super().__init__(message)
        self.kept_bytes = kept_bytes


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with jitter. A failure after which more bytes arrived starts the count
    again, so a flaky but working link finishes; `max_attempts` bounds everything."""

    max_failures: int = 6  # in a row, without a byte of progress
    max_attempts: int = 50
    base_delay_s: float = 1.0
    max_delay_s: float = 30.0
    max_retry_after_s: float = 60.0  # a longer Retry-After is cut to this
    connect_timeout_s: float = 10.0
    read_timeout_s: float = 30.0
    # From a request to its answer's last header line, however slowly they trickle in (the
    # metadata's exchanges have hub.py's deadlines). The bytes then have the read timeout:
    # a large file takes as long as it takes, and the user can pause it.
    answer_deadline_s: float = 60.0

    def delay(self, failures: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, self.max_retry_after_s)
        backoff = min(self.max_delay_s, self.base_delay_s * 2 ** max(0, failures - 1))
        return backoff * random.uniform(0.5, 1.0)  # jitter: clients that failed together part


@dataclass(frozen=True)
class RetryNotice:
    attempt: int
    delay_s: float
    reason: str


def download_file(repo: str, filename: str, revision: str = "main",
                  dest_dir: Path | None = None, progress: ProgressCallback | None = None,
                  cancel: threading.Event | None = None, *,
                  policy: RetryPolicy | None = None,
                  on_retry: Callable[[RetryNotice], None] | None = None,
                  expected_sha256: str | None = None,
                  suffixes: tuple[str, ...] = GGUF_ONLY) -> Path:
    """Download `filename` from the Hub repository `repo` into `dest_dir` (default: the models
    folder) and return the installed path. Resumes a partial download of the same file.

    Raises UnsafeFileName (before any request), hub.HubOffline (before any connection),
    other hub.HubError (not found, gated...), InsufficientSpace (before any byte is fetched),
    ChecksumMismatch (the partial is deleted), DownloadCancelled (the partial is kept) and
    DownloadError (gave up after retries; the partial is kept).
    """
    name = saved_name(repo, filename, suffixes)
    hub.check_repo_id(repo)
    dest = Path(dest_dir) if dest_dir else paths.models_dir()
    final = dest / name
    hub.ensure_online()
    _read_in_bigger_pieces()
    job = _Download(repo, filename, revision, final, progress, cancel or threading.Event(),
                    policy or RetryPolicy(), on_retry, expected_sha256)
    try:
        dest.mkdir(parents=True, exist_ok=True)
        for path in (final, part_path(final)):
            if path.is_symlink() or path.parent.resolve() != dest.resolve():
                raise UnsafeFileName(f"Refusing to write {path}: it is not a plain file in "
                                     f"{dest}.")
        return job.run()
    except OSError as exc:  # the folder or the disk (network errors are httpx2's, not OSError)
        kept = f" {amount(job.done)} are kept." if job.done else ""
        raise DownloadError(f"Cannot write {exc.filename or dest}: {exc.strerror or exc}.{kept}"
                            ) from exc


def _read_in_bigger_pieces() -> None:
    """httpcore2 reads a response 64 KiB per call, and h11's cost per call then caps a fast
    transfer at ~0.8 of curl; 256 KiB reads keep up with curl (bench/download_bench.py). The
    size is a class attribute of its HTTP/1.1 connection, so this affects every httpx2 client in
    the process, in nothing but the read size. Skipped if a later httpcore2 moves it."""
    try:
        from httpcore2._sync.http11 import HTTP11Connection
    except ImportError:
        return
    if isinstance(getattr(HTTP11Connection, "READ_NUM_BYTES", None), int):
        HTTP11Connection.READ_NUM_BYTES = max(HTTP11Connection.READ_NUM_BYTES, _NET_READ)


class _Retry(Exception):
    def __init__(self, reason: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.retry_after = retry_after


class _Download:
    def __init__(self, repo: str, filename: str, revision: str, final: Path,
                 progress: ProgressCallback | None, cancel: threading.Event,
                 policy: RetryPolicy, on_retry: Callable[[RetryNotice], None] | None,
                 expected_sha256: str | None) -> None:
        self.repo, self.filename, self.revision, self.final = repo, filename, revision, final
        self.name = final.name
        self.part, self.record = part_path(final), record_path(final)
        self.progress, self.cancel, self.policy, self.on_retry = progress, cancel, policy, on_retry
        self.expected_sha256 = expected_sha256.lower() if expected_sha256 else None
        self.url = ""
        self.commit: str | None = None
        self.size = 0
        self.sha256 = ""
        self.validator = ""  # the byte server's strong ETag, for If-Range
        self.done = 0
        self.attempts = 0

    # -- the whole download ----------------------------------------------------------------------
    def run(self) -> Path:
        timeout = httpx2.Timeout(self.policy.read_timeout_s,
                                 connect=self.policy.connect_timeout_s)
        with hub.client(timeout) as c:
            self._retrying(lambda: self._metadata(c))
            if self.final.exists():
                return self._already_installed()
            resumable = self._resumable_bytes()
            self._check_space(self.size - resumable)
            fd = os.open(self.part, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
            with open(fd, "r+b", buffering=_READ_BLOCK) as f, Sha256Worker() as hasher:
                self._lock(f)
                try:
                    self._start(f, hasher, self._resumable_bytes())
                    self._transfer(c, f, hasher)
                    return self._install(f, hasher)
                except BaseException:
                    if self.done == 0:  # nothing worth keeping: leave no empty partial behind
                        with contextlib.suppress(OSError):
                            discard_partial(self.final)
                    raise

    def _metadata(self, c: hub.HubClient) -> None:
        meta = hub.file_metadata(c, self.repo, self.filename, self.revision)
        self.url, self.commit = meta.url, meta.commit
        sha, size = meta.sha256 or self.expected_sha256, meta.size
        if sha is None or size is None:
            listed = hub.lfs_sha256(c, self.repo, self.filename, self.commit or self.revision)
            sha = sha or (listed.sha256 if listed else None)
            size = size if size is not None else (listed.size if listed else None)
            if not sha and listed and listed.blob_id and 0 < listed.size <= MAX_GIT_FILE:
                sha = GIT_BLOB + listed.blob_id  # a small file kept in git, not LFS
        if not sha:
            raise DownloadError(f"The Hub gives no sha256 for {self.name}, so it could not be "
                                "verified; not downloading it.")
        if not size:
            raise DownloadError(f"The Hub gives no size for {self.name}; not downloading it.")
        self.sha256, self.size = sha, size

    def _retrying(self, step: Callable[[], None]) -> None:
        """Run a metadata step, retrying on the errors worth retrying."""
        failures = 0
        while True:
            try:
                return step()
            except hub.HubError as exc:
                if not exc.retryable:
                    raise
                failures += 1
                self._backoff(failures, str(exc), exc.retry_after, give_up=exc)

    def _backoff(self, failures: int, reason: str, retry_after: float | None,
                 give_up: Exception | None = None) -> None:
        self.attempts += 1
        if failures >= self.policy.max_failures or self.attempts >= self.policy.max_attempts:
            kept = (f" {amount(self.done)} are kept: run the download again to resume."
                    if self.done else "")
            raise DownloadError(f"Giving up on {self.name} after {self.attempts} tries: "
                                f"{reason.rstrip('.')}.{kept}") from give_up
        delay = self.policy.delay(failures, retry_after)
        if self.on_retry is not None:
            self.on_retry(RetryNotice(self.attempts, delay, reason))
        if self.cancel.wait(delay):
            self._cancelled()

    def _already_installed(self) -> Path:
        digest = (GIT_BLOB + _git_blob_id(self.final, self.size)
                  if self.sha256.startswith(GIT_BLOB) else sha256_file(self.final))
        if self.final.stat().st_size == self.size and digest == self.sha256:
            discard_partial(self.final)
            return self.final
        raise DownloadError(f"A different file named {self.name} is already in "
                            f"{self.final.parent}; remove it first.")

    # -- the partial file ------------------------------------------------------------------------
    def _resumable_bytes(self) -> int:
        """How much of an existing partial belongs to this same file and can be kept."""
        rec = read_record(self.record)
        try:
            have = self.part.stat().st_size
        except FileNotFoundError:
            return 0
        if rec is None or not rec.describes(self.repo, self.filename, self.sha256, self.size) \
                or have > self.size:
            return 0
        self.validator = rec.validator
        return have

    def _check_space(self, needed: int) -> None:
        free = shutil.disk_usage(self.final.parent).free
        if free < needed + DISK_MARGIN:
            raise InsufficientSpace(
                f"Not enough disk space for {self.name}: it needs {amount(needed)} more, and "
                f"{self.final.parent} has {amount(free)} free ({amount(DISK_MARGIN)} must stay "
                "free).")

    def _lock(self, f: BinaryIO) -> None:
        if fcntl is None:
            return
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise DownloadBusy(f"{self.name} is already being downloaded by another "
                               "Inglenook.") from None

    def _start(self, f: BinaryIO, hasher: Sha256Worker, keep: int) -> None:
        """Truncate to what can be kept, hash the kept bytes, write the resume record."""
        f.truncate(keep)
        self.done = keep
        with open(self.part, "rb") as old:
            for block in iter(lambda: old.read(_READ_BLOCK), b""):
                hasher.update([block])
                if self.cancel.is_set():
                    self._cancelled()
        f.seek(keep)
        self._write_record()

    def _restart(self, f: BinaryIO, hasher: Sha256Worker) -> None:
        f.seek(0)
        f.truncate(0)
        hasher.reset()
        self.done = 0

    def _write_record(self) -> None:
        write_record(self.record, ResumeRecord(
            self.repo, self.filename, self.revision, self.size, self.sha256, self.validator,
            self.commit, self.url))

    # -- the bytes -------------------------------------------------------------------------------
    def _transfer(self, c: hub.HubClient, f: BinaryIO, hasher: Sha256Worker) -> None:
        meter = ProgressMeter(self.size, self.done, self.progress)
        failures = 0
        while self.done < self.size:
            before = self.done
            try:
                self._fetch(c, f, hasher, meter)
                continue
            except _Retry as exc:
                failures = 1 if self.done > before else failures + 1
                self._backoff(failures, str(exc), exc.retry_after)
        meter.update(self.done, force=True)

    def _fetch(self, c: hub.HubClient, f: BinaryIO, hasher: Sha256Worker,
               meter: ProgressMeter) -> None:
        headers = {"Accept-Encoding": "identity"}
        if self.done:
            headers["Range"] = f"bytes={self.done}-"
            if self.validator:
                headers["If-Range"] = self.validator
        write = f.write
        batch: list[bytes] = []  # handed to the hasher ~1 MiB at a time: fewer thread hand-offs
        batched = 0
        c.watchdog.arm(self.policy.answer_deadline_s)
        try:
            with c.stream("GET", self.url, headers=headers) as response:
                c.watchdog.disarm()
                self._accept(response, f, hasher)
                for chunk in response.iter_raw():
                    # Never past the size the Hub announced: a body that does not end (no
                    # Content-Length) is cut there, and the sha256 says whether it was the file.
                    chunk = chunk[:self.size - self.done]
                    write(chunk)
                    self.done += len(chunk)
                    batch.append(chunk)
                    batched += len(chunk)
                    if batched >= _HASH_BATCH:
                        hasher.update(batch)
                        batch, batched = [], 0
                    if self.cancel.is_set():
                        self._cancelled()
                    meter.update(self.done)
                    if self.done >= self.size:
                        break  # leaving the block closes the connection: the rest is never read
                hasher.update(batch)
                batch = []
        except httpx2.RequestError as exc:
            if c.watchdog.fired:
                raise _Retry(str(hub.too_slow(self.url, self.policy.answer_deadline_s))) from None
            raise _Retry(str(hub.request_error(exc, self.url))) from None
        finally:
            c.watchdog.disarm()
            if batch:  # what was written before a failure is part of the partial: hash it
                hasher.update(batch)
        if self.done < self.size:
            raise _Retry(f"the connection ended at {amount(self.done)} of {amount(self.size)}")

    def _accept(self, response: httpx2.Response, f: BinaryIO, hasher: Sha256Worker) -> None:
        """Check the answer before taking its bytes; restart from zero when it is the whole
        file rather than the rest of it (a server that ignores Range)."""
        code = response.status_code
        if code in (429, 408) or code >= 500:
            raise _Retry(f"the server answered HTTP {code}", hub.retry_after(response))
        if code == 416 and self.done:
            self._restart(f, hasher)
            raise _Retry("the server refused to resume; starting again")
        if code >= 400 or code not in (200, 206):
            raise hub.status_error(response, f"{self.filename} in {self.repo}", self.repo)
        etag = response.headers.get("ETag", "")
        if etag and not etag.startswith("W/") and etag != self.validator:
            self.validator = etag
            self._write_record()
        if code == 206:
            m = CONTENT_RANGE.match(response.headers.get("Content-Range", ""))
            if m is None or int(m[1]) != self.done or m[3] not in ("*", str(self.size)):
                self._restart(f, hasher)
                raise _Retry("the server sent a different part of the file than asked for")
        elif self.done:  # 200: the whole file again
            self._restart(f, hasher)
        length = response.headers.get("Content-Length")
        if length is not None and length.isdigit() and self.done + int(length) != self.size:
            self._restart(f, hasher)
            raise _Retry("the server's file has a different size than the Hub said")

    # -- the end ---------------------------------------------------------------------------------
    def _install(self, f: BinaryIO, hasher: Sha256Worker) -> Path:
        f.flush()
        os.fsync(f.fileno())
        digest = hasher.hexdigest()
        if self.sha256.startswith(GIT_BLOB):
            digest = GIT_BLOB + _git_blob_id(self.part, self.size)
        if digest != self.sha256:
            discard_partial(self.final)
            raise ChecksumMismatch(
                f"{self.name} arrived corrupt: its sha256 is {digest[:16]}…, the Hub's is "
                f"{self.sha256[:16]}…. The partial download was deleted; try again.")
        if os.name == "nt":
            f.close()  # Windows cannot rename an open file (and has no flock to lose)
        os.replace(self.part, self.final)  # still locked: nobody else writes to it meanwhile
        _fsync_dir(self.final.parent)
        self.record.unlink(missing_ok=True)
        return self.final

    def _cancelled(self) -> None:
        raise DownloadCancelled(f"Paused {self.name} at {amount(self.done)} of "
                                f"{amount(self.size)}; the partial download is kept.", self.done)


def _git_blob_id(path: Path, size: int) -> str:
    """git's id of a file's bytes (sha1 of "blob SIZE\\0" and them): how the Hub names a file kept
    in git rather than LFS. Only small files are (MAX_GIT_FILE), so they are read again whole."""
    git = hashlib.sha1(f"blob {size}\0".encode(), usedforsecurity=False)
    git.update(path.read_bytes())
    return git.hexdigest()


def _fsync_dir(path: Path) -> None:
    if os.name != "posix":
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)



