"""Export to JSON and Markdown (importing is native.py, chatgpt.py and transfer.py).

A conversation exports as:

    {"format": "inglenook.conversation", "version": 1, "title": str, "pinned": bool,
     "preset": str | None, "created_at": float, "updated_at": float,
     "settings": {"system_prompt": str, "sampling": dict, …},  # only when the chat has its own
     "messages": [{"id": int, "parent": int | None, "role": str, "content": str,
                   "reasoning": str,  # only when the reply has reasoning
                   "status": str, "created_at": float, "active": bool, "provenance": dict}]}

Every branch is included. Message ids are local to the file (1, 2, … in creation order, parents
before children) and `active` marks the branch on screen, so importing and exporting again gives
the identical dict: timestamps are kept as they were, nothing is renumbered differently.
export_all wraps conversations in {"format": "inglenook.archive", "version": 1, "exported_at":
float, "conversations": [...], "presets": [...]}. "settings" came with schema v2 and is left out
when a chat has none, so files of chats without them are as before and older versions read them.
"reasoning" (schema v3: what a thinking model wrote before its answer) is left out the same way.
So is "attachments" (schema v4), a user's files in order: [{"name": str, "kind": str, "size": int,
"text": str}], an image with "mime" and its bytes as base64 in "data". And "tool_cards" (schema v5),
the tool calls a reply made: [ToolCard.to_json(): {"id", "function", "arguments", "server", "tool",
"state", "decision"?, "result"?: {"status", "text", "detail"}}]. A reply the user edited has
"edited": true in its provenance (its original is its sibling).
"""

from __future__ import annotations

import base64
import sqlite3
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence

from inglenook.core.attachments import Attachment
from inglenook.core.provenance import format_seconds
from inglenook.store import conversations, messages, presets
from inglenook.store.records import Preset, load_cards, load_dict, number, text
from inglenook.tools.cards import ToolCard

CONVERSATION_FORMAT = "inglenook.conversation"
ARCHIVE_FORMAT = "inglenook.archive"
FORMAT_VERSION = 1

_CONV_COLUMNS = "id, title, pinned, preset, created_at, updated_at, settings"
_MSG_COLUMNS = ("conversation_id, id, parent_id, role, content, status, created_at, provenance, "
                "active_seq, reasoning, tool_cards")


Parts = dict[int, tuple[Attachment, ...]]


def attachment_dict(attachment: Attachment) -> dict:
    data: dict[str, object] = {"name": attachment.name, "kind": attachment.kind,
                               "size": attachment.size, "text": attachment.text}
    if attachment.mime:
        data["mime"] = attachment.mime
    if attachment.data:
        data["data"] = base64.b64encode(attachment.data).decode("ascii")
    return data


def _conversation_dict(conv: tuple, rows: Iterable[tuple], parts: Parts) -> dict:
    _, title, pinned, preset, created_at, updated_at, settings = conv
    rows = list(rows)
    local = {row[1]: n for n, row in enumerate(rows, start=1)}
    best: dict[int | None, tuple] = {}  # parent → (active_seq, id) of its active child
    for row in rows:
        key = (row[8], row[1])
        if row[2] not in best or key > best[row[2]]:
            best[row[2]] = key
    data: dict = {
        "format": CONVERSATION_FORMAT, "version": FORMAT_VERSION,
        "title": text(title), "pinned": bool(pinned),
        "preset": None if preset is None else text(preset),
        "created_at": number(created_at), "updated_at": number(updated_at),
    }
    if settings is not None:
        data["settings"] = load_dict(settings, "conversation settings")
    data["messages"] = [_message_dict(row, local, best, parts) for row in rows]
    return data


def _message_dict(row: tuple, local: dict[int, int], best: dict[int | None, tuple],
                  parts: Parts) -> dict:
    _, msg_id, parent_id, role, content, status, created_at, provenance, _, reasoning, cards = row
    data: dict[str, object] = {
        "id": local[msg_id],
        "parent": local.get(parent_id),  # None for roots (and for a dangling parent)
        "role": text(role), "content": text(content),
    }
    if text(reasoning):
        data["reasoning"] = text(reasoning)
    if msg_id in parts:
        data["attachments"] = [attachment_dict(a) for a in parts[msg_id]]
    if found := load_cards(cards):
        data["tool_cards"] = [c.to_json() for c in found]
    data.update({
        "status": text(status), "created_at": number(created_at),
        "active": best[parent_id][1] == msg_id, "provenance": load_dict(provenance),
    })
    return data


def export_json(conn: sqlite3.Connection, conv_id: int) -> dict:
    conv = conn.execute(f"SELECT {_CONV_COLUMNS} FROM conversations WHERE id = ?",
                        (conv_id,)).fetchone()
    if conv is None:
        raise KeyError(f"no conversation {conv_id}")
    rows = conn.execute(f"SELECT {_MSG_COLUMNS} FROM messages WHERE conversation_id = ? "
                        "ORDER BY id", (conv_id,)).fetchall()
    return _conversation_dict(conv, rows, messages.attachments_of(conn, [r[1] for r in rows]))


def export_all(conn: sqlite3.Connection) -> dict:
    """Every conversation not in the bin (sidebar order) and every preset: two queries."""
    convs = conn.execute(
        f"SELECT {_CONV_COLUMNS} FROM conversations WHERE deleted_at IS NULL "
        "ORDER BY pinned DESC, updated_at DESC, id DESC").fetchall()
    by_conv: dict[int, list[tuple]] = defaultdict(list)
    for row in conn.execute(f"SELECT {_MSG_COLUMNS} FROM messages ORDER BY conversation_id, id"):
        by_conv[row[0]].append(row)
    parts = messages.attachments_of(conn, None)
    return _archive([_conversation_dict(c, by_conv.get(c[0], ()), parts) for c in convs],
                    presets.list_presets(conn))


def export_some(conn: sqlite3.Connection, conv_ids: Sequence[int]) -> dict:
    """These conversations (in this order; KeyError for an unknown id) as an archive, with the
    presets they name."""
    chosen = [export_json(conn, conv_id) for conv_id in conv_ids]
    named = {c["preset"].casefold() for c in chosen if c["preset"] is not None}
    return _archive(chosen, [p for p in presets.list_presets(conn)
                             if p.name.casefold() in named])


def _archive(convs: list[dict], found: Iterable[Preset]) -> dict:
    return {
        "format": ARCHIVE_FORMAT, "version": FORMAT_VERSION, "exported_at": time.time(),
        "conversations": convs,
        "presets": [{"name": p.name, "system_prompt": p.system_prompt,
                     "sampling": p.sampling.to_dict(), "builtin": p.builtin} for p in found],
    }


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
        if message.reasoning.strip():
            parts.append(_reasoning_quote(message.reasoning, message.provenance.thinking_s))
        if message.attachments:
            parts.append("\n".join(f"*Attached: {a.describe()}*" for a in message.attachments)
                         + "\n")
        if message.content.strip() or not (message.reasoning.strip() or message.attachments
                                           or message.tool_cards):
            parts.append(message.content.rstrip() + "\n")
        if message.tool_cards:
            parts.append("\n".join(_card_line(c) for c in message.tool_cards) + "\n")
        sources = _sources_line(message.provenance.extra)
        if message.role == "assistant" and sources:
            parts.append(sources + "\n")
        note = _status_note(message.status, message.provenance.finish)
        if message.provenance.extra.get("edited") is True:  # chat/reply_edits.py marks it
            note = f"{note}, then edited" if note else "edited"
        if message.role == "assistant" and note:
            parts.append(f"*({note})*\n")
    return "\n".join(parts)


def _reasoning_quote(reasoning: str, thinking_s: float | None) -> str:
    """The reasoning as a block quote above the answer, so it reads as apart from it."""
    label = "> **Reasoning**"
    if thinking_s is not None:
        label += f" · thought for {format_seconds(thinking_s)}"
    lines = [label, ">"] + [f"> {line}".rstrip() for line in reasoning.strip().splitlines()]
    return "\n".join(lines) + "\n"


def _card_line(card: ToolCard) -> str:
    args = ", ".join(f"{k}={v!r}" for k, v in card.call.arguments.items())
    outcome = card.result.status if card.result else "not run"
    return f"*Tool call: `{card.call.name}({args})` → {outcome}*"


def _sources_line(extra: dict) -> str:
    """The passages a reply was given from the user's documents, as chat/knowledge_turn.py
    records them in its provenance ({"knowledge": {"sources": [{number, path, location}]}});
    read as plain data here, below the chat package."""
    record = extra.get("knowledge")
    sources = record.get("sources") if isinstance(record, dict) else None
    names = [f"[{s.get('number')}] {s.get('path')}, {s.get('location')}"
             for s in (sources if isinstance(sources, list) else []) if isinstance(s, dict)]
    return f"*Sources: {'; '.join(names)}*" if names else ""


def _status_note(status: str, finish: str | None) -> str:
    if status == "interrupted":
        return "interrupted"
    if status == "error" or finish == "error":
        return "failed"
    return {"cancelled": "stopped", "length": "cut at the length limit"}.get(finish or "", "")
