"""Files to text, in pages: what the chunker cuts and the citations point into.

Text is UTF-8 (or UTF-16 with its byte-order mark); a file with NUL bytes or that is not
valid UTF-8 is binary, whatever its name says, and a name without a suffix (README) is text
when its bytes are. HTML loses its tags, scripts and styles, and its headings become Markdown
headings; CSV rows become lines of `column: value`; DOCX paragraphs keep their heading levels.

PDFs, Word documents and HTML pages over 256 kB are parsed in a child process, never in the
window's: the PDF reader's (core/attachments_pdf.py) or the converter's (convert_process.py),
each capped in address space and CPU, killed after its time budget or on Cancel, given the bytes
the indexer read and checked (never the path again, which may point elsewhere by now). A Word
document is inflated within bounds first (docx_reader.py: a zip bomb is refused as it streams).

Two kinds are read only up to a cap, and say so (Converted.cut), so that the file is listed as
read in part, never passed off as whole: a PDF's text stops after the page that passes
PDF_MAX_CHARS characters, a CSV after CSV_MAX_ROWS rows.

Changing what this makes of a file? Bump indexer.READER_VERSION (files are read again).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from inglenook.core import attachments_pdf
from inglenook.core.attachments import pdf_command
from inglenook.knowledge import convert_process
from inglenook.knowledge.text_decode import ConvertError as ConvertError  # re-exported
from inglenook.knowledge.text_decode import decode as decode
from inglenook.knowledge.text_decode import html_text as html_text
from inglenook.knowledge.text_decode import newlines

PDF_TIMEOUT_S = 60.0
CONVERT_TIMEOUT_S = 60.0  # a Word document or an HTML page, in the converter's child
# A page up to this is parsed here: a child's start costs more than parsing it (a folder of
# 1,000 small pages would take a minute more), and Python's HTML parser, linear on pages like
# these, is slow (quadratic at worst) only on large hostile ones, which go to the child.
HTML_IN_PROCESS_BYTES = 256_000
PDF_MAX_CHARS = attachments_pdf.MAX_CHARS - 1  # the reader's cap: ~400 pages of prose
CSV_MAX_ROWS = 100_000
TEXT_SUFFIXES = frozenset({".txt", ".text", ".rst", ".log", ".org", ".tex"})
MARKDOWN_SUFFIXES = frozenset({".md", ".markdown", ".mdx"})
CODE_SUFFIXES = frozenset({
    ".py", ".js", ".ts", ".tsx", ".jsx", ".c", ".h", ".cc", ".cpp", ".hpp", ".java", ".kt",
    ".go", ".rs", ".rb", ".php", ".cs", ".swift", ".m", ".scala", ".sh", ".bash", ".zsh",
    ".ps1", ".sql", ".lua", ".pl", ".r", ".jl", ".hs", ".ml", ".ex", ".exs", ".clj", ".dart",
    ".toml", ".yaml", ".yml", ".json", ".ini", ".cfg", ".xml", ".css", ".scss", ".vue"})
KINDS = {**{s: "text" for s in TEXT_SUFFIXES}, **{s: "markdown" for s in MARKDOWN_SUFFIXES},
         **{s: "code" for s in CODE_SUFFIXES}, ".csv": "csv", ".tsv": "csv", ".html": "html",
         ".htm": "html", ".pdf": "pdf", ".docx": "docx"}


class ConvertCancelled(Exception):
    """The run was cancelled while the file was converted: nothing of it was kept."""


@dataclass(frozen=True)
class Page:
    text: str
    number: int | None = None  # a PDF's page number; None for files without pages


@dataclass(frozen=True)
class Converted:
    pages: list[Page]
    cut: str = ""  # "" all of it was read, else what was read, in words ("only the first …")


def kind_of(name: str) -> str | None:
    """The kind by the name's suffix; a name without one (README, LICENSE, NOTES) is read as
    text, and refused as binary if its bytes say so (decode). Hidden files without one
    (.env, .netrc, .bash_history) are not read: they hold settings and secrets, not notes."""
    suffix = Path(name).suffix.lower()
    if suffix:
        return KINDS.get(suffix)
    return None if name.startswith(".") else "text"


def convert(kind: str, data: bytes, path: Path,
            cancelled: Callable[[], bool] = lambda: False) -> Converted:
    """The text of a file already read (data), by its kind; path only names it (its suffix).
    PDFs, Word documents and large HTML pages are converted in a child process (given the bytes
    on its stdin), capped in memory and time, killed as soon as `cancelled()` says so
    (ConvertCancelled)."""
    if kind == "pdf":
        return _pdf(data, cancelled)
    if kind == "docx" or (kind == "html" and len(data) > HTML_IN_PROCESS_BYTES):
        return _isolated(kind, data, cancelled)
    text = decode(data)
    if kind == "html":
        return Converted([Page(html_text(text))])
    if kind == "csv":
        table, cut = _csv(text, "\t" if path.suffix.lower() == ".tsv" else ",")
        return Converted([Page(table)], cut)
    return Converted([Page(text)])


def _csv(text: str, delimiter: str) -> tuple[str, str]:
    """The rows as lines, and "" or what was left out."""
    rows = csv.reader(io.StringIO(text), delimiter=delimiter)
    header = next(rows, [])
    lines = [" | ".join(header)]
    for n, row in enumerate(rows):
        if n >= CSV_MAX_ROWS:
            return "\n".join(lines), (f"only the first {CSV_MAX_ROWS:,} rows read (a CSV is "
                                      f"indexed up to that)")
        pairs = [f"{name}: {value}" for name, value in zip(header, row, strict=False) if value]
        pairs += row[len(header):]
        lines.append("; ".join(pairs))
    return "\n".join(lines), ""


def _in_child(argv: list[str], data: bytes, what: str, cancelled: Callable[[], bool],
              timeout_s: float) -> dict:
    """The JSON object a converter's child process printed for data; ConvertError why not,
    ConvertCancelled when cancelled() said so while it ran (it is killed either way)."""
    try:
        out, code = convert_process.run_child(argv, data, timeout_s, cancelled)
    except convert_process.ChildCancelled:
        raise ConvertCancelled from None
    except convert_process.ChildTimedOut:
        raise ConvertError(f"reading its text took more than {timeout_s:.0f} s (the file "
                           f"may be damaged, or built to do that)") from None
    except OSError as exc:  # the child could not be started
        raise ConvertError(f"the {what} could not be started: {exc.strerror or exc}",
                           lasting=False) from exc
    try:
        result = json.loads(out.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        result = None
    if isinstance(result, dict) and isinstance(result.get("error"), str):
        raise ConvertError(result["error"])
    if not isinstance(result, dict):
        if code < 0:  # killed by a signal: its CPU cap, or the system short of memory
            raise ConvertError(f"the {what} was stopped (signal {-code}): reading it took "
                               "more memory or time than a document may (the file may be "
                               "damaged, or built to do that)")
        raise ConvertError(f"the {what} stopped (exit code {code}); the file may be damaged")
    return result


def _isolated(kind: str, data: bytes, cancelled: Callable[[], bool]) -> Converted:
    result = _in_child([*convert_process.command(), kind], data, "converter", cancelled,
                       CONVERT_TIMEOUT_S)
    try:
        pages = [Page(str(text).encode("utf-8", "replace").decode("utf-8"),
                      None if number is None else int(number))
                 for text, number in result["pages"]]
    except (KeyError, TypeError, ValueError):
        raise ConvertError("the converter gave no text it could read") from None
    return Converted(pages)


def _pdf(data: bytes, cancelled: Callable[[], bool]) -> Converted:
    result = _in_child([*pdf_command(), "--max-chars", str(PDF_MAX_CHARS), "-"], data,
                       "PDF reader", cancelled, PDF_TIMEOUT_S)
    if "text" not in result:
        raise ConvertError("the PDF reader stopped; the PDF may be damaged")
    text = str(result["text"]).encode("utf-8", "replace").decode("utf-8")
    starts = [(int(n), int(at)) for n, at in result.get("page_starts", [])] or [(1, 0)]
    pages = []
    for i, (number, at) in enumerate(starts):
        end = starts[i + 1][1] if i + 1 < len(starts) else len(text)
        pages.append(Page(newlines(text[at:end]).strip(), number))
    total, read = int(result.get("pages", 0)), int(result.get("pages_read", 0))
    cut = ""
    if 0 < read < total:
        cut = (f"only pages 1–{read} of {total:,} read (a PDF's text is indexed up to "
               f"{PDF_MAX_CHARS:,} characters)")
    return Converted([page for page in pages if page.text], cut)
