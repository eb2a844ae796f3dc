"""`inglenook knowledge add|update|watch|list|search|rm` through the CLI's main() (watch in
a process of its own, ended by Ctrl+C)."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path
from typing import IO

import pytest

from inglenook.cli import main
from inglenook.cli.common import INTERRUPTED_EXIT


def notes(tmp_path: Path) -> Path:
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "owls.md").write_text("# Owls\n\nThe barn owl nests in the old mill.\n")
    (folder / "bin.txt").write_bytes(b"\x00\x01\x02")
    (folder / "evil.md").write_text("# Trap\n\nterminal \x1b]0;pwned\x07 escape\n")
    return folder


def test_add_search_list_rm(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = notes(tmp_path)
    assert main(["knowledge", "add", "Notes", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "Notes: 2 added" in out and "bin.txt: it holds binary data" in out
    assert main(["knowledge", "search", "notes", "where", "does", "the", "owl", "nest"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"[1] {folder / 'owls.md'}, lines 1–3\n")
    assert "barn owl nests" in out
    assert main(["knowledge", "list"]) == 0
    out = capsys.readouterr().out
    assert "Notes · 2 files · 2 passages · 1 not indexed" in out and str(folder) in out
    assert main(["knowledge", "update", "Notes"]) == 0
    assert "0 added, 0 updated, 2 unchanged" in capsys.readouterr().out
    assert main(["knowledge", "rm", "Notes"]) == 0
    capsys.readouterr()
    assert main(["knowledge", "list"]) == 0
    assert "No collections yet" in capsys.readouterr().out
    assert (folder / "owls.md").exists()


def test_control_characters_in_documents_never_reach_the_terminal(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    main(["knowledge", "add", "Notes", str(notes(tmp_path))])
    capsys.readouterr()
    assert main(["knowledge", "search", "Notes", "terminal", "escape"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "\\x1b]0;pwned\\x07" in out


def test_mistakes_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["knowledge", "search", "Nothing", "x"]) == 1
    assert capsys.readouterr().err == "inglenook: There is no collection named 'Nothing'.\n"
    assert main(["knowledge", "add", "Notes", str(tmp_path / "missing")]) == 2
    assert "does not exist" in capsys.readouterr().err
    main(["knowledge", "add", "Notes", str(notes(tmp_path))])
    capsys.readouterr()
    assert main(["knowledge", "search", "Notes", "owl", "-n", "0"]) == 2


def line_after(stream: IO[str], prefix: str) -> str:
    """The next line that starts with prefix (the lines before it are a run's details)."""
    for line in stream:
        if line.startswith(prefix):
            return line
    raise AssertionError(f"no line starting with {prefix!r}")


def test_watch_indexes_again_when_a_file_changes_until_ctrl_c(tmp_path: Path) -> None:
    folder = notes(tmp_path)
    assert main(["knowledge", "add", "Notes", str(folder), "--no-watch"]) == 0
    run = subprocess.Popen([sys.executable, "-m", "inglenook", "knowledge", "watch", "notes"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert run.stdout is not None and run.stderr is not None
    try:
        assert run.stdout.readline().startswith("Notes: 0 added, 0 updated, 2 unchanged")
        assert line_after(run.stdout, "Watching") == "Watching Notes (Ctrl+C to stop).\n"
        (folder / "kiln.md").write_text("# Kiln\n\nThe kiln fires the clay at dawn.\n")
        assert line_after(run.stdout, "Notes: ").startswith(
            "Notes: 1 added, 0 updated, 2 unchanged")
        run.send_signal(signal.SIGINT)
        assert run.wait(timeout=30) == INTERRUPTED_EXIT
        assert "Traceback" not in run.stderr.read()
    finally:
        run.kill()
        run.stdout.close()
        run.stderr.close()


def test_rebuild_reads_every_file_again(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    folder = notes(tmp_path)
    assert main(["knowledge", "add", "Notes", str(folder)]) == 0
    capsys.readouterr()
    assert main(["knowledge", "rebuild", "notes"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Notes: 0 added, 2 updated, 0 unchanged, 0 removed")
    assert main(["knowledge", "update", "Notes"]) == 0
    assert "0 updated, 2 unchanged" in capsys.readouterr().out
    assert main(["knowledge", "rebuild", "Nothing"]) == 1


def test_files_read_in_part_are_listed_with_what_was_left(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    from inglenook.knowledge import convert

    monkeypatch.setattr(convert, "CSV_MAX_ROWS", 1)
    folder = notes(tmp_path)
    (folder / "birds.csv").write_text("bird\nowl\nwren\n")
    assert main(["knowledge", "add", "Notes", str(folder)]) == 0
    out = capsys.readouterr().out
    note = f"  {folder / 'birds.csv'}: only the first 1 rows read (a CSV is indexed up to that)"
    assert f"1 read only in part (what was read is indexed):\n{note}\n" in out
    assert main(["knowledge", "list"]) == 0
    out = capsys.readouterr().out
    assert "Notes · 3 files · 3 passages · 1 not indexed · 1 read in part\n" in out
    assert f"  read in part: {note[2:]}\n" in out


def test_follow_links_is_turned_on_and_off_for_a_collection(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = notes(tmp_path)
    assert main(["knowledge", "add", "Notes", str(folder)]) == 0
    assert main(["knowledge", "add", "Notes", str(folder), "--follow-links"]) == 0
    capsys.readouterr()
    assert main(["knowledge", "list"]) == 0
    assert "1 not indexed · follows links out\n" in capsys.readouterr().out
    assert main(["knowledge", "add", "Notes", str(folder), "--no-follow-links"]) == 0
    capsys.readouterr()
    assert main(["knowledge", "list"]) == 0
    assert "follows links" not in capsys.readouterr().out


def test_a_collection_removed_by_another_process_mid_run_is_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """`knowledge rm` in another process between a file's lookup of its collection and its
    write (the race, made certain): one line, exit 1, no traceback."""
    from inglenook.knowledge.fts import SqliteFtsIndex

    folder = notes(tmp_path)
    real_add, real_id = SqliteFtsIndex.add_document, SqliteFtsIndex._id
    armed: list[bool] = []

    def racing_id(self: SqliteFtsIndex, name: str) -> int:
        found = real_id(self, name)
        if armed == [True]:
            armed[0] = False
            other = SqliteFtsIndex()
            other.remove_collection(name)
            other.close()
        return found

    def add_document(self: SqliteFtsIndex, *args: object) -> None:
        if not armed:
            armed.append(True)
        real_add(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(SqliteFtsIndex, "_id", racing_id)
    monkeypatch.setattr(SqliteFtsIndex, "add_document", add_document)
    assert main(["knowledge", "add", "Notes", str(folder)]) == 1
    assert capsys.readouterr().err == ("inglenook: The collection Notes was removed while it "
                                       "was being indexed (by another inglenook?): indexing "
                                       "stopped.\n")


def test_a_full_disk_during_indexing_is_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from tests.helpers.tmpfs import tmpfs

    folder = tmp_path / "notes"
    folder.mkdir()
    for n in range(60):
        words = " ".join(f"word{n}x{i}" for i in range(6000))
        (folder / f"n{n:02}.md").write_text(f"# Note {n}\n\n{words}\n")
    with tmpfs(tmp_path / "small", "1m") as disk:
        monkeypatch.setenv("INGLENOOK_HOME", str(disk / "home"))
        assert main(["knowledge", "add", "Notes", str(folder)]) == 1
        assert capsys.readouterr().err == (
            "inglenook: The disk is full: indexing Notes stopped (what was indexed is kept). "
            "Free some space, then run: inglenook knowledge update Notes\n")
