"""Telling when a collection's files change, so that it is indexed again without being asked.

On watchdog (inotify, FSEvents, ReadDirectoryChangesW), with the events that change what the
index holds: files and folders made, written, closed after writing, moved or deleted. Opening
and reading are not among them, so the indexer reading a folder never sets off its own run.
Events come in bursts (a `git checkout`, an editor's save through a temporary file): a
collection is reported once its folders have been quiet for `debounce_s`.

Links are not followed by the watch (the scanner decides what a link means). A file given as
a root is watched through its folder, and only its own events count. Where a collection cannot
be watched live (a folder missing, or the system's limit on watched folders reached:
Linux's fs.inotify.max_user_watches), it is reported every `rescan_s` instead: the incremental
index compares sizes and times first, so a run with nothing changed reads no file. `status`
says which, in one sentence.

Everything that can take long (adding the watches of 100,000 folders) happens on the watcher's
own thread: `watch` and `unwatch` only say what is wanted.
"""

from __future__ import annotations

import errno
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from watchdog import events
from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver

from inglenook.knowledge.scanner import SKIPPED_FOLDERS

DEBOUNCE_S = 2.0
RESCAN_S = 300.0
CHANGES: list[type[FileSystemEvent]] = [
    events.FileCreatedEvent, events.FileDeletedEvent, events.FileModifiedEvent,
    events.FileMovedEvent, events.FileClosedEvent, events.DirCreatedEvent,
    events.DirDeletedEvent, events.DirMovedEvent]


@dataclass
class _Watched:
    roots: tuple[str, ...]
    observer: BaseObserver | None = None  # one per collection: two may share a folder
    files: set[str] = field(default_factory=set)  # roots that are files: only these count
    status: str = ""  # "" watched live
    due: float | None = None  # when to report it (monotonic); None: nothing pending


class Watcher:
    """Reports `on_change(name)` on its own thread when a watched collection's files changed.
    `make_observer` is for tests (an observer whose watches fail)."""


    def __init__(self, on_change: Callable[[str], None], debounce_s: float = DEBOUNCE_S,
                 rescan_s: float = RESCAN_S,
                 make_observer: Callable[[], BaseObserver] = Observer) -> None:
        self.on_change = on_change
        self.debounce_s, self.rescan_s = debounce_s, rescan_s
        self._make_observer = make_observer
        self._lock = threading.Condition()
        self._watched: dict[str, _Watched] = {}
        self._wanted: dict[str, tuple[str, ...] | None] = {}  # to (re)watch, or None to drop
        self._status: dict[str, str] = {}  # kept while a collection is watched again
        self._closed = False
        self._busy = False  # watches being set up or taken down
        self._thread = threading.Thread(target=self._run, name="knowledge-watch", daemon=True)
        self._thread.start()

    # ---- asked from any thread ------------------------------------------------------------
    def watch(self, name: str, roots: Sequence[str]) -> None:
        """Watch these roots for the collection (again, if its roots changed)."""
        with self._lock:
            self._wanted[name] = tuple(roots)
            self._lock.notify_all()

    def unwatch(self, name: str) -> None:
        with self._lock:
            self._wanted[name] = None
            self._lock.notify_all()

    def names(self) -> list[str]:
        with self._lock:
            return sorted(n for n in {*self._watched, *self._wanted}
                          if self._wanted.get(n, ()) is not None)

    def status(self, name: str) -> str:
        """Why the collection is looked at again every few minutes instead of watched live
        ("" it is watched live, or not watched at all)."""
        with self._lock:
            return self._status.get(name, "")

    def settled(self) -> bool:
        """Every watch asked for is in place (tests wait for this before changing files)."""
        with self._lock:
            return not self._wanted and not self._busy

    def wait_settled(self, timeout: float | None = None) -> bool:
        """Wait until every watch asked for is in place (setting up 100,000 folders takes
        seconds); False if `timeout` passed first."""
        with self._lock:
            return self._lock.wait_for(lambda: not self._wanted and not self._busy, timeout)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._lock.notify_all()
        self._thread.join(timeout=5)
        for name in list(self._watched):
            self._drop(name)

    # ---- the watcher's thread -------------------------------------------------------------
    def _run(self) -> None:
        while True:
            with self._lock:
                if self._closed:
                    return
                wanted, self._wanted = self._wanted, {}
                self._busy = bool(wanted)
            for name, roots in wanted.items():
                due = self._drop(name)
                if roots is not None:
                    self._start(name, roots, due)
                else:
                    with self._lock:
                        self._status.pop(name, None)
            with self._lock:
                self._busy = False
                self._lock.notify_all()
            for name in self._pop_due():
                self.on_change(name)
            with self._lock:
                if self._closed:
                    return
                if not self._wanted:
                    self._lock.wait(timeout=self._next_wait())

    def _drop(self, name: str) -> float | None:
        """Stop watching; when it was due to be reported (kept by a watch started again)."""
        with self._lock:
            old = self._watched.pop(name, None)
        if old and old.observer:
            old.observer.stop()
            old.observer.join(timeout=5)
        return old.due if old else None

    def _start(self, name: str, roots: tuple[str, ...], due: float | None = None) -> None:
        watched = _Watched(roots, due=due)
        handler = _Handler(self, name, watched)
        folders: dict[str, bool] = {}  # folder: recursive
        for root in roots:
            if not os.path.lexists(root):
                watched.status = f"{root} is missing: it is looked for again {self._every}."
            elif os.path.isdir(root) and not os.path.islink(root):
                folders[root] = True
            else:
                watched.files.add(root)
                folders.setdefault(os.path.dirname(root), False)
        observer = self._make_observer()
        observer.daemon = True
        observer.start()
        for folder, recursive in folders.items():
            if watched.status:
                break
            try:
                observer.schedule(handler, folder, recursive=recursive, event_filter=CHANGES)
            except OSError as exc:
                watched.status = self._why(folder, exc)
        if not watched.status:
            watched.observer = observer
            with self._lock:
                if self._status.get(name):  # back from the timer: changes meanwhile unseen
                    watched.due = time.monotonic()
        else:  # looked at again on a timer, not watched at all
            observer.stop()
            observer.join(timeout=5)
            watched.due = min(due or float("inf"), time.monotonic() + self.rescan_s)
        with self._lock:
            self._watched[name] = watched
            self._status[name] = watched.status

    @property
    def _every(self) -> str:
        if self.rescan_s < 60:
            return f"every {self.rescan_s:g} seconds"
        return f"every {self.rescan_s / 60:g} minutes"

    def _why(self, folder: str, exc: OSError) -> str:
        minutes = self._every
        if exc.errno == errno.ENOSPC:
            return ("The system's limit on watched folders is reached (on Linux, "
                    f"fs.inotify.max_user_watches): changes are looked for {minutes}.")
        if not os.path.exists(folder):
            return f"{folder} is missing: it is looked for again {minutes}."
        return f"{folder} cannot be watched ({exc.strerror or exc}): looked at {minutes}."

    def _pop_due(self) -> list[str]:
        now = time.monotonic()
        with self._lock:
            due = [n for n, w in self._watched.items() if w.due is not None and w.due <= now]
            for name in due:
                w = self._watched[name]
                w.due = None
                if w.status:  # try to watch it live again (a folder back, watches freed)
                    self._wanted.setdefault(name, w.roots)
        return due

    def _next_wait(self) -> float | None:
        pending = [w.due for w in self._watched.values() if w.due is not None]
        return max(0.0, min(pending) - time.monotonic()) if pending else None

    def _changed(self, name: str, watched: _Watched, root_gone: bool) -> None:
        """An event that counts: report the collection once it has been quiet a while. A root
        deleted or moved away takes its watch with it: watched again (missing: on a timer)."""
        with self._lock:
            watched.due = time.monotonic() + self.debounce_s
            if root_gone and self._watched.get(name) is watched:
                self._wanted.setdefault(name, watched.roots)
            self._lock.notify_all()


class _Handler(FileSystemEventHandler):
    def __init__(self, watcher: Watcher, name: str, watched: _Watched) -> None:
        self.watcher, self.name, self.watched = watcher, name, watched

    def dispatch(self, event: FileSystemEvent) -> None:
        source = os.fsdecode(event.src_path)
        paths = [source, os.fsdecode(event.dest_path or b"")]
        if any(self._counts(p) for p in paths if p):
            root_gone = (isinstance(event, (events.DirDeletedEvent, events.DirMovedEvent))
                         and source in self.watched.roots)
            self.watcher._changed(self.name, self.watched, root_gone)

    def _counts(self, path: str) -> bool:
        if self.watched.files and not any(r for r in self.watched.roots
                                          if path == r or path.startswith(r + os.sep)):
            return False  # a neighbour of a file given as a root
        return not SKIPPED_FOLDERS.intersection(path.split(os.sep))
