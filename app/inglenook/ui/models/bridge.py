"""The download queue, reported on the GUI thread (through ui/tasks' relay, so a dialog closed
while a download runs simply stops hearing about it)."""

from __future__ import annotations

import threading
from pathlib import Path

from PySide6.QtCore import QCoreApplication, QObject, Signal

from inglenook.models.download import RetryPolicy
from inglenook.models.download_queue import DownloadManager, DownloadState, DownloadStatus
from inglenook.models.filenames import GGUF_ONLY
from inglenook.ui.tasks import ensure_relay, post_to_gui

CLOSE_TIMEOUT_S = 3.0  # a download stops at its next chunk; do not hold up quitting for long


class DownloadBridge(QObject):
    """Owns the DownloadManager and reports its changes on the GUI thread. It lives with the main
    window, not the Models dialog, so that downloads go on while the dialog is closed.

    Progress arrives many times a second; the latest status of each job is kept and delivered
    once per turn of the event loop, so a busy download never floods the GUI.

    Signals:
        changed(object): the latest DownloadStatus of one job.
        completed(object): a download finished and its file is installed; its DownloadStatus.
    """

    changed = Signal(object)
    completed = Signal(object)

    def __init__(self, parent: QObject | None = None, *, dest_dir: Path | None = None,
                 max_parallel: int = 1, policy: RetryPolicy | None = None) -> None:
        super().__init__(parent)
        ensure_relay()
        self.manager = DownloadManager(dest_dir, max_parallel=max_parallel,
                                       on_change=self._on_change, policy=policy)
        self._lock = threading.Lock()
        self._pending: dict[int, DownloadStatus] = {}
        self._posted = False
        self._closed = False
        self._completed: set[int] = set()
        app = QCoreApplication.instance()
        if app is not None:
            app.aboutToQuit.connect(self.close)

    # -- commands (GUI thread); what they change is reported before they return -------------------
    def add(self, repo: str, filename: str, revision: str = "main", *,
            dest_dir: Path | None = None, suffixes: tuple[str, ...] = GGUF_ONLY) -> int:
        """Queue a download; raises UnsafeFileName for a name that could not be saved safely."""
        job_id = self.manager.add(repo, filename, revision, dest_dir=dest_dir,
                                  suffixes=suffixes)
        self._flush()
        return job_id

    def pause(self, job_id: int) -> None:
        self.manager.pause(job_id)
        self._flush()

    def resume(self, job_id: int) -> None:
        self.manager.resume(job_id)
        self._flush()

    def cancel(self, job_id: int) -> None:
        """Stop the download and delete its partial file."""
        self.manager.cancel(job_id, delete=True)
        self._flush()

    def adopt_partials(self) -> list[int]:
        """Show downloads interrupted by a restart, paused (safe to call again)."""
        ids = self.manager.adopt_partials()
        self._flush()
        return ids

    def statuses(self) -> list[DownloadStatus]:
        return self.manager.statuses()

    def active(self) -> int:
        """Downloads queued or running."""
        return sum(s.state in (DownloadState.QUEUED, DownloadState.RUNNING)
                   for s in self.statuses())

    def close(self) -> None:
        """Pause what runs (the partial files are kept, to resume next time); idempotent."""
        if self._closed:
            return
        self.manager.close(CLOSE_TIMEOUT_S)
        with self._lock:
            self._closed = True

    # -- from the download threads ----------------------------------------------------------------
    def _on_change(self, status: DownloadStatus) -> None:
        with self._lock:
            if self._closed:
                return
            self._pending[status.id] = status
            if self._posted:
                return
            self._posted = True
        post_to_gui(self, "_flush")

    def _flush(self) -> None:
        with self._lock:
            pending, self._pending, self._posted = self._pending, {}, False
        for status in pending.values():
            self.changed.emit(status)
            if status.state is DownloadState.DONE and status.id not in self._completed:
                self._completed.add(status.id)
                self.completed.emit(status)
