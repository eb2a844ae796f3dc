"""Work off the GUI thread for the Models page: the download queue and one-shot background tasks.

Background threads never touch widgets or emit signals of objects that may be deleted under them.
They hand a call to `_Relay`, one object that lives as long as the application, which runs it on
the GUI thread, and only if its target still exists. So a dialog that is closed and deleted while
a search or a download is still running simply stops hearing about it.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import shiboken6
from PySide6.QtCore import QCoreApplication, QObject, Qt, Signal

from inglenook.models.download import RetryPolicy
from inglenook.models.download_queue import DownloadManager, DownloadState, DownloadStatus

CLOSE_TIMEOUT_S = 3.0  # a download stops at its next chunk; do not hold up quitting for long


class _Relay(QObject):
    """Runs calls posted from any thread on the GUI thread (a queued signal to itself)."""

    posted = Signal(object)

    def __init__(self, parent: QObject | None) -> None:
        super().__init__(parent)
        self.posted.connect(self._run, Qt.ConnectionType.QueuedConnection)

    def _run(self, call: tuple[weakref.ref[QObject], str, tuple[Any, ...]]) -> None:
        ref, method, args = call
        target = ref()
        if target is not None and shiboken6.isValid(target):
            getattr(target, method)(*args)


_relay: _Relay | None = None


def _ensure_relay() -> _Relay:
    """Create the relay; call it on the GUI thread (constructors below do)."""
    global _relay
    if _relay is None or not shiboken6.isValid(_relay):
        _relay = _Relay(QCoreApplication.instance())
    return _relay


def post_to_gui(target: QObject, method: str, *args: Any) -> None:
    """From any thread: call `target.method(*args)` on the GUI thread, unless target is gone."""
    relay = _relay
    if relay is not None:
        relay.posted.emit((weakref.ref(target), method, args))


class BackgroundTasks(QObject):
    """Runs functions on daemon threads (a network read that hangs never holds up quitting) and
    hands their outcomes back on the GUI thread, tagged with the caller's key so that stale
    answers can be told apart.

    Signals:
        progress(object, object): a task's key and a partial result it reported.
        done(object, object): a task's key and its return value.
        failed(object, object): a task's key and the exception it raised.
    Exactly one of done and failed fires per task, after all of its progress.
    """

    progress = Signal(object, object)
    done = Signal(object, object)
    failed = Signal(object, object)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        _ensure_relay()
        self.running = 0

    def start(self, key: object, fn: Callable[..., Any], *args: Any, reports: bool = False,
              **kwargs: Any) -> None:
        """Run fn(*args, **kwargs) on a thread; with reports, fn(report, *args, **kwargs) where
        report(value) sends a `progress` signal."""
        self.running += 1

        def report(value: object) -> None:
            post_to_gui(self, "_deliver", "progress", key, value)

        def run() -> None:
            try:
                result = fn(report, *args, **kwargs) if reports else fn(*args, **kwargs)
            except BaseException as exc:  # delivered, never raised on a bare thread
                post_to_gui(self, "_deliver", "failed", key, exc)
            else:
                post_to_gui(self, "_deliver", "done", key, result)

        threading.Thread(target=run, daemon=True, name=f"inglenook-task-{key}").start()

    def _deliver(self, kind: str, key: object, value: object) -> None:
        if kind != "progress":
            self.running -= 1
        getattr(self, kind).emit(key, value)


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
        _ensure_relay()
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
    def add(self, repo: str, filename: str, revision: str = "main") -> int:
        """Queue a download; raises UnsafeFileName for a name that could not be saved safely."""
        job_id = self.manager.add(repo, filename, revision)
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
