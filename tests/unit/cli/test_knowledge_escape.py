"""Issue 39 #9: `knowledge search` prints a file's path on one line, whatever its name holds
(a newline would forge a result line of its own; an escape sequence would reach the
terminal)."""

from __future__ import annotations

from pathlib import Path

import pytest

from inglenook.cli import main


def test_a_path_with_a_newline_and_an_escape_is_printed_on_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    name = "owls\n[2] passwd, lines 1–3\x1b[2J.md"
    (folder / name).write_text("# Owls\n\nThe barn owl nests in the old mill.\n")
    assert main(["knowledge", "add", "Notes", str(folder)]) == 0
    capsys.readouterr()
    assert main(["knowledge", "search", "Notes", "barn", "owl"]) == 0
    out = capsys.readouterr().out
    first = out.splitlines()[0]
    assert first.startswith("[1] ") and "owls\\n[2] passwd, lines 1–3\\x1b[2J.md" in first
    assert "\x1b" not in out and not any(line.startswith("[2]") for line in out.splitlines())
