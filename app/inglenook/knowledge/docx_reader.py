"""The text of a Word document (.docx), inflated within bounds.

A .docx is a zip archive, and a zip's sizes are the author's word: 2 MB of deflated zeros make
2 GB of `word/document.xml`. Every member is inflated here first, as a stream, and the archive
is refused as soon as a member passes MAX_MEMBER_BYTES, all of them together MAX_TOTAL_BYTES,
or a member has inflated more than MAX_RATIO times the compressed bytes read so far, once past
RATIO_GRACE_BYTES (real documents' XML stays near 10:1; bombs are hundreds to thousands to
one). Only then is it given to python-docx, whose XML parser (lxml, without entity expansion)
refuses deep nesting and huge text nodes: any such refusal is this file's, said in words.

This runs in the converter's child process (knowledge/convert_process.py), capped in memory and
time: what the bounds miss costs a killed child, never the window.
"""

from __future__ import annotations

import io
import struct
import zipfile
import zlib

MAX_MEMBERS = 10_000
MAX_MEMBER_BYTES = 64_000_000
MAX_TOTAL_BYTES = 160_000_000
MAX_RATIO = 100
RATIO_GRACE_BYTES = 1 << 20  # a small member may compress better than any real one does
_BLOCK = 1 << 16
_HEADER = struct.Struct("<4s2B4HL2L2H")  # a zip's local file header (its last two: name, extra)


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
            try:
                total = _inflate(data, member, total)
            except DocxError:
                raise
            except Exception as exc:  # zlib.error, a header out of the file: damaged
                raise DocxError(f"its part {member.filename!r} cannot be read "
                                f"({type(exc).__name__})") from exc


def _inflate(data: bytes, member: zipfile.ZipInfo, total: int) -> int:
    """Inflate one member from its raw bytes, counting what was fed to zlib and what came
    out (zipfile reads ahead of its decompressor, so its counts cannot give the ratio so far);
    the running total of all members."""
    if member.compress_type == zipfile.ZIP_STORED:
        _check(member, member.compress_size, total + member.compress_size,
               member.compress_size)
        return total + member.compress_size
    if member.compress_type != zipfile.ZIP_DEFLATED:
        raise DocxError(f"its part {member.filename!r} is compressed in a way Word documents "
                        f"are not")
    header = data[member.header_offset:member.header_offset + _HEADER.size]
    fields = _HEADER.unpack(header)
    if fields[0] != b"PK\x03\x04":
        raise DocxError(f"its part {member.filename!r} cannot be found in the archive")
    start = member.header_offset + _HEADER.size + fields[-2] + fields[-1]
    raw = memoryview(data)[start:start + member.compress_size]
    inflater = zlib.decompressobj(-zlib.MAX_WBITS)
    inflated = fed = 0
    pending = b""
    while True:
        if not pending:
            if fed >= len(raw) or inflater.eof:
                break
            pending = bytes(raw[fed:fed + _BLOCK])
            fed += len(pending)
        out = inflater.decompress(pending, _BLOCK)
        pending = inflater.unconsumed_tail
        inflated += len(out)
        total += len(out)
        _check(member, inflated, total, fed - len(pending))
    return total


def _check(member: zipfile.ZipInfo, inflated: int, total: int, consumed: int) -> None:
    if inflated > MAX_MEMBER_BYTES:
        raise DocxError(f"its part {member.filename!r} inflates to more than "
                        f"{MAX_MEMBER_BYTES // 1_000_000} MB (a zip bomb?): not read")
    if total > MAX_TOTAL_BYTES:
        raise DocxError(f"its parts inflate to more than {MAX_TOTAL_BYTES // 1_000_000} MB "
                        f"together (a zip bomb?): not read")
    if inflated > RATIO_GRACE_BYTES and inflated > MAX_RATIO * max(consumed, 1):
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
