"""Attachments: reading each kind of file, refusing what cannot be read or is too big, PDFs in a
child process that is killed when it hangs, and how a file is shown to the model."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
from pypdf import PdfWriter

from inglenook.core import attachments, attachments_pdf
from inglenook.core.attachments import (
    IMAGE_TOKENS,
    MAX_PDF_BYTES,
    MAX_TEXT_FILE_BYTES,
    Attachment,
    AttachmentError,
    estimate_tokens,
    inline,
    inline_part,
    pdf_text,
    read_attachment,
    will_not_fit,
)
from tests.helpers.pdfs import text_pdf

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32


def write(tmp_path: Path, name: str, data: bytes | str) -> Path:
    path = tmp_path / name
    if isinstance(data, str):
        path.write_text(data, encoding="utf-8", newline="")
    else:
        path.write_bytes(data)
    return path


# -- each kind of file --------------------------------------------------------------------------

def test_a_text_file(tmp_path: Path) -> None:
    path = write(tmp_path, "notes.txt", "Buy milk.\r\nCall Ada.\r\n\r\n")
    a = read_attachment(path)
    assert (a.name, a.kind, a.size, a.text) == ("notes.txt", "text", 24, "Buy milk.\nCall Ada.")
    assert a.language == "text"
    assert a.tokens == estimate_tokens(inline_part(a)) > 0


def test_code_is_fenced_with_its_language(tmp_path: Path) -> None:
    a = read_attachment(write(tmp_path, "fib.py", "def fib(n):\n    return n\n"))
    assert (a.kind, a.language) == ("code", "python")
    assert inline_part(a) == "File: fib.py\n```python\ndef fib(n):\n    return n\n```"
    assert read_attachment(write(tmp_path, "Makefile", "all:\n\ttrue\n")).language == "makefile"


def test_markdown_with_fences_of_its_own_cannot_close_ours(tmp_path: Path) -> None:
    text = "# Readme\n\n```sh\nmake\n```\n\nAnd ````four```` too."
    a = read_attachment(write(tmp_path, "README.md", text))
    assert (a.kind, a.language) == ("markdown", "markdown")
    assert inline_part(a) == f"File: README.md\n`````markdown\n{text}\n`````"


def test_csv_and_tsv(tmp_path: Path) -> None:
    csv = read_attachment(write(tmp_path, "sales.csv", "month,units\nJan,12\n"))
    tsv = read_attachment(write(tmp_path, "sales.tsv", "month\tunits\nJan\t12\n"))
    assert [(a.kind, a.language) for a in (csv, tsv)] == [("csv", "csv"), ("csv", "tsv")]
    assert inline_part(csv).startswith("File: sales.csv\n```csv\nmonth,units")


def test_a_pdf_is_read_page_by_page(tmp_path: Path) -> None:
    path = write(tmp_path, "report.pdf", text_pdf(["Quarterly report", "Units rose in May."]))
    a = read_attachment(path)
    assert (a.kind, a.size) == ("pdf", path.stat().st_size)
    assert a.text == "Quarterly report\n\nUnits rose in May."
    assert inline_part(a) == f"File: report.pdf\n```text\n{a.text}\n```"


def test_a_pdf_is_known_by_its_header_whatever_its_name(tmp_path: Path) -> None:
    a = read_attachment(write(tmp_path, "scan", text_pdf(["Signed copy"])))
    assert (a.kind, a.text) == ("pdf", "Signed copy")


def test_utf8_with_a_byte_order_mark_and_utf16_are_read(tmp_path: Path) -> None:
    assert read_attachment(write(tmp_path, "a.txt", b"\xef\xbb\xbfZ\xc3\xbcrich")).text == "Zürich"
    utf16 = write(tmp_path, "b.txt", "Zürich, 8 °C".encode("utf-16"))
    assert read_attachment(utf16).text == "Zürich, 8 °C"


# -- refused, with a reason -------------------------------------------------------------------

def test_a_broken_pdf(tmp_path: Path) -> None:
    path = write(tmp_path, "broken.pdf", text_pdf(["never seen"])[:60])
    with pytest.raises(AttachmentError, match=r"^broken\.pdf was not attached: .*damaged"):
        read_attachment(path)


def test_a_pdf_without_text(tmp_path: Path) -> None:
    writer = PdfWriter()
    writer.add_blank_page(612, 792)
    buffer = io.BytesIO()
    writer.write(buffer)
    path = write(tmp_path, "scanned.pdf", buffer.getvalue())
    with pytest.raises(AttachmentError, match="has no text to read"):
        read_attachment(path)


def test_a_pdf_with_a_password(tmp_path: Path) -> None:
    writer = PdfWriter(clone_from=io.BytesIO(text_pdf(["secret"])))
    writer.encrypt(user_password="open sesame", algorithm="RC4-128")
    buffer = io.BytesIO()
    writer.write(buffer)
    path = write(tmp_path, "locked.pdf", buffer.getvalue())
    with pytest.raises(AttachmentError, match="protected by a password"):
        read_attachment(path)


def test_a_pdf_reader_that_hangs_is_killed(tmp_path: Path) -> None:
    """What a hostile PDF does to a parser, without needing one: the reader never answers."""
    path = write(tmp_path, "hostile.pdf", b"%PDF-1.7\n")
    hang = [sys.executable, "-c", "import os, sys, time; "
            "open(sys.argv[1] + '.pid', 'w').write(str(os.getpid())); time.sleep(600)"]
    with pytest.raises(AttachmentError, match=r"took more than 3 s\. The PDF may be damaged"):
        pdf_text(path, timeout_s=3, command=hang)
    pid = int((tmp_path / "hostile.pdf.pid").read_text())
    assert not psutil.pid_exists(pid)


@pytest.mark.skipif(sys.platform == "win32", reason="no resource limits on Windows")
def test_the_reader_caps_its_own_memory_and_cpu() -> None:
    """So a reader left behind (the app quit mid-read) cannot loop or grow for ever."""
    probe = ("import resource; from inglenook.core import attachments_pdf as m; "
             "m.limit_resources(); "
             "print(resource.getrlimit(resource.RLIMIT_AS)[0], "
             "resource.getrlimit(resource.RLIMIT_CPU)[0])")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True).stdout.split()
    assert [int(v) for v in out] == [attachments_pdf.MEMORY_LIMIT_BYTES,
                                     attachments_pdf.CPU_LIMIT_S]


def test_a_pdf_reader_that_crashes(tmp_path: Path) -> None:
    path = write(tmp_path, "crash.pdf", b"%PDF-1.7\n")
    crash = [sys.executable, "-c", "import sys; sys.exit(3)"]
    with pytest.raises(AttachmentError, match=r"reader stopped \(exit code 3\)"):
        pdf_text(path, command=crash)


def test_a_binary_file(tmp_path: Path) -> None:
    path = write(tmp_path, "report.docx", b"PK\x03\x04\x14\x00\x00\x00\x08\x00")
    with pytest.raises(AttachmentError, match=r"^report\.docx was not attached: it looks like "
                                              r"binary data, not text\. Attach text, code"):
        read_attachment(path)


def test_text_that_is_not_utf8(tmp_path: Path) -> None:
    path = write(tmp_path, "menu.txt", "Café crème".encode("cp1252"))
    with pytest.raises(AttachmentError, match=r"not UTF-8 text \(byte 3 is not\)\. Save it"):
        read_attachment(path)


def test_a_huge_file_is_refused_before_it_is_read(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "huge.log"
    with path.open("wb") as f:  # sparse: nothing written but its size
        f.truncate(MAX_TEXT_FILE_BYTES + 1)
    monkeypatch.setattr(attachments, "_decode", lambda *_: pytest.fail("it was read"))
    with pytest.raises(AttachmentError, match=r"it is 2 MB, and a text file can be at most 2 MB"):
        read_attachment(path)


def test_a_huge_pdf_is_refused_before_a_reader_starts(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "huge.pdf"
    with path.open("wb") as f:
        f.write(b"%PDF-1.7\n")
        f.truncate(MAX_PDF_BYTES + 1)
    monkeypatch.setattr(attachments, "pdf_text", lambda *_: pytest.fail("a reader started"))
    with pytest.raises(AttachmentError, match=r"a PDF can be at most 50 MB"):
        read_attachment(path)


def test_text_longer_than_a_prompt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(attachments, "MAX_TEXT_CHARS", 10)
    with pytest.raises(AttachmentError, match=r"has 11 characters of text, and an attachment "
                                              r"can have at most 10"):
        read_attachment(write(tmp_path, "long.txt", "x" * 11))


def test_empty_missing_and_folders(tmp_path: Path) -> None:
    with pytest.raises(AttachmentError, match=r"^empty\.md was not attached: it has no text\.$"):
        read_attachment(write(tmp_path, "empty.md", " \n\n"))
    with pytest.raises(AttachmentError, match=r"^gone\.txt was not found\.$"):
        read_attachment(tmp_path / "gone.txt")
    with pytest.raises(AttachmentError, match="it is not a file"):
        read_attachment(tmp_path)


def test_images_are_refused_unless_the_model_can_see(tmp_path: Path) -> None:
    path = write(tmp_path, "photo.png", PNG)
    with pytest.raises(AttachmentError, match=r"^photo\.png is an image, and the loaded model "
                                              r"cannot see images\."):
        read_attachment(path)
    seen = read_attachment(path, vision=True)
    assert (seen.kind, seen.mime, seen.data, seen.text) == ("image", "image/png", PNG, "")
    assert seen.tokens == IMAGE_TOKENS
    jpeg = write(tmp_path, "named-wrongly.txt", b"\xff\xd8\xff\xe0" + b"\x00" * 16)
    with pytest.raises(AttachmentError, match="is an image"):
        read_attachment(jpeg)  # known by its bytes, not its name


# -- what the model reads ---------------------------------------------------------------------

def test_inline_puts_the_files_before_the_question() -> None:
    a = Attachment("a.txt", "text", 5, "alpha")
    b = Attachment("b.csv", "csv", 5, "x,y")
    assert inline("Compare them.", [a, b]) == (
        "File: a.txt\n```text\nalpha\n```\n\nFile: b.csv\n```csv\nx,y\n```\n\nCompare them.")
    assert inline("", [a]) == "File: a.txt\n```text\nalpha\n```"
    assert inline("Just text", []) == "Just text"


def test_tokens_count_what_the_model_reads() -> None:
    a = Attachment("a.txt", "text", 4000, "word " * 800)
    assert a.tokens == estimate_tokens(inline_part(a))
    assert 1000 < a.tokens < 1020  # the text, its name and its fence


def test_will_not_fit() -> None:
    big = Attachment("big.txt", "text", 0, "x" * 4000)  # ≈1,000 tokens with its fence
    assert will_not_fit(big, 0, 0) == ""  # no model yet: checked again when sending
    assert will_not_fit(big, 0, 2048) == ""
    assert will_not_fit(big, 600, 2048).startswith(
        "big.txt was not attached: it is about 1,007 tokens, and with what is already in the "
        "message (about 600) that is more than the 2,048-token context")
    alone = will_not_fit(big, 0, 1024)
    assert alone.startswith("big.txt was not attached: it is about 1,007 tokens, and the "
                            "model's context holds 1,024 for the message and the reply")


def test_describe() -> None:
    assert Attachment("Q1.pdf", "pdf", 214_000, "…").describe() == "Q1.pdf · PDF · 214 KB"
    assert Attachment("a.py", "code", 812, "…").describe() == "a.py · Code · 812 B"


def test_the_reader_command(monkeypatch: pytest.MonkeyPatch) -> None:
    """This Python and the reader module; a frozen bundle is its own executable with a flag
    (inglenook/__main__.py must dispatch it, as it does --engine-host)."""
    assert attachments.pdf_command() == [sys.executable, "-m", "inglenook.core.attachments_pdf"]
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    assert attachments.pdf_command() == [sys.executable, "--pdf-text"]
