"""Indexing real folders: hostile entries are listed with their reason and never read,
re-indexing reads only what changed, progress counts truthfully, cancel keeps what was done."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from inglenook.knowledge import indexer as indexer_module
from inglenook.knowledge.fts import SqliteFtsIndex
from inglenook.knowledge.indexer import (
    CHANGED,
    Indexer,
    IndexReport,
    Progress,
    UnreadableFile,
    read_bounded,
)
from inglenook.knowledge.scanner import Scan, scan
from tests.helpers.pdfs import text_pdf

posix_only = pytest.mark.skipif(sys.platform == "win32", reason="POSIX links and FIFOs")


def folder(root: Path) -> Path:
    docs = root / "docs"
    (docs / "sub").mkdir(parents=True)
    (docs / "notes.md").write_text("# Owls\n\nThe owl sleeps in the copper lantern.\n")
    (docs / "sub" / "code.py").write_text("def harbour():\n    return 'tide'\n")
    return docs


def reasons(problems: list[tuple[str, str]]) -> dict[str, str]:
    return {Path(path).name: reason for path, reason in problems}


def index_of(docs: Path, **kwargs: object) -> tuple[SqliteFtsIndex, Indexer]:
    index = SqliteFtsIndex()
    index.create_collection("Docs", [str(docs)])
    return index, Indexer(index, "Docs", **kwargs)  # type: ignore[arg-type]


@posix_only
def test_links_out_loops_and_fifos_are_listed_and_never_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    docs = folder(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("the password is swordfish")
    os.symlink(outside, docs / "out")
    os.symlink(outside / "secret.txt", docs / "secret-link.txt")
    os.symlink(docs, docs / "sub" / "loop")
    os.symlink(docs / "notes.md", docs / "inside-link.md")
    os.mkfifo(docs / "pipe.txt")  # opening it would block the indexer for ever
    index, indexer = index_of(docs)
    opened: list[str] = []
    real_open = os.open

    def recording_open(path: str, flags: int, *args: int) -> int:
        opened.append(str(path))
        return real_open(path, flags, *args)

    monkeypatch.setattr(os, "open", recording_open)
    report = indexer.run()
    monkeypatch.undo()
    assert opened and not [p for p in opened if p.startswith(str(outside))]
    found = reasons(report.problems)
    assert "not followed" in found["out"] and "not followed" in found["secret-link.txt"]
    assert "loop" in found["loop"]
    assert "FIFO" in found["pipe.txt"]
    assert "indexed once" in found["inside-link.md"]
    assert report.added == 2
    assert index.search(["Docs"], "password swordfish") == []
    assert index.problems("Docs") == sorted(report.problems)


@posix_only
def test_links_out_are_followed_when_asked(tmp_path: Path) -> None:
    docs = folder(tmp_path)
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "far.txt").write_text("a distant comet")
    os.symlink(tmp_path / "outside", docs / "out")
    assert [Path(f.path).name for f in scan([str(docs)], follow_links=True).files] == \
        ["notes.md", "far.txt", "code.py"]


def test_binary_named_txt_and_files_too_big_are_refused_with_a_reason(tmp_path: Path) -> None:
    docs = folder(tmp_path)
    (docs / "photo.txt").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00")
    (docs / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    (docs / "big.txt").write_text("word " * 400)
    (docs / "image.png").write_bytes(b"\x89PNG")
    _, indexer = index_of(docs, max_file_bytes=1000)
    found = reasons(indexer.run().problems)
    assert "binary" in found["photo.txt"]
    assert "not UTF-8" in found["latin1.txt"]
    assert "2 KB, more than the 1 KB" in found["big.txt"]
    assert "not a kind of file" in found["image.png"]


@pytest.mark.skipif(sys.platform == "win32" or os.geteuid() == 0,
                    reason="root reads files whatever their mode (chmod 000 denies nothing)")
def test_permission_denied_is_listed(tmp_path: Path) -> None:
    docs = folder(tmp_path)
    (docs / "locked.md").write_text("hidden")
    (docs / "locked.md").chmod(0)
    (docs / "closed").mkdir()
    (docs / "closed").chmod(0)
    try:
        found = reasons(index_of(docs)[1].run().problems)
    finally:
        (docs / "closed").chmod(0o700)
    assert "permission denied" in found["locked.md"] and "permission denied" in found["closed"]


def test_a_file_that_keeps_changing_while_read_is_listed(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "log.txt"
    path.write_text("growing")
    real_read = os.read

    def read_and_append(fd: int, n: int) -> bytes:  # another program writes as we read
        data = real_read(fd, n)
        if data:
            with path.open("a") as writer:
                writer.write("more")
        return data

    monkeypatch.setattr(os, "read", read_and_append)
    with pytest.raises(UnreadableFile, match="kept changing"):
        read_bounded(str(path))


def test_reindexing_reads_only_what_changed_and_drops_what_is_gone(tmp_path: Path) -> None:
    docs = folder(tmp_path)
    index, indexer = index_of(docs)
    assert indexer.run().added == 2
    again = indexer.run()
    assert (again.added, again.updated, again.unchanged, again.removed) == (0, 0, 2, 0)
    notes = docs / "notes.md"
    stamp = notes.stat().st_mtime_ns
    os.utime(notes, ns=(stamp + 10**9, stamp + 10**9))  # saved again, same content
    assert indexer.run().unchanged == 2
    notes.write_text("# Owls\n\nThe owl moved to the meadow.\n")
    (docs / "sub" / "code.py").unlink()
    third = indexer.run()
    assert (third.updated, third.removed) == (1, 1)
    assert index.search(["Docs"], "lantern") == []
    assert index.search(["Docs"], "meadow")[0].path == str(notes)
    assert index.stats("Docs").documents == 1


def test_progress_is_truthful_and_cancel_keeps_what_was_indexed(tmp_path: Path) -> None:
    docs = folder(tmp_path)
    for n in range(5):
        (docs / f"f{n}.txt").write_text(f"note number {n}")
    seen: list[Progress] = []

    def cancel_after_three() -> bool:
        return sum(1 for p in seen if p.total is not None and p.done) >= 3

    index, indexer = index_of(docs, progress=seen.append, cancelled=cancel_after_three)
    report = indexer.run()
    reading = [p for p in seen if p.total is not None]
    assert report.cancelled and index.stats("Docs").documents == 3
    assert [p.done for p in reading] == [0, 1, 2, 3] and {p.total for p in reading} == {7}
    finished = Indexer(index, "Docs", progress=seen.append).run()
    assert not finished.cancelled and (finished.added, finished.unchanged) == (4, 3)
    assert seen[-1] == Progress(7, 7, seen[-1].path)


def test_a_2_gb_file_is_refused_without_being_read(tmp_path: Path) -> None:
    docs = folder(tmp_path)
    with (docs / "dump.txt").open("wb") as sparse:  # sparse: no 2 GB written to the disk
        sparse.truncate(2 * 10**9)
    found = reasons(index_of(docs)[1].run().problems)
    assert found["dump.txt"] == "2.0 GB, more than the 64 MB a document may have: not read"


def test_a_root_can_be_a_single_file(tmp_path: Path) -> None:
    docs = folder(tmp_path)
    index = SqliteFtsIndex()
    index.create_collection("One", [str(docs / "notes.md")])
    assert Indexer(index, "One").run().added == 1
    assert index.search(["One"], "copper lantern")[0].path == str(docs / "notes.md")


def test_it_runs_on_a_worker_thread_and_stops_when_cancelled_from_another(
        tmp_path: Path) -> None:
    docs = folder(tmp_path)
    for n in range(50):
        (docs / f"f{n}.txt").write_text(f"note {n}")
    stop, first_file, finished = threading.Event(), threading.Event(), threading.Event()
    outcome: list[object] = []

    def progress(p: Progress) -> None:
        if p.total is not None and p.done == 1:
            first_file.set()
            stop.wait(timeout=10)  # holds the worker until the other thread has cancelled

    def work() -> None:  # SQLite connections belong to one thread: the worker opens its own
        index = SqliteFtsIndex()
        index.create_collection("Docs", [str(docs)])
        outcome.append(Indexer(index, "Docs", progress, stop.is_set).run())
        outcome.append(index.stats("Docs").documents)
        index.close()
        finished.set()

    worker = threading.Thread(target=work)
    worker.start()
    assert first_file.wait(timeout=10)
    stop.set()
    assert finished.wait(timeout=10)
    worker.join()
    report, documents = outcome
    assert isinstance(report, IndexReport) and report.cancelled and documents == 1


def swapped_after_scan(monkeypatch: pytest.MonkeyPatch, swap: Callable[[], None]) -> None:
    """`swap` runs between the scan and the reading of the files (another program's move)."""
    real_scan = indexer_module.scan

    def scan_then_swap(*args: Any, **kwargs: Any) -> Scan:
        found = real_scan(*args, **kwargs)
        swap()
        return found

    monkeypatch.setattr(indexer_module, "scan", scan_then_swap)


def secret(tmp_path: Path) -> Path:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "notes.md").write_text("the password is swordfish")
    (outside / "code.py").write_text("PASSWORD = 'swordfish'")
    return outside


@posix_only
def test_a_file_swapped_for_a_link_out_after_the_scan_is_not_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    docs, outside = folder(tmp_path), secret(tmp_path)

    def swap() -> None:
        (docs / "notes.md").unlink()
        os.symlink(outside / "notes.md", docs / "notes.md")

    swapped_after_scan(monkeypatch, swap)
    index, indexer = index_of(docs)
    report = indexer.run()
    assert index.search(["Docs"], "password swordfish") == []
    assert reasons(report.problems)["notes.md"] == CHANGED
    assert report.added == 1  # code.py


@posix_only
def test_a_folder_swapped_for_a_link_out_after_the_scan_is_not_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    docs, outside = folder(tmp_path), secret(tmp_path)

    def swap() -> None:  # docs/sub/code.py now leads to outside/code.py
        (docs / "sub").rename(tmp_path / "moved")
        os.symlink(outside, docs / "sub")

    swapped_after_scan(monkeypatch, swap)
    index, indexer = index_of(docs)
    report = indexer.run()
    assert index.search(["Docs"], "password swordfish") == []
    assert reasons(report.problems)["code.py"] == CHANGED


@posix_only
def test_a_file_swapped_for_a_fifo_after_the_scan_neither_blocks_nor_is_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    docs = folder(tmp_path)

    def swap() -> None:
        (docs / "notes.md").unlink()
        os.mkfifo(docs / "notes.md")  # opened for reading without O_NONBLOCK: blocks for ever

    swapped_after_scan(monkeypatch, swap)
    report = index_of(docs)[1].run()
    # Its inode may be the one the file had (freed and given again): then the type tells.
    assert reasons(report.problems)["notes.md"] in (CHANGED, "no longer a regular file: not "
                                                             "read")


@posix_only
def test_a_pdf_swapped_after_it_was_read_is_converted_from_what_was_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    docs, outside = folder(tmp_path), secret(tmp_path)
    (docs / "paper.pdf").write_bytes(text_pdf(["Comets have tails of dust."]))
    (outside / "secret.pdf").write_bytes(text_pdf(["The password is swordfish."]))
    real_read = indexer_module.read_bounded

    def read_then_swap(path: str, *args: Any) -> tuple[bytes, os.stat_result]:
        read = real_read(path, *args)
        if path.endswith(".pdf"):  # the converter's child would open the link by its path
            os.unlink(path)
            os.symlink(outside / "secret.pdf", path)
        return read

    monkeypatch.setattr(indexer_module, "read_bounded", read_then_swap)
    index, indexer = index_of(docs)
    assert indexer.run().added == 3
    assert index.search(["Docs"], "password swordfish") == []
    assert index.search(["Docs"], "comets")[0].path == str(docs / "paper.pdf")


@posix_only
def test_a_pdf_swapped_for_a_link_out_after_the_scan_is_not_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    docs, outside = folder(tmp_path), secret(tmp_path)
    (docs / "paper.pdf").write_bytes(text_pdf(["Comets have tails of dust."]))
    (outside / "secret.pdf").write_bytes(text_pdf(["The password is swordfish."]))

    def swap() -> None:
        (docs / "paper.pdf").unlink()
        os.symlink(outside / "secret.pdf", docs / "paper.pdf")

    swapped_after_scan(monkeypatch, swap)
    index, indexer = index_of(docs)
    report = indexer.run()
    assert index.search(["Docs"], "password swordfish") == []
    assert reasons(report.problems)["paper.pdf"] == CHANGED


@posix_only
def test_links_inside_the_folders_are_still_read_where_they_point(tmp_path: Path) -> None:
    docs = folder(tmp_path)
    (docs / "notes.md").rename(docs / "sub" / "real.md")
    os.symlink(docs / "sub" / "real.md", docs / "a-link.md")  # found first, by name
    index, indexer = index_of(docs)
    report = indexer.run()
    assert report.added == 2 and not [r for _, r in report.problems if r == CHANGED]
    assert index.search(["Docs"], "copper lantern")[0].path == str(docs / "a-link.md")


def test_a_folder_of_thousands_of_files_reports_progress_and_cancels_inside_it(
        tmp_path: Path) -> None:
    """One folder, 2,500 files: the count moves and Cancel is heard while it is listed, not
    only once it is done (bench/knowledge_bench.py --files 100000 for the full size)."""
    flat = tmp_path / "flat"
    flat.mkdir()
    for n in range(2500):
        (flat / f"n{n:05}.txt").write_text(f"note {n}")
    counts: list[int] = []
    whole = scan([str(flat)], found=counts.append)
    assert len(whole.files) == 2500 and counts == [1000, 2000, 2500]
    asked: list[int] = []

    def cancel_at_first_count() -> bool:
        asked.append(1)
        return bool(counts[3:])

    stopped = scan([str(flat)], cancelled=cancel_at_first_count, found=counts.append)
    assert stopped.cancelled and len(stopped.files) == 1000 and counts[3:] == [1000]
    # Indexing: every file counted once, in order, against the total found.
    seen: list[Progress] = []
    index = SqliteFtsIndex()
    index.create_collection("Flat", [str(flat)])
    report = Indexer(index, "Flat", seen.append).run()
    reading = [p.done for p in seen if p.total is not None]
    assert report.added == 2500 and reading == list(range(2501))
    assert [p.done for p in seen if p.total is None] == [1000, 2000, 2500]


def test_text_files_without_a_suffix_are_indexed_binary_ones_listed(tmp_path: Path) -> None:
    """README, LICENSE, NOTES: text by their bytes (valid UTF-8, no NUL), not their name."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "README").write_text("# Harbour\n\nThe ferry leaves at nine.\n")
    (docs / "LICENSE").write_text("Permission is granted to anyone.\n")
    (docs / "a.out").write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(200))
    (docs / "core").write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(200))
    (docs / ".env").write_text("API_KEY=secret\n")  # hidden: settings and secrets, not notes
    index, run = index_of(docs)
    report = run.run()
    assert {Path(p).name for p in index.documents("Docs")} == {"README", "LICENSE"}
    assert reasons(report.problems)["core"].startswith("it holds binary data")
    assert "a.out" in reasons(report.problems)  # a suffix the index does not read
    assert reasons(report.problems)[".env"].startswith("not a kind of file")
    assert [Path(h.path).name for h in index.search(["Docs"], "ferry")] == ["README"]
