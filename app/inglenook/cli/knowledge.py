"""`inglenook knowledge …`: collections of your own folders, indexed and searched (issue 21).

  add NAME PATH...   make a collection (or add folders and files to one) and index it;
                     --embed-model GGUF gives its passages vectors too (searched with BM25);
                     --backend qdrant keeps them in Qdrant ([--qdrant-url URL], else local)
  update NAME        index it again: new and changed files are read, gone ones leave
  rebuild NAME       read every file again from scratch (and embed its passages again)
  watch NAME...      stay and index them again whenever their files change (Ctrl+C ends)
  list               the collections, with their files, passages and unread files
  search NAME QUERY  the best passages, each with where it is (file, page, lines)
  rm NAME            forget a collection (the files themselves are not touched)
"""

from __future__ import annotations

import argparse
import errno
import os
import sys
import threading
import unicodedata
from collections.abc import Sequence
from typing import TYPE_CHECKING

from inglenook.cli.common import INTERRUPTED_EXIT, UsageError, fail
from inglenook.core.escape import printable
from inglenook.core.units import count

if TYPE_CHECKING:
    from inglenook.engine.embedder import EngineEmbedder
    from inglenook.knowledge.fts import SqliteFtsIndex
    from inglenook.knowledge.indexer import IndexReport

SHOWN_PROBLEMS = 10
SQLITE_FULL = 13  # the result code of a write that found the disk full


def add_parser(commands: argparse._SubParsersAction) -> None:
    knowledge = commands.add_parser("knowledge", help="index your own folders and search them")
    sub = knowledge.add_subparsers(dest="knowledge_command", required=True, metavar="COMMAND")
    add = sub.add_parser("add", help="make a collection of folders and files (or add to one) "
                                     "and index it")
    add.add_argument("name", metavar="NAME")
    add.add_argument("paths", nargs="+", metavar="PATH", help="folders and files")
    add.add_argument("--follow-links", action=argparse.BooleanOptionalAction,
                     help="follow symbolic links that point out of these folders (off by "
                          "default; --no-follow-links turns it off again)")
    add.add_argument("--embed-model", metavar="GGUF",
                     help="an embedding model (nomic-embed-text, bge, all-MiniLM GGUFs): its "
                          "vectors are searched beside the full text ('none' to stop)")
    add.add_argument("--no-watch", action="store_true",
                     help="the window does not index it again by itself when files change")
    add.add_argument("--backend", choices=("sqlite", "qdrant"),
                     help="where its vectors live: the knowledge database (sqlite, the "
                          "default) or Qdrant (needs the qdrant extra)")
    add.add_argument("--qdrant-url", metavar="URL",
                     help="a Qdrant server (http://host:6333; an API key is read from "
                          "$INGLENOOK_QDRANT_API_KEY), else Qdrant's local mode")
    update = sub.add_parser("update", help="index a collection again (changed files only)")
    update.add_argument("name", metavar="NAME")
    rebuild = sub.add_parser("rebuild", help="read every file of a collection again from "
                                             "scratch, and make its vectors again")
    rebuild.add_argument("name", metavar="NAME")
    watch = sub.add_parser("watch", help="index collections again whenever their files "
                                         "change, until Ctrl+C")
    watch.add_argument("names", nargs="+", metavar="NAME")
    sub.add_parser("list", help="one line per collection, and the files it could not read")
    search = sub.add_parser("search", help="the passages of a collection that best match")
    search.add_argument("name", metavar="NAME")
    search.add_argument("query", nargs="+", metavar="QUERY")
    search.add_argument("-n", "--limit", type=int, default=5, help="how many (default 5)")
    rm = sub.add_parser("rm", help="forget a collection (its files are not touched)")
    rm.add_argument("name", metavar="NAME")


def run(args: argparse.Namespace) -> int:
    from inglenook.knowledge.fts import KnowledgeError, SqliteFtsIndex

    command = {"add": _add, "update": _update, "rebuild": _rebuild, "watch": _watch,
               "list": _list,
               "search": _search, "rm": _rm}[args.knowledge_command]
    try:
        index = SqliteFtsIndex()
    except KnowledgeError as exc:
        return fail(str(exc))
    try:
        return command(index, args)
    except KnowledgeError as exc:
        return fail(str(exc))
    except UsageError as exc:
        print(f"inglenook knowledge: {exc}", file=sys.stderr)
        return 2
    finally:
        index.close()


def plain(text: str) -> str:
    """Document text for a terminal: control characters (escape sequences a file may hold)
    shown as their code, never sent to the terminal."""
    return "".join(ch if ch in "\n\t" or unicodedata.category(ch) != "Cc"
                   else f"\\x{ord(ch):02x}" for ch in text)


def _add(index: SqliteFtsIndex, args: argparse.Namespace) -> int:
    from inglenook.knowledge.collections import PathMissing, add_paths, move_vectors

    model = args.embed_model
    if model is not None and model != "none":
        model = os.path.abspath(os.path.expanduser(model))
        if not os.path.isfile(model):
            raise UsageError(f"{args.embed_model} is not a model file.")
    if args.qdrant_url is not None and args.backend != "qdrant":
        raise UsageError("--qdrant-url needs --backend qdrant.")
    backend = "" if args.backend in (None, "sqlite") else args.backend
    url = args.qdrant_url or ""
    try:
        collection = add_paths(index, args.name, args.paths, bool(args.follow_links), backend,
                               url)
    except PathMissing as exc:
        raise UsageError(str(exc)) from None
    if args.backend is not None and (collection.backend, collection.qdrant_url) != (
            backend, url.strip()):  # an existing collection moves, once the place answers
        collection = move_vectors(index, collection.name, backend, url)
    if model is not None:
        index.set_embed_model(collection.name, "" if model == "none" else model)
    if args.no_watch:
        index.set_watch(collection.name, False)
    if args.follow_links is not None and args.follow_links != collection.follow_links:
        index.set_follow_links(collection.name, args.follow_links)
    return _index(index, collection.name)


def _update(index: SqliteFtsIndex, args: argparse.Namespace) -> int:
    return _index(index, args.name)


def _rebuild(index: SqliteFtsIndex, args: argparse.Namespace) -> int:
    """Ctrl+C keeps what was rebuilt; `update` (or another rebuild) reads the rest."""
    return _index(index, index.collection(args.name).name, rebuild=True)


def _watch(index: SqliteFtsIndex, args: argparse.Namespace) -> int:
    """Index each collection once (what changed since), then again on every burst of changes."""
    import queue

    from inglenook.knowledge.watch import Watcher

    names = [index.collection(name).name for name in args.names]
    changed: queue.Queue[str] = queue.Queue()
    watcher = Watcher(changed.put)
    try:
        for name in names:
            watcher.watch(name, index.collection(name).roots)
            if (code := _index(index, name)) != 0:
                return code
        watcher.wait_settled()
        for name in names:
            status = watcher.status(name)
            print(f"Watching {name}{': ' + status if status else ''} (Ctrl+C to stop).",
                  flush=True)
        while True:
            name = changed.get()
            if (code := _index(index, name)) != 0:
                return code
            sys.stdout.flush()
    except KeyboardInterrupt:
        return INTERRUPTED_EXIT
    finally:
        watcher.close()


def _index(index: SqliteFtsIndex, name: str, rebuild: bool = False) -> int:
    from inglenook.knowledge.fts import DATABASE_ERRORS, KnowledgeError
    from inglenook.knowledge.indexer import Indexer, Progress

    stop = threading.Event()
    shows = sys.stderr.isatty()

    def progress(p: Progress) -> None:
        if shows:
            where = f"{p.done:,} files found" if p.total is None else \
                f"{p.done:,} of {p.total:,} files"
            print(f"\rIndexing {name}: {where}\x1b[K", end="", file=sys.stderr, flush=True)

    stopping: tuple[type[Exception], ...] = (KnowledgeError, OSError, *DATABASE_ERRORS)
    failed: list[str] = []
    embedder = _embedder(index, name, failed)
    try:
        report = Indexer(index, name, progress, stop.is_set, embedder=embedder,
                         no_embedder=" ".join(failed), rebuild=rebuild).run()
    except KeyboardInterrupt:
        return INTERRUPTED_EXIT
    except stopping as exc:
        if shows:
            print(file=sys.stderr)
            shows = False
        return fail(_index_failure(index, name, exc))
    finally:
        if shows:
            print(file=sys.stderr)
        if embedder is not None:
            embedder.close()
    _print_report(index, name, report)
    if embedder is not None and embedder.note:
        print(f"Note: {embedder.note}", file=sys.stderr)
    return 0


def _index_failure(index: SqliteFtsIndex, name: str, exc: Exception) -> str:
    """One line for a run that could not go on: the disk full, the collection removed by
    another process meanwhile, or the database's own words. What was indexed is kept either
    way (each file is one transaction)."""
    from inglenook.knowledge.fts import DATABASE_ERRORS, KnowledgeError

    if (isinstance(exc, OSError) and exc.errno == errno.ENOSPC) or (
            getattr(exc, "sqlite_errorcode", None) == SQLITE_FULL
            or "database or disk is full" in str(exc)):
        return (f"The disk is full: indexing {name} stopped (what was indexed is kept). Free "
                f"some space, then run: inglenook knowledge update {name}")
    try:
        index.collection(name)
    except KnowledgeError:
        return f"The collection {name} was removed while it was being indexed (by another " \
               f"inglenook?): indexing stopped."
    except DATABASE_ERRORS:
        pass
    if isinstance(exc, KnowledgeError):
        return str(exc)
    detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    return f"Indexing {name} stopped: {plain(detail)} (what was indexed is kept)."


def _embedder(index: SqliteFtsIndex, name: str,
              failed: list[str] | None = None) -> EngineEmbedder | None:
    """An engine with the collection's embedding model loaded; None when it has none, or when
    it cannot be loaded (said on stderr and added to `failed`: full text goes on)."""
    from inglenook.engine.client import EngineError
    from inglenook.engine.embedder import EngineEmbedder

    model = index.collection(name).embed_model
    if not model or index.vectors_unavailable(name):
        return None
    try:
        return EngineEmbedder.load(model)
    except EngineError as exc:
        message = f"The embedding model {os.path.basename(model)} could not be loaded: {exc}"
        print(f"inglenook knowledge: {message}", file=sys.stderr)
        if failed is not None:
            failed.append(message)
        return None


def _print_report(index: SqliteFtsIndex, name: str, report: IndexReport) -> None:
    stats = index.stats(name)
    print(f"{name}: {report.added:,} added, {report.updated:,} updated, "
          f"{report.unchanged:,} unchanged, {report.removed:,} removed; "
          f"{stats.documents:,} files, {stats.chunks:,} passages in all.")
    if report.embedded:
        print(f"{report.embedded:,} passages embedded.")
    if report.embed_error:
        print(f"Vectors: {report.embed_error} Search stays full-text for what has none.")
    _print_files(report.problems, "not indexed")
    _print_files(report.partial, "read only in part (what was read is indexed)")


def _print_files(files: Sequence[tuple[str, str]], heading: str) -> None:
    """Files with why (at most SHOWN_PROBLEMS of them), under `heading`."""
    if not files:
        return
    print(f"{len(files):,} {heading}:")
    for path, why in files[:SHOWN_PROBLEMS]:
        print(f"  {printable(path)}: {why}")
    if len(files) > SHOWN_PROBLEMS:
        print(f"  … and {len(files) - SHOWN_PROBLEMS:,} more "
              f"(inglenook knowledge list shows them all)")


def _list(index: SqliteFtsIndex, args: argparse.Namespace) -> int:
    from inglenook.knowledge.collections import backend_text, summaries

    found = summaries(index)
    if not found:
        print("No collections yet (inglenook knowledge add NAME FOLDER).")
    for c in found:
        notes = (f" · {len(c.partial):,} read in part" if c.partial else "") \
            + ("" if c.watch else " · not watched") \
            + (" · follows links out" if c.follow_links else "")
        print(f"{c.name} · {count(c.documents, 'file')} · {count(c.chunks, 'passage')} · "
              f"{len(c.problems):,} not indexed{notes}")
        collection = index.collection(c.name)
        if collection.embed_model:
            print(f"  vectors: {index.vector_count(c.name):,} from "
                  f"{plain(collection.embed_model)}")
        print(f"  backend: {plain(backend_text(c.backend, c.qdrant_url, c.qdrant_name))}")
        if collection.embed_error:
            print(f"  vectors failed: {plain(collection.embed_error)}")
        for root in c.roots:
            print(f"  {plain(root)}")
        for path, reason in c.problems:
            print(f"  not indexed: {printable(path)}: {reason}")
        for path, note in c.partial:
            print(f"  read in part: {printable(path)}: {note}")
    return 0


def _search(index: SqliteFtsIndex, args: argparse.Namespace) -> int:
    if args.limit < 1:
        raise UsageError("--limit must be at least 1.")
    name = index.collection(args.name).name
    embedder = index.embedder = _embedder(index, name)
    try:
        hits = index.search([name], " ".join(args.query), args.limit)
    finally:
        if embedder is not None:
            embedder.close()
    if index.search_note:
        print(f"Note: {index.search_note}", file=sys.stderr)
    if not hits:
        print("Nothing found.")
    for n, hit in enumerate(hits, start=1):
        print(f"[{n}] {printable(hit.citation)}")
        if hit.chunk.heading:
            print(f"    § {printable(hit.chunk.heading)}")
        for line in plain(hit.chunk.text).splitlines()[:8]:
            print(f"    {line}")
    return 0


def _rm(index: SqliteFtsIndex, args: argparse.Namespace) -> int:
    name = index.collection(args.name).name
    left = index.remove_collection(name)
    print(f"Forgot the collection {name} (its files are untouched).")
    if left:
        print(f"Note: {left}", file=sys.stderr)
    return 0
