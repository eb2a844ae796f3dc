"""The text of a Word document (.docx), inflated within bounds.

A .docx is a zip archive, and a zip's sizes are the author's word: 2 MB of deflated zeros make
2 GB of `word/document.xml`. Every member is inflated here first, as a stream, and the archive
is refused as soon as a member passes MAX_MEMBER_BYTES, all of them together MAX_TOTAL_BYTES,
or a member inflates past MAX_RATIO times its compressed size once past RATIO_GRACE_BYTES
(real documents' XML stays near 10:1; bombs are thousands to one). Only then is it given to
python-docx, whose XML parser (lxml, without entity expansion) refuses deep nesting and huge
text nodes: any such refusal is this file's, said in words.

This runs in the converter's child process (knowledge/convert_process.py), capped in memory and
time: what the bounds miss costs a killed child, never the window.
"""

from __future__ import annotations

import io
import zipfile

MAX_MEMBERS = 10_000
MAX_MEMBER_BYTES = 64_000_000
MAX_TOTAL_BYTES = 160_000_000
MAX_RATIO = 100
RATIO_GRACE_BYTES = 1 << 20  # a small member may compress better than any real one does
_BLOCK = 1 << 16


class DocxError(Exception):
    """str() says why, as the end of "<file> was not indexed: …"."""


def check_inflation(data: bytes) -> None:
    """Inflate every member of the zip archive `data` as a stream and discard it; DocxError as
    soon as a bound is passed (see the module's docstring)."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, ValueError) as exc:
        raise DocxError(f"it is not a Word document that can be read ({exc})") from exc
    with archive:
        members = archive.infolist()
        if len(members) > MAX_MEMBERS:
            raise DocxError(f"its archive holds {len(members):,} parts, more than the "
                            f"{MAX_MEMBERS:,} a Word document may have")
        total = 0
        for member in members:
            inflated = 0
            try:
                with archive.open(member) as stream:
                    while block := stream.read(_BLOCK):
                        inflated += len(block)
                        total += len(block)
                        _check(member, inflated, total)
            except DocxError:
                raise
            except Exception as exc:  # BadZipFile (CRC), zlib.error, EOFError: damaged
                raise DocxError(f"its part {member.filename!r} cannot be read "
                                f"({type(exc).__name__})") from exc


def _check(member: zipfile.ZipInfo, inflated: int, total: int) -> None:
    if inflated > MAX_MEMBER_BYTES:
        raise DocxError(f"its part {member.filename!r} inflates to more than "
                        f"{MAX_MEMBER_BYTES // 1_000_000} MB (a zip bomb?): not read")
    if total > MAX_TOTAL_BYTES:
        raise DocxError(f"its parts inflate to more than {MAX_TOTAL_BYTES // 1_000_000} MB "
                        f"together (a zip bomb?): not read")
    if inflated > RATIO_GRACE_BYTES and inflated > MAX_RATIO * max(member.compress_size, 1):
        raise DocxError(f"its part {member.filename!r} inflates more than {MAX_RATIO}-fold "
                        f"(a zip bomb?): not read")


def docx_text(data: bytes) -> str:
    """Paragraphs (headings as Markdown headings), then tables' rows; DocxError why not."""
    check_inflation(data)
    import docx  # python-docx
    from docx.opc.exceptions import PackageNotFoundError
    from lxml import etree

    try:
        document = docx.Document(io.BytesIO(data))
    except (PackageNotFoundError, zipfile.BadZipFile, KeyError, ValueError) as exc:
        raise DocxError(f"it is not a Word document that can be read "
                        f"({type(exc).__name__})") from exc
    except etree.XMLSyntaxError as exc:  # entity loops, deep nesting, huge text nodes
        raise DocxError(f"its XML was refused by the parser ({_first_line(exc)})") from exc
    # Style names looked up once: python-docx's paragraph.style scans every style of the
    # document for each paragraph without one (a 10,000-paragraph document took a minute).
    names = {s.style_id: s.name or "" for s in document.styles}
    lines: list[str] = []
    for paragraph in document.paragraphs:
        style_id = paragraph._p.style
        style = names.get(style_id, "") if style_id else ""
        text = paragraph.text.strip()
        if style.startswith("Heading") and style[7:].strip().isdigit() and text:
            lines += ["", "#" * min(6, int(style[7:])) + " " + text]
        elif style == "Title" and text:
            lines += ["", "# " + text]
        else:
            lines.append(text)
    for table in document.tables:
        for row in table.rows:
            lines.append(" | ".join(cell.text.strip() for cell in row.cells))
    return "\n".join(lines).strip()


def _first_line(exc: Exception) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0][:200]
