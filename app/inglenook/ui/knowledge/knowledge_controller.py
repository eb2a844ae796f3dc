"""The window's knowledge collections: changes made on the GUI thread, indexing on a worker.

Owned by the window, not by the Knowledge dialog, so an indexing run goes on (and is shown
again) when the dialog is closed and opened. One run at a time; collections asked for while one
runs wait their turn. Cancel is a direct call that sets a flag the Indexer asks between files:
what was indexed stays, consistent, and the next run goes on from there. A rebuild is such a run
that reads every file again from scratch (Indexer's rebuild); cancelled, the next run finishes it.

Watched collections (the default) are indexed again when their files change (Watcher, on a
thread of its own; a burst of changes is one run), and once at start-up for what changed while
the app was closed: a run with nothing changed compares sizes and times and reads no file. The
GUI thread opens
an index of its own for each change (SqliteFtsIndex is one per thread); SQLite's WAL lets it read
while the worker writes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import TypeVar

from PySide6.QtCore import QObject, QTimer, Signal

from inglenook.knowledge import collections as kc
from inglenook.knowledge.fts import Collection, KnowledgeError, SqliteFtsIndex
from inglenook.knowledge.indexer import IndexReport, Progress
from inglenook.knowledge.vectors import Embedder
from inglenook.knowledge.watch import Watcher
from inglenook.ui import tasks

PROGRESS_MS = 100  # how often the GUI looks at where the run is
T = TypeVar("T")


class KnowledgeController(QObject):
    """Signals:
        changed(): collections, their folders or their index changed (lists to refresh).
        summaries_ready(object): the collections as read again after a change (a list of
            CollectionSummary; also kept in `summaries`).
        progress(str, object): the collection being indexed, and its Progress.
        indexed(str, object): a run ended: the collection and its IndexReport.
        failed(str, str): a run or a change failed: the collection, one sentence.
        moved(str, str): a change of where a collection's vectors live ended: the
            collection, and "" done or why not (one sentence; nothing was changed).
        deleted(str): a collection was forgotten (its passages and vectors deleted).
    """

    changed = Signal()
    summaries_ready = Signal(object)
    progress = Signal(str, object)
    indexed = Signal(str, object)
    failed = Signal(str, str)
    moved = Signal(str, str)
    deleted = Signal(str)
    _files_changed = Signal(str)  # from the watcher's thread

    def __init__(self, parent: QObject | None = None,
                 embedder_for: Callable[[str], Embedder] | None = None) -> None:
        """`embedder_for(model path)`: what gives a collection's passages their vectors
        (None: collections that name an embedding model get none, and say so)."""
        super().__init__(parent)
        self.embedder_for = embedder_for
        self.running = ""  # the collection being indexed, "" when none
        self.running_rebuild = False  # whether that run is a rebuild
        self._rebuilds: set[str] = set()  # waiting collections whose run is to be a rebuild
        self.last_progress: Progress | None = None
        self.queue: list[str] = []
        self._stop = threading.Event()
        self._task: tasks.Task | None = None
        # Where the run is, as the worker last said: read by a timer on the GUI thread, so a
        # run of 100,000 files posts nothing per file and a run held on one file shows it.
        self._latest: Progress | None = None
        self._poll = QTimer(self, interval=PROGRESS_MS)
        self._poll.timeout.connect(self._look)
        self.summaries: list[kc.CollectionSummary] | None = None  # as last read
        self._reading: tasks.Task | None = None
        self._forgotten: set[str] = set()  # deleted while being indexed
        self.moving: dict[str, tuple[str, str]] = {}  # collection → (backend, URL) being tried
        self.changing = 0  # changes made off the GUI thread not yet done (delete, model)
        self.changed.connect(self.read_summaries)
        self.watcher: Watcher | None = None  # made by start_watching
        self._watching: dict[str, tuple[str, ...]] = {}  # what the watcher was given
        self._caught_up = False
        self._files_changed.connect(self._on_files_changed)

    # ---- reading and changing, on the GUI thread --------------------------------------------
    def _with_index(self, action: Callable[[SqliteFtsIndex], T]) -> T:
        index = SqliteFtsIndex()
        try:
            return action(index)
        finally:
            index.close()

    def read_summaries(self) -> None:
        """Read the collections and their figures again, off the GUI thread (counting the
        passages of a large collection reads its whole index): `summaries_ready` follows."""
        def read() -> list[kc.CollectionSummary]:
            return self._with_index(kc.summaries)

        self._reading = tasks.run(read, owner=self, replaces=self._reading,
                                  name="knowledge-list", on_done=self._read,
                                  on_failed=lambda exc: self.failed.emit("", str(exc)))

    def _read(self, found: list[kc.CollectionSummary]) -> None:
        self.summaries = found
        self._sync_watches(found)
        self.summaries_ready.emit(found)

    # ---- watching ---------------------------------------------------------------------------
    def start_watching(self) -> None:
        """Watch the collections that ask for it, and index them once for what changed while
        the app was closed (when the collections have been read, off the GUI thread)."""
        if self.watcher is None:
            self.watcher = Watcher(self._files_changed.emit)
            self.read_summaries()

    def _sync_watches(self, found: list[kc.CollectionSummary]) -> None:
        if self.watcher is None:
            return
        wanted = {s.name: s.roots for s in found if s.watch and s.roots}
        for name in set(self._watching) - set(wanted):
            self.watcher.unwatch(name)
        for name, roots in wanted.items():
            if self._watching.get(name) != roots:
                self.watcher.watch(name, roots)
        self._watching = wanted
        if not self._caught_up:
            self._caught_up = True
            for s in found:
                if s.name in wanted and s.indexed_at is not None:
                    self.index(s.name)

    def _on_files_changed(self, name: str) -> None:
        if name in self._watching:
            self.index(name)

    def watch_status(self, name: str) -> str:
        """How the collection's files are watched, in one sentence ("" not watched)."""
        if self.watcher is None or name not in self._watching:
            return ""
        return self.watcher.status(name) or "Indexed again when its files change."

    def set_watch(self, name: str, watch: bool) -> None:
        self._with_index(lambda index: index.set_watch(name, watch))
        self.changed.emit()
        if watch:
            self.index(name)  # what changed while it was not watched

    def set_follow_links(self, name: str, follow: bool) -> None:
        """Follow symbolic links out of its folders, or not: indexed again at once (files
        reached through such links come, or leave)."""
        self._with_index(lambda index: index.set_follow_links(name, follow))
        self.changed.emit()
        self.index(name)

    def names(self) -> list[str]:
        try:
            return kc.collection_names()
        except KnowledgeError:
            return []

    def create(self, name: str) -> str:
        """A new, empty collection; its name as kept (KnowledgeError: taken, empty)."""
        made = self._with_index(lambda index: index.create_collection(name, []))
        self.changed.emit()
        return made.name

    def add_paths(self, name: str, paths: Iterable[str]) -> None:
        """Add folders or files, then index the collection (KnowledgeError: a path missing)."""
        given = list(paths)
        self._with_index(lambda index: kc.add_paths(index, name, given))
        self.changed.emit()
        self.index(name)

    def remove_paths(self, name: str, paths: Iterable[str]) -> None:
        gone = list(paths)
        self._with_index(lambda index: kc.remove_paths(index, name, gone))
        self.changed.emit()
        self.index(name)  # their passages leave the index

    def delete(self, name: str) -> None:
        """Forget a collection (its files are not touched), off the GUI thread: a large one's
        passages, full-text rows and vectors take seconds to delete. A run of it is cancelled
        first; `deleted` or `failed` follows."""
        if name in self.queue:
            self.queue.remove(name)
        self._rebuilds.discard(name)
        if self.running == name:
            self._stop.set()
            self._forgotten.add(name)  # its run's end, cancelled or "no such collection"

        def remove(index: SqliteFtsIndex) -> Collection:
            gone = index.collection(name)
            index.remove_collection(name, drop=False)
            return gone

        self._change(lambda: self._with_index(remove), "knowledge-delete",
                     lambda gone: self._deleted(name, gone), name)

    def _change(self, work: Callable[[], T], task: str, done: Callable[[T], None],
                name: str) -> None:
        """A change of the index off the GUI thread (`changing` counts it until it ends)."""
        self.changing += 1

        def ended(value: T) -> None:
            self.changing -= 1
            done(value)

        def failed(exc: BaseException) -> None:
            self.changing -= 1
            self.failed.emit(name, str(exc))

        tasks.run(work, owner=self, writer=True, name=task, on_done=ended, on_failed=failed)

    def _deleted(self, name: str, gone: Collection) -> None:
        self.deleted.emit(name)
        self.changed.emit()
        if gone.backend == "qdrant":  # its Qdrant collection goes too (a server may be slow)
            def dropped(note: str) -> None:
                if note:  # its vectors stay on the server: said, with their collection
                    self.failed.emit(name, note)

            tasks.run(lambda: self._with_index(lambda index: index.drop_vectors(gone)),
                      owner=self, writer=True, name="knowledge-drop", on_done=dropped,
                      on_failed=lambda exc: self.failed.emit(name, str(exc)))

    def set_backend(self, name: str, backend: str, qdrant_url: str = "") -> None:
        """Keep the collection's vectors in `backend` ("" this database, "qdrant" at
        `qdrant_url`, "" local mode), off the GUI thread: the place is tried first (a server
        may take TIMEOUT_S to answer) and a refusal changes nothing; `moved` follows. The
        vectors it had are dropped, and a run embeds its passages again there."""
        self.moving[name] = (backend, qdrant_url.strip())

        def work(index: SqliteFtsIndex) -> tuple[Collection, list[kc.CollectionSummary]]:
            # Read again with it: the dialog shows the new place as the move is reported.
            return kc.move_vectors(index, name, backend, qdrant_url), kc.summaries(index)

        tasks.run(lambda: self._with_index(work), owner=self, writer=True,
                  name="knowledge-backend", on_done=lambda done: self._moved(name, *done),
                  on_failed=lambda exc: self._not_moved(name, exc))

    def _moved(self, name: str, moved: Collection, found: list[kc.CollectionSummary]) -> None:
        self.moving.pop(name, None)
        self._read(found)
        self.moved.emit(name, "")
        self.changed.emit()
        if moved.embed_model and moved.roots:
            self.index(moved.name)  # its passages embedded again, there

    def _not_moved(self, name: str, exc: BaseException) -> None:
        self.moving.pop(name, None)
        self.moved.emit(name, str(exc) if isinstance(exc, KnowledgeError)
                        else f"The vectors of {name} could not be moved: {exc!r}")

    def set_embed_model(self, name: str, model: str) -> None:
        """Give the collection's passages vectors of this model ("" full text only): its
        vectors of another model go (off the GUI thread: 500,000 of them take a second), and
        a run makes the new ones; `failed` says why not."""
        def chosen(_: object) -> None:
            self.changed.emit()
            if model:
                self.index(name)

        self._change(lambda: self._with_index(lambda index: index.set_embed_model(name, model)),
                     "knowledge-embed-model", chosen, name)

    def embedding_choices(self, on_done: Callable[[list[kc.EmbeddingChoice]], None]) -> None:
        """The library's models a collection can embed with, read off the GUI thread."""
        tasks.run(kc.embedding_choices, owner=self, name="embedding-choices", on_done=on_done)

    # ---- indexing, on a worker thread -------------------------------------------------------
    def index(self, name: str) -> None:
        """Index it when the run before it ends (again after a run of it: its folders may
        have changed since that run scanned them)."""
        if name in self.queue:
            return
        self.queue.append(name)
        if not self.running:
            self._next()

    def rebuild(self, name: str) -> None:
        """Read every file of it again from scratch and embed its passages again, when the run
        before it ends (a run of it already waiting becomes the rebuild)."""
        self._rebuilds.add(name)
        self.index(name)

    def cancel(self) -> None:
        """Stop the run now (between two files) and drop the ones waiting."""
        self.queue.clear()
        self._rebuilds.clear()
        self._stop.set()

    def _next(self) -> None:
        if not self.queue:
            return
        name = self.running = self.queue.pop(0)
        rebuild = self.running_rebuild = name in self._rebuilds
        self._rebuilds.discard(name)
        self._stop = stop = threading.Event()
        self.last_progress = Progress(0, None)

        def work() -> IndexReport:
            def progress(p: Progress) -> None:
                self._latest = p  # one reference, replaced whole: safe across threads

            return kc.index_collection(name, progress, stop.is_set,
                                       embedder_for=self.embedder_for, rebuild=rebuild)

        self._latest = None
        self._task = tasks.run(work, owner=self, writer=True, name="knowledge-index",
                               on_done=lambda r: self._ended(name, r),
                               on_failed=lambda e: self._ended(name, e))
        self._poll.start()
        self.progress.emit(name, self.last_progress)

    def _look(self) -> None:
        p = self._latest
        if self.running and p is not None and p != self.last_progress:
            self.last_progress = p
            self.progress.emit(self.running, p)

    def _ended(self, name: str, outcome: object) -> None:
        self._poll.stop()
        self.running, self.last_progress, self._task = "", None, None
        self.running_rebuild = False
        if name in self._forgotten:  # deleted meanwhile: how its run ended is not news
            self._forgotten.discard(name)
        elif isinstance(outcome, IndexReport):
            self.indexed.emit(name, outcome)
        elif isinstance(outcome, KnowledgeError):  # an unreadable index, a name gone
            self.failed.emit(name, str(outcome))
        else:
            self.failed.emit(name, f"Indexing {name} failed: {outcome!r}")
        self.changed.emit()
        self._next()

    def close(self) -> None:
        """At quit: the run stops at the next file (quitting waits for it, ui/tasks.py)."""
        self.cancel()
        if self.watcher is not None:
            self.watcher.close()
            self.watcher = None
