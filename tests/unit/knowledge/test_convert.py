"""Converters and chunking: each kind of file becomes text whose passages cite their place."""

from __future__ import annotations

import io
from pathlib import Path

import docx
import pytest

from inglenook.knowledge.chunking import MAX_CHARS, TARGET_CHARS, chunk_pages
from inglenook.knowledge.convert import ConvertError, Page, convert, html_text, kind_of
from tests.helpers.pdfs import text_pdf


def test_kinds_come_from_the_name() -> None:
    assert [kind_of(n) for n in ("a.MD", "b.py", "c.csv", "d.htm", "e.pdf", "f.docx",
                                 "g.txt", "h.exe")] == \
        ["markdown", "code", "csv", "html", "pdf", "docx", "text", None]


def test_html_loses_scripts_and_tags_and_keeps_headings() -> None:
    text = html_text("<html><head><title>t</title><style>p{}</style></head><body>"
                     "<script>alert('x')</script><h2>Tides</h2><p>High &amp; low</p>"
                     "<p>twice a day</p></body></html>")
    assert text == "## Tides\n\nHigh & low\n\ntwice a day"


def test_csv_rows_name_their_columns(tmp_path: Path) -> None:
    pages = convert("csv", b"animal,colour\nowl,grey\nfox,\n", tmp_path / "a.csv")
    assert pages == [Page("animal | colour\nanimal: owl; colour: grey\nanimal: fox")]


def test_docx_paragraphs_keep_their_heading_levels(tmp_path: Path) -> None:
    document = docx.Document()
    document.add_heading("Recipes", level=1)
    document.add_paragraph("Bread needs flour.")
    document.add_heading("Soup", level=2)
    document.add_paragraph("Soup needs water.")
    buffer = io.BytesIO()
    document.save(buffer)
    [page] = convert("docx", buffer.getvalue(), tmp_path / "r.docx")
    chunks = chunk_pages([page])
    assert [(c.heading, c.text.splitlines()[-1]) for c in chunks] == \
        [("Recipes", "Bread needs flour."), ("Soup", "Soup needs water.")]


def test_a_damaged_docx_is_refused_with_a_reason(tmp_path: Path) -> None:
    with pytest.raises(ConvertError, match="not a Word document"):
        convert("docx", b"PK\x03\x04 not really", tmp_path / "x.docx")


def test_a_pdf_is_cited_by_page(tmp_path: Path) -> None:
    path = tmp_path / "paper.pdf"
    path.write_bytes(text_pdf(["First page about comets.", "Second page about owls."]))
    chunks = chunk_pages(convert("pdf", path.read_bytes(), path))
    assert [(c.page, c.location) for c in chunks] == [(1, "page 1, line 1"),
                                                      (2, "page 2, line 1")]
    assert "owls" in chunks[1].text


def test_utf16_with_its_mark_is_text() -> None:
    assert convert("text", "tide\r\ntable".encode("utf-16"), Path("t.txt")) == \
        [Page("tide\ntable")]


def test_chunks_end_before_headings_and_cite_their_lines() -> None:
    text = "# One\nalpha\nbeta\n# Two\ngamma"
    chunks = chunk_pages([Page(text)])
    assert [(c.heading, c.line_start, c.line_end) for c in chunks] == \
        [("One", 1, 3), ("Two", 4, 5)]


def test_a_code_block_is_not_cut_at_its_blank_lines() -> None:
    code = "```\n" + "\n\n".join(f"x{n} = {n}  # " + "c" * 60 for n in range(40)) + "\n```"
    text = "p" * (TARGET_CHARS + 10) + "\n\n" + code + "\n\nafter"
    chunks = chunk_pages([Page(text)])
    assert any(c.text.startswith("```") and c.text.endswith("```") for c in chunks)


def test_long_text_is_cut_near_the_target_and_never_past_the_maximum() -> None:
    paragraphs = "\n\n".join("word " * 50 for _ in range(100))
    chunks = chunk_pages([Page(paragraphs + "\n" + "z" * (3 * MAX_CHARS))])
    assert len(chunks) > 10
    assert all(len(c.text) <= MAX_CHARS + 300 for c in chunks)
    assert chunks[-1].line_start == chunks[-1].line_end  # pieces of the one long line
