"""The text of a PDF, read in a process of its own (core/attachments.py starts it).

A PDF is a program for a parser: damaged or hostile files have made PDF libraries loop, recurse
without end or inflate a few kilobytes into gigabytes. Here that costs a child process the
caller kills after its time budget, with its memory capped, never the window.

Run as `python -m inglenook.core.attachments_pdf [--max-chars N] FILE` (a frozen bundle:
`inglenook --pdf-text …`); FILE `-` reads the PDF's bytes from stdin (the knowledge index gives
the bytes it has already read and checked, never a path to open again). Prints one JSON object,
{"text": str, "pages": int, "pages_read": int, "page_starts": [[page, offset], ...]} or
{"error": str}. The text stops after the page that passes max_chars (MAX_CHARS unless given):
pages_read < pages says it was cut there.
"""

from __future__ import annotations

import io
import json
import logging
import sys
from pathlib import Path
from typing import BinaryIO

MEMORY_LIMIT_BYTES = 2 << 30  # address space: far beyond a real PDF's text, short of swapping
# CPU seconds, after which the kernel ends the process itself: the caller kills it sooner, but a
# caller that quits mid-read (the app closing) must not leave a looping reader behind.
CPU_LIMIT_S = 120
MAX_CHARS = 1_000_001  # one more than an attachment may have: enough to say it is too long
MAX_STDIN_BYTES = 1 << 27  # a PDF given on stdin: the knowledge index's files are at most 64 MB


def limit_resources(memory_bytes: int = MEMORY_LIMIT_BYTES, cpu_s: int = CPU_LIMIT_S) -> None:
    """Cap this process's address space and CPU seconds (the knowledge index's converter
    process, knowledge/convert_process.py, is capped the same way)."""
    try:
        import resource
    except ImportError:  # Windows: the caller's time budget still applies
        return
    for which, wanted in ((resource.RLIMIT_AS, memory_bytes), (resource.RLIMIT_CPU, cpu_s)):
        try:
            _, hard = resource.getrlimit(which)
            limit = wanted if hard == resource.RLIM_INFINITY else min(hard, wanted)
            resource.setrlimit(which, (limit, hard))
        except (ValueError, OSError):  # not allowed here (some sandboxes, macOS's RLIMIT_AS)
            pass


def extract(path: Path | BinaryIO, max_chars: int = MAX_CHARS) -> dict:
    """{"text", "pages", "pages_read", "page_starts"} or {"error"}: a sentence for the user
    after "report.pdf was not attached: "."""
    from pypdf import PdfReader
    from pypdf.errors import DependencyError, FileNotDecryptedError

    try:
        reader = PdfReader(path)
        if reader.is_encrypted and not reader.decrypt(""):
            return {"error": "it is protected by a password."}
        texts: list[str] = []
        length = 0
        for page in reader.pages:
            text = page.extract_text() or ""
            texts.append(text.strip())
            length += len(text)
            if length > max_chars:
                break
        # Where each page's text starts in "text" (pages without text have none): the
        # knowledge index cites pages (knowledge/convert.py).
        starts, offset = [], 0
        for number, page_text in enumerate(texts, start=1):
            if page_text:
                starts.append([number, offset])
                offset += len(page_text) + 2
        return {"text": "\n\n".join(t for t in texts if t), "pages": len(reader.pages),
                "pages_read": len(texts), "page_starts": starts}
    except (FileNotDecryptedError, DependencyError):
        return {"error": "it is encrypted in a way Inglenook cannot read."}
    except MemoryError:
        return {"error": "reading its text needed more memory than a PDF should. "
                         "The PDF may be damaged."}
    except Exception as exc:  # a damaged file shows any symptom: PdfReadError, KeyError, …
        return {"error": f"it is not a PDF that can be read ({type(exc).__name__}). "
                         "The PDF may be damaged."}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    max_chars = MAX_CHARS
    if len(args) == 3 and args[0] == "--max-chars" and args[1].isdigit():
        max_chars, args = int(args[1]), args[2:]
    if len(args) != 1:
        print("usage: python -m inglenook.core.attachments_pdf [--max-chars N] FILE|-",
              file=sys.stderr)
        return 2
    logging.disable(logging.CRITICAL)  # pypdf logs every defect it works around
    limit_resources()
    if args[0] == "-":
        data = sys.stdin.buffer.read(MAX_STDIN_BYTES + 1)
        result = ({"error": "it is larger than a PDF given to the reader may be."}
                  if len(data) > MAX_STDIN_BYTES else extract(io.BytesIO(data), max_chars))
    else:
        result = extract(Path(args[0]), max_chars)
    # ASCII JSON: broken font maps can give lone surrogates, which UTF-8 cannot carry.
    sys.stdout.buffer.write(json.dumps(result).encode("ascii"))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
