"""`inglenook conversations …`: list, export and import conversations (the window's files)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from inglenook import paths
from inglenook.cli.common import fail

if TYPE_CHECKING:
    from inglenook.store import Store


def add_parser(commands: argparse._SubParsersAction) -> None:
    conversations = commands.add_parser("conversations",
                                        help="list, export and import conversations")
    sub = conversations.add_subparsers(dest="conversations_command", required=True,
                                       metavar="COMMAND")
    sub.add_parser("list", help="one line per conversation: ID, title, messages, last "
                                "activity, pinned")
    export = sub.add_parser(
        "export", help="write conversations as Inglenook JSON (one ID: a conversation; "
                       "several or --all: an archive)")
    export.add_argument("ids", nargs="*", type=int, metavar="ID",
                        help="conversation IDs, as `inglenook conversations list` shows")
    export.add_argument("file", metavar="FILE", help="where to write; - for standard output")
    export.add_argument("--all", action="store_true",
                        help="every conversation (not those in the bin) and every preset")
    imp = sub.add_parser("import", help="add the conversations of an Inglenook export or of "
                                        "ChatGPT's conversations.json")
    imp.add_argument("file", metavar="FILE", help="the JSON file; - for standard input")


def run(args: argparse.Namespace) -> int:
    from inglenook.store import StoreError

    command = {"list": _list, "export": _export,
               "import": _import}[args.conversations_command]
    try:
        return command(args)
    except StoreError as exc:
        return fail(str(exc))


def _open(read_only: bool) -> Store | None:
    """The database. Reading opens it read-only, so that a reply the window is streaming is
    not marked interrupted; None when there is no database yet."""
    from inglenook.store import Store, StoreError

    if read_only and not paths.database_file().exists():
        return None
    try:
        return Store(read_only=read_only)
    except StoreError as exc:
        if not read_only or exc.reason != "read-only":
            raise
        return Store()  # made by an older version: it needs its upgrade first


def _one_line(title: str) -> str:
    return " ".join(title.split()) or "(untitled)"


def _date(stamp: float) -> str:
    try:
        return datetime.fromtimestamp(stamp).strftime("%Y-%m-%d %H:%M")
    except (OverflowError, OSError, ValueError):  # a hand-edited row
        return "????-??-?? ??:??"


def _list(args: argparse.Namespace) -> int:
    store = _open(read_only=True)
    summaries = [] if store is None else store.conversations()
    if store is not None:
        store.close()
    if not summaries:
        print("No conversations yet.")
        return 0
    width = max(len(str(c.id)) for c in summaries)
    for c in summaries:
        count = f"{c.message_count:,} message{'' if c.message_count == 1 else 's'}"
        pinned = " · pinned" if c.pinned else ""
        print(f"{c.id:>{width}}  {_one_line(c.title)} · {count} · {_date(c.updated_at)}{pinned}")
    return 0


def _export(args: argparse.Namespace) -> int:
    if args.all == bool(args.ids):
        return fail("give the IDs of the conversations to export, or --all (not both).")
    store = _open(read_only=True)
    if store is None:
        return fail("there are no conversations yet.")
    with store:
        known = {c.id for c in store.conversations(include_deleted=True)}
        missing = [str(i) for i in args.ids if i not in known]
        if missing:
            return fail(f"there is no conversation {', '.join(missing)} (see: inglenook "
                        "conversations list).")
        if args.all:
            data = store.export_all()
        elif len(args.ids) == 1:
            data = store.export_json(args.ids[0])
        else:
            data = store.export_some(args.ids)
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    count = len(data["conversations"]) if "conversations" in data else 1
    if args.file == "-":
        sys.stdout.write(text)
        return 0
    try:
        _write_atomically(Path(args.file), text)
    except OSError as exc:
        return fail(f"could not write {args.file}: {exc.strerror or exc}.")
    print(f"Exported {count:,} conversation{'' if count == 1 else 's'} to {args.file}.",
          file=sys.stderr)
    return 0


def _write_atomically(target: Path, text: str) -> None:
    """A complete file or none: an interrupted export never leaves half a JSON document."""
    temp = target.with_name(f".{target.name}.partial")
    try:
        temp.write_text(text, encoding="utf-8")
        os.replace(temp, target)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise


def _import(args: argparse.Namespace) -> int:
    from inglenook.store.checks import InvalidImport
    from inglenook.store.transfer import read_import, read_import_stream

    try:
        if args.file == "-":
            batch = read_import_stream(sys.stdin.buffer, "standard input")
        else:
            batch = read_import(args.file)
    except InvalidImport as exc:
        return fail(f"{str(exc).rstrip('.')}; nothing was imported.")
    store = _open(read_only=False)
    assert store is not None
    with store:
        ids = store.import_batch(batch)
    print(batch.summary())
    if ids:
        print(f"New conversation IDs: {ids[0]}" if len(ids) == 1 else
              f"New conversation IDs: {ids[0]}–{ids[-1]}")
    return 0
