"""Cutting a document's pages into passages that keep their place (lines, page) and sense.

A passage ends before a heading (Markdown `#`, which HTML and DOCX headings become too), and
near TARGET_CHARS at a blank line where it can; a fenced code block is not cut unless it alone
is longer than MAX_CHARS. Each passage remembers the last heading above it, which is indexed
with it (a question often names the section rather than the words inside it).

Code is cut between top-level blocks: a block starts at an unindented line after a blank line
(`def`, `class`, `fn`, `func`, `struct`, a C function's return type, a decorator or comment
above them), and ends before the next. Blocks are packed into passages of about TARGET_CHARS,
and a block that would take a passage past MAX_CHARS starts a passage of its own: a function that
fits a passage is never cut in half. Only a block longer than MAX_CHARS is cut inside, at blank
lines as plain text is.

Changing what this makes of a file? Bump indexer.READER_VERSION (files are read again).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable

from inglenook.knowledge.convert import ConvertCancelled, Page
from inglenook.knowledge.index import Chunk

TARGET_CHARS = 1200  # ~300 tokens: a few passages fit a small model's context with the question
MAX_CHARS = 4000
CANCEL_EVERY = 1024  # lines, or pieces of a long line, between two looks at Cancel
_HEADING = re.compile(r"^#{1,6}\s+\S")
_FENCE = re.compile(r"^\s*(```|~~~)")
# A line that can start a top-level block of code: unindented, and not the closing bracket of
# the block before (a C function's "}" after a blank line), nor a conditional of the
# preprocessor or a label inside a function (C puts those at column 0 too). A comment starting
# with # (Python, shell) does start one: it is often what is said above a definition.
_TOP_LEVEL = re.compile(r"^(?![\s})\]]|#\s*(?:if|ifdef|ifndef|elif|else|endif|pragma)\b"
                        r"|\w+:\s*$)")


def chunk_pages(pages: list[Page], markdown: bool = True, code: bool = False,
                cancelled: Callable[[], bool] = lambda: False) -> list[Chunk]:
    """`markdown`: cut before headings and never inside fences; `code`: cut between top-level
    blocks (see above); neither: at blank lines. Time is linear in the text's length, and
    `cancelled()` is asked every CANCEL_EVERY lines or pieces (ConvertCancelled)."""
    chunks: list[Chunk] = []
    for page in pages:
        chunks += (_chunk_code(page.text, page.number, cancelled) if code
                   else _chunk_text(page.text, page.number, markdown, cancelled))
    return chunks


def _chunk_code(text: str, page: int | None, cancelled: Callable[[], bool]) -> list[Chunk]:
    lines = text.split("\n")
    starts = [0] + [i for i in range(1, len(lines))
                    if not lines[i - 1].strip() and lines[i].strip()
                    and _TOP_LEVEL.match(lines[i])]
    chunks: list[Chunk] = []
    first, size = 0, 0  # the passage being made: lines[first:at], size characters

    def flush(end: int) -> None:  # cite the lines with text only
        kept = lines[first:end]
        lead = next((i for i, line in enumerate(kept) if line.strip()), None)
        if lead is None:
            return
        kept = kept[lead:]
        while not kept[-1].strip():
            kept.pop()
        chunks.append(Chunk("\n".join(kept), first + lead + 1, first + lead + len(kept), page))

    for n, at in enumerate(starts):
        end = starts[n + 1] if n + 1 < len(starts) else len(lines)
        block = sum(len(line) + 1 for line in lines[at:end])
        if size and (size >= TARGET_CHARS or size + block > MAX_CHARS):
            flush(at)
            first, size = at, 0
        if block > MAX_CHARS:  # longer than a passage: cut inside it, as plain text
            chunks += [dataclasses.replace(c, line_start=c.line_start + at,
                                           line_end=c.line_end + at)
                       for c in _chunk_text("\n".join(lines[at:end]), page, False,
                                            cancelled)]
            first, size = end, 0
            continue
        size += block
    flush(len(lines))
    return chunks


def _chunk_text(text: str, page: int | None, markdown: bool,
                cancelled: Callable[[], bool]) -> list[Chunk]:
    chunks: list[Chunk] = []
    lines = text.split("\n")
    heading = ""
    buffer: list[str] = []
    start = 1
    size = 0
    in_fence = False

    def flush(end: int) -> None:
        nonlocal buffer, size
        first, last = 0, len(buffer) - 1
        while first <= last and not buffer[first].strip():  # cite the lines with text only
            first += 1
        while last >= first and not buffer[last].strip():
            last -= 1
        if first <= last:
            body = "\n".join(buffer[first:last + 1])
            chunks.append(Chunk(body, start + first, end - (len(buffer) - 1 - last), page,
                                heading))
        buffer, size = [], 0

    for number, line in enumerate(lines, start=1):
        if number % CANCEL_EVERY == 0 and cancelled():
            raise ConvertCancelled
        if markdown and _FENCE.match(line):
            in_fence = not in_fence
        is_heading = markdown and not in_fence and _HEADING.match(line) is not None
        if buffer and (is_heading or size >= MAX_CHARS
                       or (size >= TARGET_CHARS and not in_fence and not line.strip())):
            flush(number - 1)
        if not buffer:
            start = number
        if is_heading:
            heading = line.lstrip("#").strip()[:200]
        # A single line longer than MAX_CHARS (minified code, a CSV without newlines) is
        # cut into pieces that all cite that line: by offset, never copying the rest of the
        # line for each piece (that made 40 MB on one line take minutes).
        if len(line) > MAX_CHARS:
            if buffer:
                flush(number - 1)
            at = 0
            for piece, at in enumerate(range(0, len(line) - MAX_CHARS, MAX_CHARS), start=1):
                if piece % CANCEL_EVERY == 0 and cancelled():
                    raise ConvertCancelled
                buffer.append(line[at:at + MAX_CHARS])
                start = number
                flush(number)
            line = line[at + MAX_CHARS:]
        buffer.append(line)
        size += len(line) + 1
    flush(len(lines))
    return chunks


WINDOW_CHARS = 250  # a sentence or two: what one vector of a passage stands for
MAX_WINDOWS = 1024  # a passage's windows at most (Qdrant's point ids leave room for this)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")


def windows(text: str, size: int = WINDOW_CHARS) -> list[str]:
    """A passage cut into windows of about `size` characters, at sentence ends and line breaks
    where it can, at spaces where a sentence is longer: each gets its own vector. One vector
    for a whole passage of ~300 tokens averages a fact of one sentence away (measured with
    all-MiniLM-L6-v2 and bench/knowledge_bench.py --meaning: recall@5 of the vectors 0.567 for
    whole passages, 0.95 for windows of 250 characters; 0.88 at 350, 0.97 at 150)."""
    pieces: list[str] = []
    for piece in _SENTENCE_END.split(text):
        piece = piece.strip()
        while len(piece) > size:  # a long sentence, or a line of code without full stops
            cut = piece.rfind(" ", size // 2, size)
            cut = cut if cut > 0 else size
            pieces.append(piece[:cut])
            piece = piece[cut:].strip()
        if piece:
            pieces.append(piece)
    out: list[str] = []
    for piece in pieces:
        if out and len(out[-1]) + 1 + len(piece) <= size:
            out[-1] = f"{out[-1]} {piece}"
        else:
            out.append(piece)
    if len(out) > MAX_WINDOWS:
        out[MAX_WINDOWS - 1:] = [" ".join(out[MAX_WINDOWS - 1:])]
    return out or [text[:size]]
