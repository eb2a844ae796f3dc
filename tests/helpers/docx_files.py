"""Word documents built for tests: a real python-docx package whose word/document.xml is
replaced by what a test needs (a zip bomb, XML a parser refuses)."""

from __future__ import annotations

import io
import zipfile

import docx

XML_HEAD = (b'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
            b'<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/'
            b'main"><w:body>')
XML_TAIL = b"</w:body></w:document>"


def with_document_xml(parts: list[bytes] | bytes, whole: bool = False) -> bytes:
    """A .docx whose document.xml is XML_HEAD + parts + XML_TAIL (or parts alone if whole),
    written as it streams: `parts` may add up to gigabytes of deflated zeros."""
    base = io.BytesIO()
    docx.Document().save(base)
    source = zipfile.ZipFile(io.BytesIO(base.getvalue()))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for info in source.infolist():
            if info.filename != "word/document.xml":
                archive.writestr(info, source.read(info))
        with archive.open("word/document.xml", "w", force_zip64=True) as xml:
            if not whole:
                xml.write(XML_HEAD)
            for part in [parts] if isinstance(parts, bytes) else parts:
                xml.write(part)
            if not whole:
                xml.write(XML_TAIL)
    return out.getvalue()


def zip_bomb(megabytes: int) -> bytes:
    """A paragraph of `megabytes` MB of one letter: deflated ~1000:1."""
    block = b"a" * (1 << 20)
    return with_document_xml([b"<w:p><w:r><w:t>", *(block for _ in range(megabytes)),
                              b"</w:t></w:r></w:p>"])


def paragraphs(*texts: str) -> bytes:
    return with_document_xml([f"<w:p><w:r><w:t>{t}</w:t></w:r></w:p>".encode() for t in texts])
