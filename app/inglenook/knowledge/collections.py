"""Collections as the window and the command line manage them: one set of rules for both.

Folders and files are added as absolute paths (a path that does not exist is refused by name,
one already there is not added twice), removed from a collection (their passages leave with
the next indexing run), and indexed with an index opened for the run: SqliteFtsIndex is one per
thread, and the window indexes on a worker thread while its GUI thread reads its own.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from inglenook import paths
from inglenook.core.units import count
from inglenook.knowledge.fts import Collection, KnowledgeError, SqliteFtsIndex
from inglenook.knowledge.indexer import Indexer, IndexReport, Progress
from inglenook.knowledge.vectors import Embedder


class PathMissing(KnowledgeError):
    """A folder or file given for a collection does not exist."""


@dataclass(frozen=True)
class CollectionSummary:
    """What the Knowledge dialog and `inglenook knowledge list` show of a collection."""

    name: str
    roots: tuple[str, ...]
    follow_links: bool
    indexed_at: float | None
    documents: int
    chunks: int
    problems: tuple[tuple[str, str], ...]  # (path, reason) of the last run
    embed_model: str = ""  # the GGUF its passages' vectors come from ("" full text only)
    vectors: int = 0  # passages with a vector
    embed_error: str = ""  # why the last run made no vectors ("" it did, or none wanted)
    watch: bool = True  # indexed again when its files change (knowledge/watch.py)
    backend: str = ""  # where its vectors live: "" the knowledge database, "qdrant"
    qdrant_url: str = ""  # "" Qdrant's local mode, else its server
    qdrant_name: str = ""  # its collection in Qdrant
    partial: tuple[tuple[str, str], ...] = ()  # (path, what was not read) of files read in part


def absolute_paths(given: Iterable[str]) -> list[str]:
    """The paths made absolute (~ expanded), each checked to exist."""
    found = []
    for path in given:
        absolute = os.path.abspath(os.path.expanduser(path))
        if not os.path.exists(absolute):
            raise PathMissing(f"{path} does not exist.")
        if absolute not in found:
            found.append(absolute)
    return found


def add_paths(index: SqliteFtsIndex, name: str, given: Iterable[str],
              follow_links: bool = False, backend: str = "",
              qdrant_url: str = "") -> Collection:
    """Make the collection with these folders and files (its vectors in `backend`), or add
    them to the one of that name (its own spelling and backend kept). Indexing is the
    caller's next step."""
    roots = absolute_paths(given)
    try:
        collection = index.collection(name)
    except KnowledgeError:
        return index.create_collection(name, roots, follow_links, backend=backend,
                                       qdrant_url=qdrant_url)
    index.set_roots(collection.name, [*collection.roots,
                                      *(r for r in roots if r not in collection.roots)])
    return index.collection(collection.name)


def remove_paths(index: SqliteFtsIndex, name: str, gone: Iterable[str]) -> Collection:
    """Take folders or files out of a collection; their passages leave at the next run."""
    collection = index.collection(name)
    dropped = set(gone)
    index.set_roots(collection.name, [r for r in collection.roots if r not in dropped])
    return index.collection(collection.name)


def summaries(index: SqliteFtsIndex) -> list[CollectionSummary]:
    found = []
    for c in index.collections():
        stats = index.stats(c.name)
        found.append(CollectionSummary(c.name, c.roots, c.follow_links, c.indexed_at,
                                       stats.documents, stats.chunks,
                                       tuple(index.problems(c.name)), c.embed_model,
                                       index.vector_count(c.name) if c.embed_model else 0,
                                       c.embed_error, c.watch, c.backend, c.qdrant_url,
                                       c.qdrant_name, tuple(index.notes(c.name))))
    return found


def backend_text(backend: str, qdrant_url: str, qdrant_name: str) -> str:
    """Where a collection's vectors live, as the dialog and `knowledge list` say it."""
    if backend != "qdrant":
        return "SQLite (this database)"
    return f"Qdrant {qdrant_url or '(local mode)'}, collection {qdrant_name}"


def where(backend: str, url: str) -> str:
    """Where vectors would live, in words for a sentence ("Keep its vectors in …")."""
    if backend != "qdrant":
        return "this computer's knowledge database (SQLite)"
    return f"Qdrant at {url}" if url else "Qdrant's local mode (in the data folder)"


def move_vectors(index: SqliteFtsIndex, name: str, backend: str,
                 qdrant_url: str = "") -> Collection:
    """Keep the collection's vectors in `backend` from now on, once it is known to answer:
    KnowledgeError says why not, and nothing changed. The vectors it had are dropped and the
    next indexing run embeds its passages again (set_backend). May wait on a server
    (index.check_backend): off the GUI thread."""
    try:
        index.check_backend(backend, qdrant_url)
    except KnowledgeError as exc:
        raise KnowledgeError(f"{exc} {name} keeps its vectors where they are.") from None
    index.set_backend(name, backend, qdrant_url)
    return index.collection(name)


def collection_names(path: Path | None = None) -> list[str]:
    """The collections' names; none while there is no index yet (listing makes no file)."""
    path = path or paths.knowledge_database_file()
    if not path.exists():
        return []
    index = SqliteFtsIndex(path)
    try:
        return [c.name for c in index.collections()]
    finally:
        index.close()


def index_collection(name: str, progress: Callable[[Progress], None] = lambda p: None,
                     cancelled: Callable[[], bool] = lambda: False,
                     path: Path | None = None,
                     embedder_for: Callable[[str], Embedder] | None = None,
                     rebuild: bool = False) -> IndexReport:
    """Index one collection with an index of its own (call it on the thread that indexes);
    its passages get vectors from `embedder_for(its embedding model)` when it names one.
    `rebuild`: every file read again from scratch, its passages embedded again."""
    index = SqliteFtsIndex(path)
    try:
        model = index.collection(name).embed_model
        embedder = embedder_for(model) if model and embedder_for is not None else None
        return Indexer(index, name, progress, cancelled, embedder=embedder,
                       rebuild=rebuild).run()
    finally:
        index.close()


@dataclass(frozen=True)
class EmbeddingChoice:
    """A library model a collection can take its vectors from."""

    name: str
    path: str
    made_for_it: bool  # its header names a pooling: an embedding model, not a chat model


def embedding_choices() -> list[EmbeddingChoice]:
    """The library's models, embedding models first (a chat model's vectors are poor for
    search, but they are vectors). Reads each file's header: call it off the GUI thread."""
    from inglenook.models.gguf import GGUFError, read_header
    from inglenook.models.library import installed_models

    found = []
    for entry in installed_models():
        try:
            header = read_header(entry.path)
            made = f"{header.architecture}.pooling_type" in header.metadata
        except (GGUFError, OSError):
            continue  # the library shows why it cannot be loaded; not offered here
        found.append(EmbeddingChoice(entry.name, entry.path, made))
    return sorted(found, key=lambda c: not c.made_for_it)


def describe_report(report: IndexReport) -> str:
    """One line on what a run did."""
    done = (f"{report.added:,} added, {report.updated:,} updated, "
            f"{report.unchanged:,} unchanged, {report.removed:,} removed")
    if report.cancelled:
        return f"Cancelled: {done} so far (the next run goes on from there)."
    problems = f"; {len(report.problems):,} not indexed" if report.problems else ""
    if report.partial:
        problems += f"; {len(report.partial):,} read only in part"
    vectors = f"; {report.embedded:,} passages given vectors" if report.embedded else ""
    failed = f" {report.embed_error}" if report.embed_error else ""
    return f"{done}{problems}{vectors}.{failed}"


def when(timestamp: float | None) -> str:
    if timestamp is None:
        return "not indexed yet"
    t = datetime.datetime.fromtimestamp(timestamp)
    return f"indexed {t.day} {t:%b %Y, %H:%M}"


def describe_summary(summary: CollectionSummary) -> str:
    """The Knowledge dialog's line of figures under a collection's name."""
    text = (f"{count(summary.documents, 'file')} · {count(summary.chunks, 'passage')} · "
            f"{when(summary.indexed_at)}")
    if summary.embed_model:
        text += f" · {summary.vectors:,} with vectors"
    return text


def describe_progress(p: Progress) -> str:
    """Where an indexing run is, in words."""
    if p.phase == "embedding":
        return f"Making vectors: {p.done:,} of {p.total or 0:,} passages…"
    if p.total is None:
        return f"Looking for files: {p.done:,} found so far…"
    return f"Reading {p.done:,} of {p.total:,} files…"
