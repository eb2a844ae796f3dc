"""Indexing a collection: scan, read what changed, convert, chunk, store; with progress and
cancel, so that the window can run it on a worker thread and the CLI in the foreground.

A file is read again only when its size or mtime differ from the index's record, and its
chunks are replaced only when its content hash differs too (a file saved again unchanged costs
one read). Reading is bounded (MAX_FILE_BYTES), through a descriptor opened without following
a final link and without blocking, checked to be a regular file; a file whose size or mtime
moves while it is read is read again, and listed if it keeps moving. Files gone from the folders
leave the index. Cancelling keeps what was indexed so far; the next run goes on from there.
Cancel is heard inside a file too: a converter's child process is killed, chunking stops.

Any one file's failure is that file's: whatever reading, converting or chunking it raises (a
parser's refusal, a converter killed for its memory or time, a bug) lists it with the reason,
and the run goes on with the next file. Only the index's own failures (a full disk, the
collection removed by another process) end the run.

Each document records READER_VERSION, the version of converting and chunking that made its
passages: one made by an older reader is read again however unchanged the file is, and keeps its
passages (and vectors) when the new reader makes the same ones. A rebuild marks every document
of the collection as read by no reader (REBUILD) and rebuilds the full-text table: every file is
read again and its passages replaced, so they are embedded again; a rebuild cancelled half-way is
finished by the next run. A file read only up to a cap (convert.Converted.cut) is indexed as far
as it was read and listed with the note (IndexReport.partial), never passed off as whole.

A collection with an embedding model then has its chunks without a vector embedded, in
batches (a model set later, or a run that failed, is caught up the same way). A failure stops
the embedding, never the indexing: it is reported and kept with the collection, and search
stays full-text for what has no vector.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from inglenook.core import files
from inglenook.core.units import describe_size
from inglenook.knowledge import embed_prompts, vectors
from inglenook.knowledge.chunking import chunk_pages
from inglenook.knowledge.convert import ConvertCancelled, ConvertError, convert
from inglenook.knowledge.fts import SqliteFtsIndex
from inglenook.knowledge.index import Document
from inglenook.knowledge.scanner import FoundFile, scan
from inglenook.knowledge.vectors import Embedder, VectorStoreError

# Bump it whenever convert.py or chunking.py changes what a file becomes: the next run reads
# every file again. 1: code cut at top-level definitions, caps reported (schema v7).
READER_VERSION = 1
REBUILD = -1  # a document's reader when a rebuild asked for it to be read again from scratch
MAX_FILE_BYTES = 64_000_000  # a bigger "document" is a data dump or a disk image, not notes
EMBED_BATCH = 16  # chunks embedded at a time, ~6 windows each (progress and cancel between)


@dataclass(frozen=True)
class Progress:
    """Where an indexing run is: scanning (total None, done = files found so far), reading
    (done of total files looked at) or embedding (done of total chunks, phase "embedding")."""

    done: int
    total: int | None
    path: str = ""
    phase: str = "reading"


@dataclass
class IndexReport:
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    removed: int = 0
    problems: list[tuple[str, str]] = field(default_factory=list)
    # (path, what was not read) of the collection's documents indexed only in part
    partial: list[tuple[str, str]] = field(default_factory=list)
    cancelled: bool = False
    embedded: int = 0  # chunks given a vector
    embed_error: str = ""  # why vectors were not made ("" they were, or none were asked)


# Contents a converter refused (by kind and SHA-256), with why: in this process they are listed
# again without being converted again, so a file that takes a converter its whole minute, or
# is a zip bomb, costs that once per session, not at every change the watcher sees.
_REFUSED: dict[tuple[str, str], str] = {}
REFUSALS_KEPT = 1000


def _remember_refusal(kind: str, sha: str, why: str) -> None:
    if len(_REFUSED) >= REFUSALS_KEPT:
        del _REFUSED[next(iter(_REFUSED))]  # the oldest
    _REFUSED[(kind, sha)] = why


class UnreadableFile(Exception):
    """str() is the reason, for the problems list."""


def _reason(exc: Exception) -> str:
    """Why a file was not indexed: our own errors say it in words; anything else (a parser's
    refusal we did not foresee) by its kind and first line."""
    if isinstance(exc, (UnreadableFile, ConvertError)):
        return str(exc)
    if isinstance(exc, MemoryError):
        return "reading it needed more memory than a document may use"
    detail = (str(exc).splitlines() or [""])[0][:200]
    return f"it could not be read ({type(exc).__name__}{': ' + detail if detail else ''})"


CHANGED = "it was replaced while being indexed (by a link, or another file): not read"


def read_bounded(path: str, limit: int = MAX_FILE_BYTES,
                 identity: tuple[int, int] | None = None) -> tuple[bytes, os.stat_result]:
    """The bytes of a regular file, at most limit, as they were between two equal stats.

    The path is opened as it is, never through os.path.realpath: a last component that is a
    link is refused (O_NOFOLLOW), a FIFO does not block (O_NONBLOCK), and with `identity`
    (st_dev, st_ino as scanned) the descriptor must be that very file, so a file or a folder
    above it swapped for a link out of the collection since the scan is refused, not read."""
    try:
        return files.read_bounded(path, limit, identity=identity)
    except files.ReadRefused as refused:
        raise UnreadableFile(_refusal(refused)) from refused


def _refusal(refused: files.ReadRefused) -> str:
    why = refused.why
    if why in ("link", "changed"):
        return CHANGED
    if why == "denied":
        return "permission denied: the file cannot be read"
    if why == "missing":
        return "cannot be opened: No such file or directory"
    if why == "not regular":
        return "no longer a regular file: not read"
    if why in ("too large", "grew"):
        return (f"{describe_size(refused.size)}, more than the "
                f"{describe_size(refused.limit)} a document may have: not read")
    if why == "changing":
        return "it kept changing while being read: try again when it is saved"
    return f"cannot be read: {refused.detail}"


class Indexer:
    """Brings one collection's index in step with its folders.

    `progress` is called from the thread that runs `run` (the window hands it to a queued
    signal); `cancelled` is asked between files and folders, and while a file is converted
    and chunked."""

    def __init__(self, index: SqliteFtsIndex, name: str,
                 progress: Callable[[Progress], None] = lambda p: None,
                 cancelled: Callable[[], bool] = lambda: False,
                 max_file_bytes: int = MAX_FILE_BYTES, embedder: Embedder | None = None,
                 no_embedder: str = "No embedding model was loaded: vectors were not made.",
                 rebuild: bool = False) -> None:
        """`no_embedder`: why there is none, for a collection that has an embedding model.
        `rebuild`: read every file again from scratch (and embed its passages again)."""
        self.rebuild = rebuild
        self.embedder, self.no_embedder = embedder, no_embedder
        self.index = index
        self.name = name
        self.progress = progress
        self.cancelled = cancelled
        self.max_file_bytes = max_file_bytes

    def run(self) -> IndexReport:
        collection = self.index.collection(self.name)
        self.name = collection.name
        if self.rebuild:
            self.index.rebuild_full_text()
            self.index.forget_readings(self.name)
        found = scan(collection.roots, collection.follow_links, self.cancelled,
                     lambda count: self.progress(Progress(count, None)))
        report = IndexReport(problems=list(found.problems), cancelled=found.cancelled)
        if found.cancelled:
            return report
        known = self.index.documents(self.name)
        total = len(found.files)
        self.progress(Progress(0, total))
        for done, file in enumerate(found.files, start=1):
            if self.cancelled():
                report.cancelled = True
                break
            self._one(file, known.get(file.path), report)
            if report.cancelled:
                break
            self.progress(Progress(done, total, file.path))
        if not report.cancelled:
            seen = {file.path for file in found.files}
            for path in known.keys() - seen:
                self.index.remove_document(self.name, path)
                report.removed += 1
            self.index.set_problems(self.name, report.problems)
            report.partial = self.index.notes(self.name)
            self._embed(collection.embed_model, report)
        return report

    def _embed(self, model: str, report: IndexReport) -> None:
        if not model:
            return
        embedder = self.embedder
        error = self.index.vectors_unavailable(self.name)
        if not error and embedder is None:
            error = self.no_embedder
        elif not error and embedder is not None and embedder.model != model:
            error = f"The embedder is {Path(embedder.model).name}, not the collection's " \
                    f"{Path(model).name}: vectors were not made."
        if error or embedder is None:
            report.embed_error = error
            self.index.set_embed_error(self.name, error)
            return
        style = embed_prompts.style_of(model)
        if style is None:  # its header cannot be read now: the vectors' style stays
            style = self.index.collection(self.name).embed_prompts
        self.index.set_embed_prompts(self.name, style)  # vectors of another style go
        total = self.index.stats(self.name).chunks - self.index.vector_count(self.name)
        cancelled = False
        try:
            self.index.tidy_vectors(self.name)
        except VectorStoreError as exc:  # the server is down: nothing can be stored either
            report.embed_error = str(exc)
        while not report.embed_error and not (cancelled := self.cancelled()):
            batch = self.index.missing_vectors(self.name, EMBED_BATCH)
            if not batch:
                break
            try:
                rows = vectors.embed(embedder, batch, style)
            except Exception as exc:  # the engine's error, in words; full text stays
                report.embed_error = f"Embedding failed after {report.embedded:,} of " \
                                     f"{total:,} passages: {exc}"
                break
            try:
                self.index.add_vectors(self.name, [cid for cid, _ in batch], rows)
            except VectorStoreError as exc:
                report.embed_error = f"Storing vectors failed after {report.embedded:,} of " \
                                     f"{total:,} passages: {exc}"
                break
            report.embedded += len(batch)
            self.progress(Progress(report.embedded, total, phase="embedding"))
        report.cancelled = report.cancelled or cancelled
        self.index.set_embed_error(self.name, report.embed_error)

    def _one(self, file: FoundFile, known: Document | None, report: IndexReport) -> None:
        current = known is not None and known.reader >= READER_VERSION
        if known is not None and current and (known.size, known.mtime_ns) == (file.size,
                                                                              file.mtime_ns):
            report.unchanged += 1
            return
        try:
            data, info = read_bounded(file.opened, self.max_file_bytes, file.identity)
            sha = hashlib.sha256(data).hexdigest()
            if known is not None and current and known.sha256 == sha:
                self.index.touch_document(self.name, Document(
                    file.path, info.st_size, info.st_mtime_ns, sha, file.kind, known.reader,
                    known.note))
                report.unchanged += 1
                return
            if (refused := _REFUSED.get((file.kind, sha))) is not None:
                raise ConvertError(refused)  # these very bytes failed before: not again
            try:
                converted = convert(file.kind, data, Path(file.path), self.cancelled)
            except ConvertError as exc:
                if exc.lasting:
                    _remember_refusal(file.kind, sha, str(exc))
                raise
            chunks = chunk_pages(converted.pages,
                                 markdown=file.kind in ("markdown", "html", "docx", "text"),
                                 code=file.kind == "code", cancelled=self.cancelled)
            if not chunks:
                raise UnreadableFile("it has no text (a scanned PDF is pictures of pages)")
        except ConvertCancelled:
            report.cancelled = True  # the file keeps what it had; the next run reads it
            return
        except Exception as exc:  # any one file's failure is that file's
            report.problems.append((file.path, _reason(exc)))
            if known is not None:
                self.index.remove_document(self.name, file.path)
            return
        document = Document(file.path, info.st_size, info.st_mtime_ns, sha, file.kind,
                            READER_VERSION, converted.cut)
        if known is not None and known.reader != REBUILD and known.sha256 == sha \
                and self.index.document_chunks(self.name, file.path) == chunks:
            # Read again by a newer reader that made the same passages: their vectors stay.
            self.index.touch_document(self.name, document)
            report.unchanged += 1
            return
        self.index.add_document(self.name, document, chunks)
        if known is None:
            report.added += 1
        else:
            report.updated += 1
