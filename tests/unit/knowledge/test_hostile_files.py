"""Files built to hurt the indexer (issue 39): a zip bomb, XML a parser refuses, a name that is
not UTF-8, a file of one endless line. Each costs only itself: it is listed with its reason, the
files after it are indexed, the window's process never parses it, and Cancel ends it."""

from __future__ import annotations

import io
import os
import random
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import SupportsIndex

import psutil
import pytest

from inglenook.cli import main
from inglenook.core import escape
from inglenook.knowledge import convert as convert_module
from inglenook.knowledge import convert_process, docx_reader
from inglenook.knowledge import indexer as indexer_module
from inglenook.knowledge.chunking import MAX_CHARS, chunk_pages
from inglenook.knowledge.convert import ConvertCancelled, ConvertError, Page, convert
from inglenook.knowledge.docx_reader import DocxError, check_inflation
from inglenook.knowledge.fts import SqliteFtsIndex
from inglenook.knowledge.indexer import Indexer
from tests.helpers.docx_files import paragraphs, with_document_xml, zip_bomb

posix_only = pytest.mark.skipif(sys.platform == "win32", reason="POSIX resource limits")


def reasons(problems: list[tuple[str, str]]) -> dict[str, str]:
    return {Path(path).name: reason for path, reason in problems}


def collection(docs: Path) -> SqliteFtsIndex:
    index = SqliteFtsIndex()
    index.create_collection("Docs", [str(docs)])
    return index


def indexed(index: SqliteFtsIndex) -> set[str]:
    return {Path(p).name for p in index.documents("Docs")}


def test_a_docx_zip_bomb_is_refused_as_it_inflates_and_listed_at_every_run(
        tmp_path: Path) -> None:
    """200 MB of word/document.xml deflated into ~200 kB: refused after ~1 MB inflated (its
    ratio), listed with the reason, and listed again by the next run, never indexed."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "bomb.docx").write_bytes(zip_bomb(200))
    (docs / "report.docx").write_bytes(paragraphs("The lighthouse keeper logs the tides."))
    (docs / "zz_after.md").write_text("# After\n\nThe heron waits.\n")
    index = collection(docs)
    for _ in range(2):
        report = Indexer(index, "Docs").run()
        why = reasons(report.problems)["bomb.docx"]
        assert "inflates more than 100-fold (a zip bomb?): not read" in why
        assert indexed(index) == {"report.docx", "zz_after.md"}
        assert "bomb.docx" in reasons(index.problems("Docs"))  # the window lists it too
    assert [h.path for h in index.search(["Docs"], "lighthouse tides")] == \
        [str(docs / "report.docx")]


def test_inflation_is_bounded_per_part_and_in_total(monkeypatch: pytest.MonkeyPatch) -> None:
    noise = random.Random(7).randbytes
    monkeypatch.setattr(docx_reader, "MAX_MEMBER_BYTES", 2_000_000)
    monkeypatch.setattr(docx_reader, "MAX_TOTAL_BYTES", 3_000_000)

    def archive(*sizes: int) -> bytes:
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
            for n, size in enumerate(sizes):
                z.writestr(f"part{n}.bin", noise(size))  # random: no ratio to speak of
        return out.getvalue()

    check_inflation(archive(1_500_000, 1_400_000))
    with pytest.raises(DocxError, match=r"'part0\.bin' inflates to more than 2 MB"):
        check_inflation(archive(2_100_000))
    with pytest.raises(DocxError, match=r"inflate to more than 3 MB together"):
        check_inflation(archive(1_500_000, 1_400_000, 200_000))
    with pytest.raises(DocxError, match="not a Word document"):
        check_inflation(b"PK\x03\x04 nothing more")
    # The ratio is that of what has streamed so far: 200 MB deflated into ~200 kB is refused
    # within its first MBs, long before 100 times its whole compressed size (~24 MB).
    monkeypatch.setattr(docx_reader, "MAX_MEMBER_BYTES", 4_000_000)
    monkeypatch.setattr(docx_reader, "MAX_TOTAL_BYTES", 4_000_000)
    with pytest.raises(DocxError, match=r"'word/document\.xml' inflates more than 100-fold"):
        check_inflation(zip_bomb(200))


@posix_only
def test_conversion_runs_in_a_child_capped_in_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the bounds miss costs the child: 100,000 paragraphs (3 MB, well within the bounds)
    convert under the usual cap, and are refused under one too small for them."""
    words = ["".join(random.Random(n).choices("abcdefgh", k=6)) for n in range(1000)]
    document = paragraphs(*(" ".join(random.Random(n).choices(words, k=12))
                            for n in range(100_000)))
    assert len(convert("docx", document, Path("k.docx")).pages[0].text) == 8_399_999
    monkeypatch.setattr(convert_process, "MEMORY_LIMIT_MB", 96)
    with pytest.raises(ConvertError, match=r"more memory than a document may use|refused by"):
        convert("docx", document, Path("k.docx"))
    probe = ("import resource, sys; from inglenook.knowledge import convert_process as m; "
             "sys.stdin = open(__import__('os').devnull); m.main(['--memory-mb', '321', 'x']); "
             "print('', resource.getrlimit(resource.RLIMIT_AS)[0], "
             "resource.getrlimit(resource.RLIMIT_CPU)[0])")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True).stdout.split()[-2:]
    assert [int(v) for v in out] == [321 << 20, convert_process.CPU_LIMIT_S]


def hanging_converter(pid_file: Path) -> list[str]:
    return [sys.executable, "-c", "import os, sys, time; "
            f"open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(600)"]


def test_cancel_kills_a_conversion_in_progress(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    pid_file = tmp_path / "pid"
    monkeypatch.setattr(convert_process, "command", lambda: hanging_converter(pid_file))
    with pytest.raises(ConvertCancelled):
        convert("docx", paragraphs("x"), Path("k.docx"), cancelled=pid_file.exists)
    assert not psutil.pid_exists(int(pid_file.read_text()))
    # The same within a run: it stops there, and what was indexed before is kept.
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A\n\nAlder.\n")
    (docs / "b.docx").write_bytes(paragraphs("Birch."))
    (docs / "c.md").write_text("# C\n\nCedar.\n")
    pid_file.unlink()
    index = collection(docs)
    report = Indexer(index, "Docs", cancelled=pid_file.exists).run()
    assert report.cancelled and report.added == 1 and indexed(index) < {"a.md", "c.md"}
    assert not psutil.pid_exists(int(pid_file.read_text()))


def test_a_conversion_past_its_time_is_killed(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    pid_file = tmp_path / "pid"
    monkeypatch.setattr(convert_process, "command", lambda: hanging_converter(pid_file))
    monkeypatch.setattr(convert_module, "CONVERT_TIMEOUT_S", 1.0)
    with pytest.raises(ConvertError, match=r"took more than 1 s"):
        convert("html", b"<p>x</p>" * 40_000, Path("k.html"))  # large: in the child
    assert not psutil.pid_exists(int(pid_file.read_text()))


def test_xml_the_parser_refuses_and_other_failures_are_each_files_own(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    deep = with_document_xml([b"<w:p>" * 5000, b"</w:p>" * 5000])
    letters = bytes(random.Random(3).choices(b"abcdefghij klmnop", k=11_000_000))
    huge = with_document_xml([b"<w:p><w:r><w:t>", letters, b"</w:t></w:r></w:p>"])
    loop = with_document_xml(
        b'<?xml version="1.0"?><!DOCTYPE d [<!ENTITY a "&b;"><!ENTITY b "&a;">]>'
        b'<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main">'
        b"<w:body><w:p><w:r><w:t>&a;</w:t></w:r></w:p></w:body></w:document>", whole=True)
    (docs / "a_deep.docx").write_bytes(deep)
    (docs / "b_huge.docx").write_bytes(huge)
    (docs / "c_loop.docx").write_bytes(loop)
    (docs / "d_field.csv").write_text('name\n"' + "x" * 200_000 + '"\n')  # csv's field limit
    (docs / "zz_notes.md").write_text("# Notes\n\nThe otter dives.\n")
    index = collection(docs)
    report = Indexer(index, "Docs").run()
    why = reasons(report.problems)
    assert "Excessive depth" in why["a_deep.docx"]
    assert "Text node too long" in why["b_huge.docx"] or "huge text node" in why["b_huge.docx"]
    assert why["c_loop.docx"]  # refused or empty: listed either way
    assert "field larger than field limit" in why["d_field.csv"]
    assert indexed(index) == {"zz_notes.md"}


def test_an_unforeseen_converter_failure_is_that_files_alone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A\n\nAsh.\n")
    (docs / "b.md").write_text("# B\n\nBeech.\n")
    real = indexer_module.convert

    def failing(kind: str, data: bytes, path: Path, cancelled: object) -> object:
        if path.name == "a.md":
            raise RuntimeError("a converter's bug\nwith a second line")
        return real(kind, data, path, cancelled)  # type: ignore[arg-type]

    monkeypatch.setattr(indexer_module, "convert", failing)
    index = collection(docs)
    report = Indexer(index, "Docs").run()
    assert reasons(report.problems) == {
        "a.md": "it could not be read (RuntimeError: a converter's bug)"}
    assert indexed(index) == {"b.md"}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="names of any bytes: Linux")
def test_a_name_that_is_not_utf8_is_listed_never_fatal(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    docs = tmp_path / "docs"
    (docs / "sub").mkdir(parents=True)
    root = os.fsencode(docs)
    with open(root + b"/caf\xe9.md", "wb") as bad:
        bad.write(b"# Cafe\n\nLatin-1 name.\n")
    os.mkdir(root + b"/d\xff")
    with open(root + b"/d\xff/inner.md", "wb") as inner:
        inner.write(b"# Inner\n")
    (docs / "sub" / "good.md").write_text("# Good\n\nThe wren sings.\n")
    index = collection(docs)
    report = Indexer(index, "Docs").run()
    why = dict(report.problems)
    assert why[f"{docs}/caf\\xe9.md"].startswith("its name is not valid UTF-8")
    assert f"{docs}/d\\xff" in why
    assert indexed(index) == {"good.md"}
    assert main(["knowledge", "add", "Cli", str(docs)]) == 0
    out = capsys.readouterr().out
    # As the CLI prints any path: a backslash doubled (core/escape.printable), so the \xe9
    # that stands for the byte cannot be told from a name's own backslash by mistake.
    shown = escape.printable(f"{docs}/caf\\xe9.md")
    assert "Cli: 1 added" in out and f"{shown}: its name is not valid UTF-8" in out


class CountedText(str):
    """Text that counts the characters its slices copy (its lines and pieces are such text
    too): the work of cutting it, without a clock."""

    copied = 0

    def split(self, sep: str | None = None, maxsplit: int = -1) -> list[str]:  # type: ignore[override]
        return [CountedText(part) for part in super().split(sep, maxsplit)]

    def __getitem__(self, key: SupportsIndex | slice) -> str:
        piece = super().__getitem__(key)
        if isinstance(key, slice):
            CountedText.copied += len(piece)
            return CountedText(piece)
        return piece


def test_one_long_line_is_chunked_in_linear_time() -> None:
    """Each piece was cut by copying the rest of the line: 20 MB took 11 s, 60 MB over 400 s.
    Now the characters copied are the line's own, once (4 MB copied 2 GB before)."""
    CountedText.copied = 0
    text = CountedText("ab" * 2_000_000)
    chunks = chunk_pages([Page(text)], markdown=True)
    assert len(chunks) == 1_000 and {len(c.text) for c in chunks} == {MAX_CHARS}
    assert {(c.line_start, c.line_end) for c in chunks} == {(1, 1)}
    assert CountedText.copied <= 2 * len(text)
    big = chunk_pages([Page("ab" * 30_000_000)], markdown=False)  # 60 MB, at once
    assert len(big) == 15_000 and big[-1].text == "ab" * (MAX_CHARS // 2)


def test_cancel_is_heard_inside_a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "long.txt").write_text("word " * 4_000_000)
    inside = []
    real = indexer_module.chunk_pages

    def chunking(*args: object, **kwargs: object) -> object:
        inside.append(True)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(indexer_module, "chunk_pages", chunking)
    asked_inside: list[bool] = []

    def cancelled() -> bool:
        if inside:
            asked_inside.append(True)
        return bool(inside)

    index = collection(docs)
    report = Indexer(index, "Docs", cancelled=cancelled).run()
    assert report.cancelled and asked_inside == [True]  # once, inside the file, and it ends
    assert indexed(index) == set()


def test_the_converter_command_and_the_bundles_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    """This Python and the module; a frozen bundle runs itself with --knowledge-convert, which
    inglenook/__main__.py dispatches (checked here through `python -m inglenook`)."""
    assert convert_process.command() == [sys.executable, "-m",
                                         "inglenook.knowledge.convert_process",
                                         "--memory-mb", str(convert_process.MEMORY_LIMIT_MB)]
    done = subprocess.run([sys.executable, "-m", "inglenook", convert_process.FLAG,
                           "--memory-mb", "512", "html"], input=b"<h1>Tea</h1><p>hot</p>",
                          capture_output=True, check=True)
    assert done.stdout == b'{"pages": [["# Tea\\n\\nhot", null]]}'
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    assert convert_process.command()[:2] == [sys.executable, "--knowledge-convert"]


def test_a_refused_file_is_not_converted_again_while_unchanged(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file that takes a converter its whole budget would take it at every run the watcher
    starts: its refusal is remembered (by content) for the session, and listed each run."""
    calls = tmp_path / "calls"
    refusing = [sys.executable, "-c", "import sys; sys.stdin.buffer.read(); "
                f"open({str(calls)!r}, 'a').write('x'); "
                "print('{\"error\": \"it took the converter its whole minute\"}')"]
    monkeypatch.setattr(convert_process, "command", lambda: refusing)
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "slow.docx").write_bytes(paragraphs("Slow."))
    index = collection(docs)
    for _ in range(3):
        report = Indexer(index, "Docs").run()
        assert reasons(report.problems) == {"slow.docx": "it took the converter its whole minute"}
    assert calls.read_text() == "x"
    (docs / "slow.docx").write_bytes(paragraphs("Changed."))  # other bytes: converted again
    Indexer(index, "Docs").run()
    assert calls.read_text() == "xx"
