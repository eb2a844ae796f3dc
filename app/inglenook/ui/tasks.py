"""Work off the GUI thread, and back: the one way the window runs something in the background.

`run(fn, *args, on_done=, on_failed=, owner=)` starts fn on a thread and returns a `Task`, one
handle per piece of work with its own signals, always delivered on the GUI thread (after
superqt's thread_worker). An answer is dropped, by handle, when it is stale: the task was
cancelled, a newer task replaced it (`replaces=`), or its owner was destroyed meanwhile. So a
dialog closed while a Hub search runs simply never hears of it, and a search typed over by the
next one cannot overwrite the newer answer. `from_future` does the same for a Future completed
on another thread (the MCP tool manager's), `debounce(ms, fn, parent)` coalesces bursts of calls
into one on the GUI thread.

Threads never touch widgets and never emit signals of objects that may be deleted under them:
they post to `_Relay`, one object that lives as long as the application.

At quit: threads that only read (Hub searches and listings, GGUF header reads, file hashes,
attachment reads, remote engines' model lists and connection tests, Markdown renders) may be
abandoned: they are daemon threads and their answers would be dropped anyway. Writers (anything
writing files or the database: conversation imports, model imports, quantizing; run with
`writer=True`) are joined by `join_writers()`, which MainWindow.shutdown calls, with a bounded
wait (WRITER_WAIT_S): past it they are abandoned too rather than hang the quit, and whatever they
write is made atomic or resumable where it is written.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import shiboken6
from PySide6.QtCore import QCoreApplication, QObject, Qt, QTimer, Signal

log = logging.getLogger(__name__)

WRITER_WAIT_S = 5.0  # at quit, all writers together
Callback = Callable[[Any], None]


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
_live: set[Task] = set()  # tasks not yet delivered: a handle the caller drops still answers
_writers: set[threading.Thread] = set()
_writers_lock = threading.Lock()


def ensure_relay() -> _Relay:
    """Create the relay; call it on the GUI thread (run() and the constructors that need it do)."""
    global _relay
    if _relay is None or not shiboken6.isValid(_relay):
        _relay = _Relay(QCoreApplication.instance())
    return _relay


def post_to_gui(target: QObject, method: str, *args: Any) -> None:
    """From any thread: call `target.method(*args)` on the GUI thread, unless target is gone."""
    relay = _relay
    if relay is not None:
        relay.posted.emit((weakref.ref(target), method, args))


class Task(QObject):
    """One piece of background work. Made on the GUI thread; its signals fire there.

    Signals:
        progress(object): a partial result the work reported (run(..., reports=True)).
        done(object): the work's return value.
        failed(object): the exception it raised.
    Exactly one of done and failed fires, after all of its progress, unless the task is stale
    (cancelled, replaced, or its owner destroyed): then nothing more fires.
    """

    progress = Signal(object)
    done = Signal(object)
    failed = Signal(object)

    def __init__(self, name: str, owner: QObject | None) -> None:
        super().__init__()  # no parent: an owner deleted under it must not delete it
        self.name = name
        self._owner = weakref.ref(owner) if owner is not None else None
        self.cancelled = False
        self.finished = False

    @property
    def stale(self) -> bool:
        if self.cancelled:
            return True
        if self._owner is None:
            return False
        owner = self._owner()
        return owner is None or not shiboken6.isValid(owner)

    @property
    def running(self) -> bool:
        return not self.finished and not self.cancelled

    def cancel(self) -> None:
        """Drop whatever this task still answers (the work itself runs on to its end)."""
        self.cancelled = True
        _live.discard(self)

    def _deliver(self, kind: str, value: object) -> None:
        if kind != "progress":
            self.finished = True
            _live.discard(self)
        if not self.stale:
            getattr(self, kind).emit(value)


def _start(name: str, owner: QObject | None, on_done: Callback | None,
           on_failed: Callback | None, on_progress: Callback | None,
           replaces: Task | None) -> Task:
    ensure_relay()
    if replaces is not None:
        replaces.cancel()
    task = Task(name, owner)
    if on_progress is not None:
        task.progress.connect(on_progress)
    if on_done is not None:
        task.done.connect(on_done)
    task.failed.connect(on_failed if on_failed is not None else
                        (lambda exc: log.warning("Background task %s failed: %r", name, exc)))
    _live.add(task)
    return task


def run(fn: Callable[..., Any], *args: Any, on_done: Callback | None = None,
        on_failed: Callback | None = None, on_progress: Callback | None = None,
        owner: QObject | None = None, replaces: Task | None = None, reports: bool = False,
        writer: bool = False, name: str = "", **kwargs: Any) -> Task:
    """Run fn(*args, **kwargs) on a new thread; with reports, fn(report, *args, **kwargs)
    where report(value) sends `progress`. Call on the GUI thread. `replaces`: a task this one
    supersedes (cancelled now). `writer`: the work writes files or the database, and quitting
    waits for it (join_writers). With no on_failed, a failure is logged."""
    name = name or getattr(fn, "__name__", "task")
    task = _start(name, owner, on_done, on_failed, on_progress, replaces)

    def report(value: object) -> None:
        post_to_gui(task, "_deliver", "progress", value)

    def work() -> None:
        try:
            result = fn(report, *args, **kwargs) if reports else fn(*args, **kwargs)
        except BaseException as exc:  # delivered, never raised on a bare thread
            post_to_gui(task, "_deliver", "failed", exc)
        else:
            post_to_gui(task, "_deliver", "done", result)
        finally:
            if writer:
                with _writers_lock:
                    _writers.discard(threading.current_thread())

    thread = threading.Thread(target=work, daemon=True, name=f"inglenook-{name}")
    if writer:
        with _writers_lock:
            _writers.add(thread)
    thread.start()
    return task


def from_future(future: Future[Any], *, on_done: Callback | None = None,
                on_failed: Callback | None = None, owner: QObject | None = None,
                name: str = "future") -> Task:
    """A Task for a Future completed on another thread; a cancelled future answers nothing."""
    task = _start(name, owner, on_done, on_failed, None, None)

    def completed(f: Future[Any]) -> None:  # on the thread that completed it
        if f.cancelled():
            post_to_gui(task, "cancel")
            return
        error = f.exception()
        post_to_gui(task, "_deliver", "done" if error is None else "failed",
                    f.result() if error is None else error)

    future.add_done_callback(completed)
    return task


def join_writers(timeout_s: float = WRITER_WAIT_S) -> list[str]:
    """Wait up to timeout_s in all for the writers still running (at quit); the names of
    those that did not finish, which are then abandoned."""
    deadline = time.monotonic() + timeout_s
    with _writers_lock:
        writers = list(_writers)
    for thread in writers:
        thread.join(max(0.0, deadline - time.monotonic()))
    late = [t.name for t in writers if t.is_alive()]
    if late:
        log.warning("Quitting while still writing: %s", ", ".join(late))
    return late


class Debounced(QObject):
    """fn called once, `ms` after the last of a burst of call()s, on the GUI thread."""

    def __init__(self, ms: int, fn: Callable[[], Any], parent: QObject) -> None:
        super().__init__(parent)
        self._fn = fn
        self._timer = QTimer(self, singleShot=True, interval=ms)
        self._timer.timeout.connect(fn)

    @property
    def pending(self) -> bool:
        return self._timer.isActive()

    def call(self) -> None:
        """(Re)start the wait: fn runs `ms` from now unless called again before."""
        self._timer.start()

    def flush(self) -> None:
        """Run fn now if a call is pending."""
        if self._timer.isActive():
            self._timer.stop()
            self._fn()

    def cancel(self) -> None:
        self._timer.stop()


def debounce(ms: int, fn: Callable[[], Any], parent: QObject) -> Debounced:
    return Debounced(ms, fn, parent)
