"""Converters and chunking: each kind of file becomes text whose passages cite their place."""

from __future__ import annotations

import io
from pathlib import Path

import docx
import pytest

from inglenook.knowledge import convert as convert_module
from inglenook.knowledge.chunking import MAX_CHARS, TARGET_CHARS, chunk_pages
from inglenook.knowledge.convert import (
    Converted,
    ConvertError,
    Page,
    convert,
    html_text,
    kind_of,
)
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
    done = convert("csv", b"animal,colour\nowl,grey\nfox,\n", tmp_path / "a.csv")
    assert done == Converted([Page("animal | colour\nanimal: owl; colour: grey\nanimal: fox")])


def test_a_csv_past_its_cap_says_how_much_was_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(convert_module, "CSV_MAX_ROWS", 3)
    done = convert("csv", b"n\n1\n2\n3\n", tmp_path / "a.csv")
    assert done.cut == "" and done.pages[0].text.endswith("n: 3")
    done = convert("csv", b"n\n1\n2\n3\n4\n5\n", tmp_path / "a.csv")
    assert done.cut == "only the first 3 rows read (a CSV is indexed up to that)"
    assert done.pages[0].text.endswith("n: 3")  # what was read is kept


def test_docx_paragraphs_keep_their_heading_levels(tmp_path: Path) -> None:
    document = docx.Document()
    document.add_heading("Recipes", level=1)
    document.add_paragraph("Bread needs flour.")
    document.add_heading("Soup", level=2)
    document.add_paragraph("Soup needs water.")
    buffer = io.BytesIO()
    document.save(buffer)
    [page] = convert("docx", buffer.getvalue(), tmp_path / "r.docx").pages
    chunks = chunk_pages([page])
    assert [(c.heading, c.text.splitlines()[-1]) for c in chunks] == \
        [("Recipes", "Bread needs flour."), ("Soup", "Soup needs water.")]


def test_a_damaged_docx_is_refused_with_a_reason(tmp_path: Path) -> None:
    with pytest.raises(ConvertError, match="not a Word document"):
        convert("docx", b"PK\x03\x04 not really", tmp_path / "x.docx")


def test_a_pdf_is_cited_by_page(tmp_path: Path) -> None:
    path = tmp_path / "paper.pdf"
    path.write_bytes(text_pdf(["First page about comets.", "Second page about owls."]))
    done = convert("pdf", path.read_bytes(), path)
    chunks = chunk_pages(done.pages)
    assert [(c.page, c.location) for c in chunks] == [(1, "page 1, line 1"),
                                                      (2, "page 2, line 1")]
    assert "owls" in chunks[1].text and done.cut == ""


def test_a_pdf_is_read_from_the_bytes_given_not_from_its_path(tmp_path: Path) -> None:
    path = tmp_path / "paper.pdf"
    path.write_bytes(text_pdf(["The bytes that were read and checked."]))
    data = path.read_bytes()
    path.write_bytes(text_pdf(["What the path holds by now."]))
    (page,) = convert("pdf", data, path).pages
    assert page.text == "The bytes that were read and checked."


def test_a_pdf_past_its_cap_says_which_pages_were_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(convert_module, "PDF_MAX_CHARS", 30)
    pages = ["Twenty characters on", "page two as many one", "page three", "page four"]
    done = convert("pdf", text_pdf(pages), tmp_path / "long.pdf")
    assert [p.number for p in done.pages] == [1, 2]  # the page that passed 30 is kept
    assert done.cut == "only pages 1–2 of 4 read (a PDF's text is indexed up to 30 characters)"


def test_utf16_with_its_mark_is_text() -> None:
    assert convert("text", "tide\r\ntable".encode("utf-16"), Path("t.txt")).pages == \
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


def python_function(n: int, lines: int) -> str:
    """A function with a blank line inside it, `lines` statements on either side."""
    half = "\n".join(f"    total_{n} += measure(item_{i}, weight={i})  # step {i}"
                     for i in range(lines))
    return f"@cached\ndef function_{n}(items):\n    total_{n} = 0\n{half}\n\n{half}\n" \
           f"    return total_{n}\n"


def c_function(n: int, lines: int) -> str:
    half = "\n".join(f"    total += measure(items[{i}], {i}); /* step {i} */"
                     for i in range(lines))
    return f"/* function {n} */\nstatic int\nfunction_{n}(const int *items)\n{{\n" \
           f"    int total = 0;\n{half}\n\n#ifdef TRACE\n    trace({n});\n#endif\n" \
           f"out:\n{half}\n    return total;\n}}\n"


@pytest.mark.parametrize("function", [python_function, c_function])
def test_code_is_cut_between_top_level_definitions(function: object) -> None:
    sizes = [9, 5, 12, 3, 7, 14, 4, 10, 6, 8]  # functions of ~600 to ~2,000 characters
    functions = [function(n, size) for n, size in enumerate(sizes)]  # type: ignore[operator]
    text = "#include <stdio.h>\nimport os\n\n" + "\n\n".join(functions)
    assert all(len(f) < MAX_CHARS for f in functions)
    chunks = chunk_pages([Page(text)], markdown=False, code=True)
    for n, f in enumerate(functions):  # each function whole in one passage
        assert sum(f.strip() in c.text for c in chunks) == 1, f"function {n} was cut"
    assert all(len(c.text) <= MAX_CHARS for c in chunks)
    lines = text.split("\n")  # each passage cites the lines it holds
    assert all("\n".join(lines[c.line_start - 1:c.line_end]) == c.text for c in chunks)
    # As plain text (how code was cut before), blank lines inside functions were cut at.
    plain = chunk_pages([Page(text)], markdown=False)
    assert any(sum(f.strip() in c.text for c in plain) == 0 for f in functions)


def test_a_definition_longer_than_a_passage_is_still_cut_at_blank_lines() -> None:
    big = python_function(0, 60)
    assert len(big) > MAX_CHARS
    chunks = chunk_pages([Page("x = 1\n\n" + big)], markdown=False, code=True)
    assert len(chunks) >= 2 and all(len(c.text) <= MAX_CHARS for c in chunks)
    assert "".join(c.text for c in chunks).replace("\n", "") == \
        ("x = 1" + big).replace("\n", "")
