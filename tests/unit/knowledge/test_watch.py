"""Watching real folders (inotify here): a burst is one report, reading sets off nothing, only
a file root's own events count, links out and version-control folders are not watched, and a
collection that cannot be watched live is looked at on a timer, saying why.

Each test asserts that no report came where none should by making one change that must be
reported afterwards: the count then says whether anything came before it (no sleeping)."""

from __future__ import annotations

import errno
import os
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from watchdog.observers import Observer

from inglenook.knowledge.fts import SqliteFtsIndex
from inglenook.knowledge.indexer import Indexer
from inglenook.knowledge.watch import Watcher

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX links")
WAIT_S = 10


class Reports:
    def __init__(self) -> None:
        self.names: list[str] = []
        self.also: Callable[[str], object] = lambda name: None  # called first, on the same thread
        self._cond = threading.Condition()

    def __call__(self, name: str) -> None:
        self.also(name)
        with self._cond:
            self.names.append(name)
            self._cond.notify_all()

    def wait_for(self, count: int) -> list[str]:
        with self._cond:
            assert self._cond.wait_for(lambda: len(self.names) >= count, timeout=WAIT_S), \
                f"{count} reports expected, {self.names} came"
            return list(self.names)


@pytest.fixture
def reports() -> Reports:
    return Reports()


@pytest.fixture
def watcher(reports: Reports) -> Iterator[Watcher]:
    made = Watcher(reports, debounce_s=0.2, rescan_s=0.3)
    yield made
    made.close()


def settled(watcher: Watcher) -> None:
    assert watcher.wait_settled(WAIT_S), "the watches were not set up"


def test_a_burst_of_changes_is_one_report(tmp_path: Path, watcher: Watcher,
                                          reports: Reports) -> None:
    watcher.watch("Docs", [str(tmp_path)])
    settled(watcher)
    for n in range(20):
        (tmp_path / f"note{n}.md").write_text(f"note {n}")
    assert reports.wait_for(1) == ["Docs"]
    (tmp_path / "note0.md").unlink()
    assert reports.wait_for(2) == ["Docs", "Docs"]  # the burst was one, the delete another


def test_indexing_the_folder_sets_off_no_report(tmp_path: Path, watcher: Watcher,
                                                reports: Reports) -> None:
    docs = tmp_path / "docs"
    (docs / "sub").mkdir(parents=True)
    for n in range(5):
        (docs / "sub" / f"f{n}.txt").write_text(f"the lantern number {n}")
    index = SqliteFtsIndex(tmp_path / "knowledge.db")
    index.create_collection("Docs", [str(docs)])
    watcher.watch("Docs", [str(docs)])
    settled(watcher)
    assert Indexer(index, "Docs").run().added == 5  # opens and reads every file
    (docs / "new.txt").write_text("new")
    assert reports.wait_for(1) == ["Docs"]
    assert watcher.status("Docs") == ""
    index.close()


def test_a_file_root_counts_its_own_changes_only(tmp_path: Path, watcher: Watcher,
                                                 reports: Reports) -> None:
    given = tmp_path / "given.md"
    given.write_text("one")
    watcher.watch("One", [str(given)])
    settled(watcher)
    (tmp_path / "neighbour.md").write_text("not ours")
    given.write_text("two")
    assert reports.wait_for(1) == ["One"]
    assert len(reports.names) == 1


def test_links_out_and_version_control_are_not_watched(tmp_path: Path, watcher: Watcher,
                                                       reports: Reports) -> None:
    docs, outside = tmp_path / "docs", tmp_path / "outside"
    (docs / ".git").mkdir(parents=True)
    outside.mkdir()
    (docs / "out").symlink_to(outside, target_is_directory=True)
    watcher.watch("Docs", [str(docs)])
    settled(watcher)
    (outside / "secret.txt").write_text("not in the collection")
    (docs / ".git" / "index").write_text("git's own")
    (docs / "real.md").write_text("ours")
    assert reports.wait_for(1) == ["Docs"]
    assert len(reports.names) == 1


def test_two_collections_on_one_folder_are_watched_apart(tmp_path: Path, watcher: Watcher,
                                                         reports: Reports) -> None:
    watcher.watch("A", [str(tmp_path)])
    watcher.watch("B", [str(tmp_path)])
    settled(watcher)
    watcher.unwatch("A")
    settled(watcher)
    (tmp_path / "x.md").write_text("x")
    assert reports.wait_for(1) == ["B"]  # dropping A's watch left B's in place
    assert watcher.names() == ["B"]


def test_a_missing_folder_is_looked_for_on_a_timer(tmp_path: Path, watcher: Watcher,
                                                   reports: Reports) -> None:
    gone = tmp_path / "later"
    live_reports: list[str] = []  # reported while watched live
    reports.also = lambda name: watcher.status(name) or live_reports.append(name)
    watcher.watch("Later", [str(gone)])
    assert reports.wait_for(1)[0] == "Later"  # the timer: the index learns its files went
    assert watcher.status("Later") == (f"{gone} is missing: it is looked for again "
                                       "every 0.3 seconds.")
    staging = tmp_path / "staging"  # made elsewhere and moved in: no event in a watch
    staging.mkdir()
    (staging / "new.md").write_text("made while nobody watched")
    staging.rename(gone)
    event = threading.Event()
    for _ in range(WAIT_S * 100):
        if live_reports:
            break
        event.wait(0.01)
    # watched live again, and reported once more: what came while it was missing is indexed
    assert watcher.status("Later") == ""
    assert set(live_reports) == {"Later"}


def test_a_root_deleted_while_watched_is_reported_then_looked_for(
        tmp_path: Path, watcher: Watcher, reports: Reports) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("a")
    watcher.watch("Docs", [str(docs)])
    settled(watcher)
    (docs / "a.md").unlink()
    docs.rmdir()
    reports.wait_for(1)
    event = threading.Event()
    for _ in range(WAIT_S * 100):
        if "missing" in watcher.status("Docs"):
            break
        event.wait(0.01)
    assert watcher.status("Docs").startswith(f"{docs} is missing")


class FullObserver(Observer):  # type: ignore[misc,valid-type]
    """The system's watches used up: what inotify says when max_user_watches is reached."""

    def schedule(self, *args: object, **kwargs: object) -> object:
        raise OSError(errno.ENOSPC, "inotify watch limit reached")


def test_the_watch_limit_reached_falls_back_to_a_timer(tmp_path: Path,
                                                        reports: Reports) -> None:
    watcher = Watcher(reports, debounce_s=0.2, rescan_s=0.3, make_observer=FullObserver)
    try:
        watcher.watch("Big", [str(tmp_path)])
        assert reports.wait_for(2) == ["Big", "Big"]  # every rescan_s, changed or not
        assert "fs.inotify.max_user_watches" in watcher.status("Big")
        assert os.path.isdir(tmp_path)
    finally:
        watcher.close()
