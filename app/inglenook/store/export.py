"""Export to JSON and Markdown, import from JSON.

A conversation exports as:

    {"format": "inglenook.conversation", "version": 1, "title": str, "pinned": bool,
     "preset": str | None, "created_at": float, "updated_at": float,
     "messages": [{"id": int, "parent": int | None, "role": str, "content": str,
                   "status": str, "created_at": float, "active": bool, "provenance": dict}]}

Every branch is included. Message ids are local to the file (1, 2, … in creation order, parents
before children) and `active` marks the branch on screen, so importing and exporting again gives
the identical dict: timestamps are kept as they were, nothing is renumbered differently.
export_all wraps conversations in {"format": "inglenook.archive", "version": 1, "exported_at":
float, "conversations": [...], "presets": [...]}.
"""

from __future__ import annotations

import math
import sqlite3
import time
from collections import defaultdict
from collections.abc import Iterable

from inglenook.core.sampling import SamplingParams
from inglenook.store import conversations, messages, presets
from inglenook.store.records import STATUSES, Preset, dump_dict, load_dict, number, text

CONVERSATION_FORMAT = "inglenook.conversation"
ARCHIVE_FORMAT = "inglenook.archive"
FORMAT_VERSION = 1

_CONV_COLUMNS = "id, title, pinned, preset, created_at, updated_at"
_MSG_COLUMNS = ("conversation_id, id, parent_id, role, content, status, created_at, provenance, "
                "active_seq")


def _conversation_dict(conv: tuple, rows: Iterable[tuple]) -> dict:
    _, title, pinned, preset, created_at, updated_at = conv
    rows = list(rows)
    local = {row[1]: n for n, row in enumerate(rows, start=1)}
    best: dict[int | None, tuple] = {}  # parent → (active_seq, id) of its active child
    for row in rows:
        key = (row[8], row[1])
        if row[2] not in best or key > best[row[2]]:
            best[row[2]] = key
    return {
        "format": CONVERSATION_FORMAT, "version": FORMAT_VERSION,
        "title": text(title), "pinned": bool(pinned),
        "preset": None if preset is None else text(preset),
        "created_at": number(created_at), "updated_at": number(updated_at),
        "messages": [{
            "id": local[msg_id],
            "parent": local.get(parent_id),  # None for roots (and for a dangling parent)
            "role": text(role), "content": text(content), "status": text(status),
            "created_at": number(msg_created), "active": best[parent_id][1] == msg_id,
            "provenance": load_dict(provenance),
        } for _, msg_id, parent_id, role, content, status, msg_created, provenance, _ in rows],
    }


def export_json(conn: sqlite3.Connection, conv_id: int) -> dict:
    conv = conn.execute(f"SELECT {_CONV_COLUMNS} FROM conversations WHERE id = ?",
                        (conv_id,)).fetchone()
    if conv is None:
        raise KeyError(f"no conversation {conv_id}")
    rows = conn.execute(f"SELECT {_MSG_COLUMNS} FROM messages WHERE conversation_id = ? "
                        "ORDER BY id", (conv_id,))
    return _conversation_dict(conv, rows)


def export_all(conn: sqlite3.Connection) -> dict:
    """Every conversation not in the bin (sidebar order) and every preset: two queries."""
    convs = conn.execute(
        f"SELECT {_CONV_COLUMNS} FROM conversations WHERE deleted_at IS NULL "
        "ORDER BY pinned DESC, updated_at DESC, id DESC").fetchall()
    by_conv: dict[int, list[tuple]] = defaultdict(list)
    for row in conn.execute(f"SELECT {_MSG_COLUMNS} FROM messages ORDER BY conversation_id, id"):
        by_conv[row[0]].append(row)
    return {
        "format": ARCHIVE_FORMAT, "version": FORMAT_VERSION, "exported_at": time.time(),
        "conversations": [_conversation_dict(c, by_conv.get(c[0], ())) for c in convs],
        "presets": [{"name": p.name, "system_prompt": p.system_prompt,
                     "sampling": p.sampling.to_dict(), "builtin": p.builtin}
                    for p in presets.list_presets(conn)],
    }


def _check_format(data: object, expected: str) -> dict:
    if not isinstance(data, dict) or data.get("format") != expected:
        raise ValueError(f"not an Inglenook export (expected format “{expected}”)")
    version = data.get("version")
    if not isinstance(version, int) or version < 1:
        raise ValueError("the export has no valid format version")
    if version > FORMAT_VERSION:
        raise ValueError(f"the export was made by a newer Inglenook (format v{version})")
    return data


def _timestamp(value: object, default: float) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return default


def import_json(conn: sqlite3.Connection, data: object) -> int:
    """Add an exported conversation as a new one; ValueError if the data is not one."""
    data = _check_format(data, CONVERSATION_FORMAT)
    items = data.get("messages", [])
    if not isinstance(items, list) or not all(isinstance(m, dict) for m in items):
        raise ValueError("“messages” must be a list of objects")
    stamp = time.time()
    preset = data.get("preset")
    created = _timestamp(data.get("created_at"), stamp)
    conv_id = conversations.create(conn, text(data.get("title", "Imported chat")),
                                   preset if isinstance(preset, str) else None)
    conn.execute("UPDATE conversations SET pinned = ?, created_at = ?, updated_at = ? "
                 "WHERE id = ?", (int(data.get("pinned") is True), created,
                                  _timestamp(data.get("updated_at"), created), conv_id))
    ids: dict[object, int] = {}
    for n, item in enumerate(items, start=1):
        parent, local_id = item.get("parent"), item.get("id")
        if not all(isinstance(v, (int, str, type(None))) for v in (parent, local_id)):
            raise ValueError(f"message {n}: ids must be numbers or text")
        if parent is not None and parent not in ids:
            raise ValueError(f"message {n} refers to a parent that does not come before it")
        if local_id is not None and local_id in ids:
            raise ValueError(f"message {n} repeats the id {local_id!r}")
        role, content = item.get("role"), item.get("content")
        if not isinstance(role, str) or not isinstance(content, str):
            raise ValueError(f"message {n} needs a text role and content")
        status = item.get("status", "complete")
        if status not in STATUSES:
            raise ValueError(f"message {n} has an unknown status {status!r}")
        provenance = item.get("provenance") or {}
        if not isinstance(provenance, dict):
            raise ValueError(f"message {n}: provenance must be an object")
        cursor = conn.execute(
            "INSERT INTO messages (conversation_id, parent_id, role, content, status, "
            "created_at, provenance, active_seq) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (conv_id, None if parent is None else ids[parent], role, content, status,
             _timestamp(item.get("created_at"), stamp), dump_dict(provenance),
             1 if item.get("active") is True else 0))
        if local_id is not None:
            ids[local_id] = int(cursor.lastrowid)  # type: ignore[arg-type]
    return conv_id


def import_all(conn: sqlite3.Connection, data: object) -> list[int]:
    """Add every conversation of an archive, and its presets whose names are not taken."""
    data = _check_format(data, ARCHIVE_FORMAT)
    convs, found = data.get("conversations", []), data.get("presets", [])
    if not isinstance(convs, list) or not isinstance(found, list):
        raise ValueError("“conversations” and “presets” must be lists")
    for item in found:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise ValueError("a preset needs a name")
        if item["name"].strip() and not presets.exists(conn, item["name"]):
            sampling = item.get("sampling")
            presets.save(conn, Preset(
                item["name"], text(item.get("system_prompt", "")),
                SamplingParams.from_dict(sampling if isinstance(sampling, dict) else {})))
    return [import_json(conn, c) for c in convs]


def _role_heading(role: str) -> str:
    return {"user": "You", "assistant": "Assistant", "system": "System"}.get(role, role.title())


def export_markdown(conn: sqlite3.Connection, conv_id: int) -> str:
    """The branch on screen, readable: a heading per message, its model, status notes."""
    summary = conversations.get(conn, conv_id)
    parts = [f"# {summary.title}\n"]
    for message in messages.active_path(conn, conv_id):
        heading = f"## {_role_heading(message.role)}"
        model = message.provenance.model_name
        if message.role == "assistant" and model:
            heading += f" · {model}"
        parts.append(heading + "\n")
        parts.append(message.content.rstrip() + "\n")
        note = _status_note(message.status, message.provenance.finish)
        if message.role == "assistant" and note:
            parts.append(f"*({note})*\n")
    return "\n".join(parts)


def _status_note(status: str, finish: str | None) -> str:
    if status == "interrupted":
        return "interrupted"
    if status == "error" or finish == "error":
        return "failed"
    return {"cancelled": "stopped", "length": "cut at the length limit"}.get(finish or "", "")
