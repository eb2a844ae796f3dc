"""The values the store hands out, and their lenient construction from database rows.

A row written by hand or by a buggy build (text where a number belongs, provenance that is not
JSON) must not hide the rest of the history: every converter here falls back to a harmless value
instead of raising, and keeps what it can of the original.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from inglenook.core.attachments import ATTACHMENT_KINDS, Attachment
from inglenook.core.provenance import Provenance
from inglenook.core.reasoning import split_reasoning
from inglenook.core.sampling import SamplingParams
from inglenook.tools.cards import ToolCard

log = logging.getLogger(__name__)

STATUSES = ("complete", "streaming", "interrupted", "error")


@dataclass(frozen=True)
class ConversationSummary:
    id: int
    title: str
    pinned: bool
    created_at: float
    updated_at: float
    preset: str | None
    message_count: int  # every message in the tree, all branches included


@dataclass(frozen=True)
class StoredMessage:
    """One message. `provenance` says how a reply was made (core.provenance); read leniently,
    so a row written by another version keeps what this one does not understand."""

    id: int
    conversation_id: int
    parent_id: int | None
    role: str
    content: str
    status: str  # one of STATUSES
    created_at: float
    provenance: Provenance
    sibling_index: int  # 1-based position among the children of the same parent (creation order)
    sibling_count: int
    reasoning: str = ""  # what a thinking model wrote before its answer (`content`)
    attachments: tuple[Attachment, ...] = ()  # files of a user's message, in order (v4)
    tool_cards: tuple[ToolCard, ...] = ()  # the tool calls a reply made, in order (v5)


@dataclass(frozen=True)
class SearchHit:
    conversation_id: int
    message_id: int  # 0 for a match in the title of a conversation that has no messages yet
    title: str  # plain text
    snippet: str  # HTML: matches in <b>…</b>, everything else escaped
    in_reasoning: bool = False  # the match is in the reply's reasoning (the snippet says so too)
    in_title: bool = False  # the match is in the title (the snippet is the title, highlighted)


@dataclass(frozen=True)
class Preset:
    name: str
    system_prompt: str
    sampling: SamplingParams
    builtin: bool = False


def text(value: object) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return "" if value is None else str(value)


def number(value: object) -> float:
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return 0.0


def optional_text(value: object) -> str | None:
    return None if value is None else text(value)


def _jsonable(value: object) -> Any:
    """For json.dumps: provenance may carry dataclasses (SamplingParams), tuples or paths."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=str)
    if isinstance(value, PurePath):
        return str(value)
    raise TypeError(f"{type(value).__name__} cannot be stored in provenance")


def dump_dict(data: dict | Provenance) -> str:
    if isinstance(data, Provenance):
        data = data.to_dict()
    if not isinstance(data, dict):
        raise TypeError("provenance must be a dict")
    return json.dumps(data, ensure_ascii=False, sort_keys=True, default=_jsonable)


def load_dict(raw: object, what: str = "provenance") -> dict:
    """A stored JSON object. Anything else is kept, unparsed, under "unreadable"."""
    if raw is None:
        return {}
    try:
        value = json.loads(raw)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        log.warning("Unreadable %s in the database: %.80r", what, raw)
        return {"unreadable": text(raw)}
    return value if isinstance(value, dict) else {"unreadable": value}


def dump_cards(cards: Sequence[ToolCard]) -> str:
    return json.dumps([c.to_json() for c in cards], ensure_ascii=False, sort_keys=True)


def load_cards(raw: object) -> tuple[ToolCard, ...]:
    """Stored cards; anything that is not one is left out (ToolCard.from_json)."""
    try:
        items = json.loads(raw) if raw else []  # type: ignore[arg-type]
    except (TypeError, ValueError):
        log.warning("Unreadable tool calls in the database: %.80r", raw)
        return ()
    cards = [ToolCard.from_json(item) for item in items] if isinstance(items, list) else []
    return tuple(c for c in cards if c is not None)


def split_reply(role: str, content: str) -> tuple[str, str]:
    """(reasoning, answer) of a reply stored or imported as one text, which may open with a
    `<think>` block; anything but an assistant's message is all answer."""
    if role != "assistant" or "<think>" not in content:
        return "", content
    return split_reasoning(content)


ATTACHMENT_COLUMNS = "kind, name, size, text, mime, data, tokens"


def attachment_from_row(row: tuple) -> Attachment:
    """A stored part; a kind this version does not know is shown and sent as text."""
    kind, name, size, content, mime, data, tokens = row
    kind = text(kind)
    return Attachment(name=text(name), kind=kind if kind in ATTACHMENT_KINDS else "text",
                      size=max(int(number(size)), 0), text=text(content), mime=text(mime),
                      data=data if isinstance(data, bytes) else b"",
                      image_tokens=max(int(number(tokens)), 0) if kind == "image" else 0)


def summary_from_row(row: tuple) -> ConversationSummary:
    id_, title, pinned, created_at, updated_at, preset, count = row
    return ConversationSummary(int(id_), text(title), bool(pinned), number(created_at),
                               number(updated_at), optional_text(preset), int(count or 0))


def message_from_row(row: tuple) -> StoredMessage:
    (id_, conv_id, parent_id, role, content, reasoning, status, created_at, provenance, cards,
     index, count) = row
    status = text(status)
    return StoredMessage(
        id=int(id_),
        conversation_id=int(conv_id),
        parent_id=None if parent_id is None else int(parent_id),
        role=text(role),
        content=text(content),
        reasoning=text(reasoning),
        status=status if status in STATUSES else "error",
        created_at=number(created_at),
        provenance=Provenance.from_dict(load_dict(provenance)),
        tool_cards=load_cards(cards),
        sibling_index=int(index or 1),
        sibling_count=int(count or 1),
    )
