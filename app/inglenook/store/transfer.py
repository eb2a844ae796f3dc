"""The one way in for import files, from the window and the CLI alike: read with bounds, tell
the format apart, check every value (native.py, chatgpt.py), and hand back an ImportBatch that
Store.import_batch writes in one transaction. Nothing is written unless the whole file is good.
"""

from __future__ import annotations

import json
import math
import threading
from pathlib import Path
from typing import BinaryIO

from inglenook.store import native
from inglenook.store.chatgpt import looks_like_chatgpt, read_chatgpt
from inglenook.store.checks import InvalidImport
from inglenook.store.export import ARCHIVE_FORMAT, CONVERSATION_FORMAT
from inglenook.store.imports import ImportBatch

# Generous: a ChatGPT export of years of chats is a few hundred MB. Python holds a parsed file
# in several times its size, so far bigger files would exhaust memory rather than import.
MAX_IMPORT_BYTES = 512 * 2**20
_MAX_INT_DIGITS = 30  # int() of a 5,000-digit literal raises; no count or time needs 30


def read_import(path: Path | str, cancelled: threading.Event | None = None) -> ImportBatch:
    """Read and check an Inglenook export (one conversation or an archive) or a ChatGPT
    conversations.json. InvalidImport (a ValueError) says, in one line, why not;
    ImportCancelled comes soon after `cancelled` is set (before the next image is decoded)."""
    path = Path(path)
    try:
        with path.open("rb") as f:
            return read_import_stream(f, path.name, cancelled)
    except FileNotFoundError:
        raise InvalidImport(f"{path} does not exist.") from None
    except IsADirectoryError:
        raise InvalidImport(f"{path} is a folder, not a file.") from None
    except OSError as exc:
        raise InvalidImport(f"Could not read {path}: {exc.strerror or exc}.") from None


def read_import_stream(stream: BinaryIO, name: str,
                       cancelled: threading.Event | None = None) -> ImportBatch:
    """The same for an open file (e.g. standard input); `name` is used in messages."""
    raw = stream.read(MAX_IMPORT_BYTES + 1)  # never more, whatever the file claims
    if len(raw) > MAX_IMPORT_BYTES:
        raise InvalidImport(f"{name} is larger than {MAX_IMPORT_BYTES // 2**20} MB, more than "
                            "Inglenook imports.")
    try:
        return parse_import(decode(raw), cancelled)
    except InvalidImport as exc:
        raise InvalidImport(f"{name}: {exc}") from None


def decode(raw: bytes) -> object:
    """JSON from bytes (UTF-8, with or without a BOM). NaN, Infinity and huge literals become
    non-finite floats, for the checks to repair or refuse."""
    try:
        text = raw.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        raise InvalidImport(f"not UTF-8 text ({exc.reason} at byte {exc.start:,})") from None
    try:
        return json.loads(text, parse_int=_parse_int)
    except MemoryError:
        raise InvalidImport("too large to read into the memory available") from None
    except RecursionError:
        raise InvalidImport("the JSON nests too deeply (more than about a thousand levels) "
                            "to be an export") from None
    except json.JSONDecodeError as exc:
        raise InvalidImport(f"not valid JSON ({exc.msg} at line {exc.lineno:,}, column "
                            f"{exc.colno:,})") from None
    except ValueError as exc:
        raise InvalidImport(f"not valid JSON ({exc})") from None


def _parse_int(literal: str) -> int | float:
    if len(literal.lstrip("-")) > _MAX_INT_DIGITS:
        return -math.inf if literal.startswith("-") else math.inf
    return int(literal)


def parse_import(data: object, cancelled: threading.Event | None = None) -> ImportBatch:
    """Which format the decoded JSON is in, and its checked contents."""
    if isinstance(data, dict):
        if data.get("format") == ARCHIVE_FORMAT:
            return native.read_archive(data, cancelled)
        if data.get("format") == CONVERSATION_FORMAT:
            return native.read_conversation_export(data, cancelled)
        if "mapping" in data:  # one conversation cut out of a ChatGPT export
            return read_chatgpt([data])
    if looks_like_chatgpt(data):
        return read_chatgpt(data)  # type: ignore[arg-type]
    raise InvalidImport("neither an Inglenook export nor a ChatGPT conversations.json")
