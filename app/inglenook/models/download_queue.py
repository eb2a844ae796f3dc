"""A queue of downloads on background threads, with pause, resume and cancel.

Qt-free: every change is reported as a `DownloadStatus` through `on_change`, called on a download
thread (or on the caller's thread for pause/cancel of a job that is not running); a Qt worker
forwards these as queued signals. Pause and cancel are direct calls that set the job's event,
so they take effect at the next chunk rather than waiting behind the transfer.
"""

from __future__ import annotations

import contextlib
import enum
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from inglenook import paths
from inglenook.models import download as dl
from inglenook.models.filenames import GGUF_ONLY, UnsafeFileName, saved_name
from inglenook.models.hub import HubError
from inglenook.models.partials import discard_partial, find_partials


class DownloadState(enum.Enum):
    QUEUED = "queued"
    RUNNING = "running"
    PAUSED = "paused"  # the partial file is kept; resume() continues from it
    DONE = "done"
    FAILED = "failed"  # message says why; resume() tries again from the partial
    CANCELLED = "cancelled"


@dataclass(frozen=True)
class DownloadStatus:
    id: int
    repo: str
    filename: str
    revision: str
    state: DownloadState
    done_bytes: int = 0
    total_bytes: int = 0
    bytes_per_s: float = 0.0
    eta_s: float | None = None
    message: str = ""
    path: Path | None = None  # the installed file, once DONE
    dest_dir: Path | None = None  # where it goes, when not the models folder (a speech model)


@dataclass
class _Job:
    status: DownloadStatus
    cancel: threading.Event = field(default_factory=threading.Event)
    delete_partial: bool = False
    stop_as: DownloadState = DownloadState.PAUSED  # what a stop of the running thread means
    thread: threading.Thread | None = None
    suffixes: tuple[str, ...] = GGUF_ONLY  # the file names it may have (filenames.local_name)


class DownloadManager:
    """Runs up to `max_parallel` downloads at once; the rest wait in order."""

    def __init__(self, dest_dir: Path | None = None, *, max_parallel: int = 1,
                 on_change: Callable[[DownloadStatus], None] | None = None,
                 policy: dl.RetryPolicy | None = None) -> None:
        self.dest_dir = Path(dest_dir) if dest_dir else paths.models_dir()
        self.max_parallel = max_parallel
        self.on_change = on_change
        self.policy = policy
        self._jobs: dict[int, _Job] = {}
        self._lock = threading.Lock()
        self._next_id = 1
        self._closed = False
        self._watchers: list[Callable[[DownloadStatus], None]] = []

    # -- commands --------------------------------------------------------------------------------
    def add(self, repo: str, filename: str, revision: str = "main", *,
            dest_dir: Path | None = None, suffixes: tuple[str, ...] = GGUF_ONLY) -> int:
        """Queue a download (the same file already queued, running or paused keeps its job).
        `dest_dir` and `suffixes`: a speech model's files, in a folder of their own."""
        saved_name(repo, filename, suffixes)  # refuse unsafe names now, not on a thread later
        with self._lock:
            for job in self._jobs.values():
                s = job.status
                if (s.repo, s.filename) == (repo, filename) and s.state in (
                        DownloadState.QUEUED, DownloadState.RUNNING, DownloadState.PAUSED):
                    return s.id
            job_id = self._new_job(repo, filename, revision, DownloadState.QUEUED)
            if dest_dir is not None:
                job = self._jobs[job_id]
                job.suffixes = suffixes
                job.status = replace(job.status, dest_dir=Path(dest_dir))
        self._notify(job_id)
        self._schedule()
        return job_id

    def adopt_partials(self) -> list[int]:
        """Paused jobs for the partial downloads left in the folder (after a restart)."""
        ids = []
        for partial in find_partials(self.dest_dir):
            with self._lock:
                if any(j.status.filename == partial.filename and j.status.repo == partial.repo
                       for j in self._jobs.values()):
                    continue
                job_id = self._new_job(partial.repo, partial.filename, partial.revision,
                                       DownloadState.PAUSED)
                job = self._jobs[job_id]
                job.status = replace(job.status, done_bytes=partial.done_bytes,
                                     total_bytes=partial.size)
            ids.append(job_id)
            self._notify(job_id)
        return ids

    def pause(self, job_id: int) -> None:
        self._stop(job_id, DownloadState.PAUSED, delete=False)

    def cancel(self, job_id: int, delete: bool = True) -> None:
        """Stop and forget the download; with delete, its partial file goes too."""
        self._stop(job_id, DownloadState.CANCELLED, delete=delete)

    def resume(self, job_id: int) -> None:
        with self._lock:
            job = self._jobs[job_id]
            if job.status.state not in (DownloadState.PAUSED, DownloadState.FAILED):
                return
            job.cancel = threading.Event()
            job.delete_partial = False
            job.stop_as = DownloadState.PAUSED
            job.status = replace(job.status, state=DownloadState.QUEUED, message="")
        self._notify(job_id)
        self._schedule()

    def watch(self, listener: Callable[[DownloadStatus], None]) -> Callable[[], None]:
        """Hear every change besides `on_change` (an API pull following its own jobs), on the
        same threads; returns the call that stops it."""
        with self._lock:
            self._watchers.append(listener)

        def unwatch() -> None:
            with self._lock:
                if listener in self._watchers:
                    self._watchers.remove(listener)

        return unwatch

    def status(self, job_id: int) -> DownloadStatus:
        with self._lock:
            return self._jobs[job_id].status

    def statuses(self) -> list[DownloadStatus]:
        with self._lock:
            return [j.status for j in self._jobs.values()]

    def wait(self, job_id: int, timeout: float | None = None) -> DownloadStatus:
        """Block until the job's thread ends (tests, the command line)."""
        with self._lock:
            thread = self._jobs[job_id].thread
        if thread is not None:
            thread.join(timeout)
        return self.status(job_id)

    def close(self, timeout: float = 10.0) -> None:
        """Pause whatever runs (partials are kept) and wait for the threads to end."""
        with self._lock:
            self._closed = True
            running = [j for j in self._jobs.values() if j.thread is not None]
            for job in running:
                job.cancel.set()
        for job in running:
            if job.thread is not None:
                job.thread.join(timeout)

    # -- inside ----------------------------------------------------------------------------------
    def _new_job(self, repo: str, filename: str, revision: str, state: DownloadState) -> int:
        job_id = self._next_id
        self._next_id += 1
        self._jobs[job_id] = _Job(DownloadStatus(job_id, repo, filename, revision, state))
        return job_id

    def _stop(self, job_id: int, state: DownloadState, delete: bool) -> None:
        with self._lock:
            job = self._jobs[job_id]
            job.delete_partial = delete
            running = job.thread is not None
            if running:  # the thread sets the final state when it stops
                job.status = replace(job.status, message="stopping…")
                job.stop_as = state
                job.cancel.set()
            elif job.status.state in (DownloadState.QUEUED, DownloadState.PAUSED,
                                      DownloadState.FAILED):
                job.status = replace(job.status, state=state, bytes_per_s=0.0, eta_s=None)
        if not running and delete and state is DownloadState.CANCELLED:
            self._discard(job)
        self._notify(job_id)

    def _discard(self, job: _Job) -> None:
        status = job.status
        with contextlib.suppress(UnsafeFileName):  # add() checked it; a record might not be
            discard_partial((status.dest_dir or self.dest_dir)
                            / saved_name(status.repo, status.filename, job.suffixes))

    def _schedule(self) -> None:
        with self._lock:
            if self._closed:
                return
            running = sum(j.thread is not None for j in self._jobs.values())
            for job in self._jobs.values():
                if running >= self.max_parallel:
                    break
                if job.status.state is DownloadState.QUEUED and job.thread is None:
                    job.status = replace(job.status, state=DownloadState.RUNNING)
                    job.thread = threading.Thread(target=self._run, args=(job,), daemon=True,
                                                  name=f"download-{job.status.id}")
                    job.thread.start()
                    running += 1

    def _run(self, job: _Job) -> None:
        s = job.status
        self._notify(s.id)
        final_state, message, path = DownloadState.FAILED, "", None
        try:
            path = dl.download_file(s.repo, s.filename, s.revision, s.dest_dir or self.dest_dir,
                                    progress=lambda *p: self._progress(job, *p),
                                    cancel=job.cancel, policy=self.policy,
                                    on_retry=lambda n: self._retrying(job, n),
                                    suffixes=job.suffixes)
            final_state = DownloadState.DONE
        except dl.DownloadCancelled as exc:
            final_state = job.stop_as
            message = str(exc) if final_state is DownloadState.PAUSED else ""
        except (dl.DownloadError, HubError, UnsafeFileName) as exc:
            message = str(exc)
        except Exception as exc:  # a bug must still end the job, visibly
            message = f"Unexpected error: {type(exc).__name__}: {exc}"
        if final_state is DownloadState.CANCELLED and job.delete_partial:
            self._discard(job)
        with self._lock:
            job.thread = None
            job.status = replace(job.status, state=final_state, message=message, path=path,
                                 bytes_per_s=0.0, eta_s=None)
        self._notify(s.id)
        self._schedule()

    def _progress(self, job: _Job, done: int, total: int, speed: float,
                  eta: float | None) -> None:
        with self._lock:
            job.status = replace(job.status, done_bytes=done, total_bytes=total,
                                 bytes_per_s=speed, eta_s=eta, message="")
        self._notify(job.status.id)

    def _retrying(self, job: _Job, notice: dl.RetryNotice) -> None:
        with self._lock:
            job.status = replace(job.status, message=f"{notice.reason} Retrying in "
                                 f"{notice.delay_s:.0f} s.")
        self._notify(job.status.id)

    def _notify(self, job_id: int) -> None:
        status = self.status(job_id)
        if self.on_change is not None:
            self.on_change(status)
        with self._lock:
            watchers = list(self._watchers)
        for listener in watchers:
            listener(status)
