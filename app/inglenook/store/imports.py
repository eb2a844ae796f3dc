"""What an import file holds once it has been read and checked (store/transfer.py reads it),
and writing that into the database. Reading never touches the database and writing checks
nothing, so a file is refused before anything is written, and Store writes a whole file in
one transaction.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field

from inglenook.core.attachments import Attachment
from inglenook.store import db, messages, presets
from inglenook.store.records import Preset, dump_cards, dump_dict
from inglenook.tools.cards import ToolCard


@dataclass(frozen=True)
class ImportedMessage:
    parent: int | None  # index of the parent in its conversation's messages (parents first)
    role: str
    content: str
    status: str
    created_at: float
    active: bool  # on the branch shown when the chat opens
    provenance: dict
    reasoning: str = ""  # what a thinking model wrote before its answer (`content`)
    attachments: tuple[Attachment, ...] = ()  # a user's files, in order
    tool_cards: tuple[ToolCard, ...] = ()  # the tool calls a reply made


@dataclass(frozen=True)
class ImportedConversation:
    title: str
    pinned: bool
    preset: str | None
    created_at: float
    updated_at: float
    settings: dict | None
    messages: tuple[ImportedMessage, ...]


@dataclass
class ImportBatch:
    """A checked file: its conversations, the presets it brings, and notes for the summary
    (what was left out or repaired, as sentences)."""

    source: str  # "an Inglenook archive", "a ChatGPT export", …
    conversations: list[ImportedConversation] = field(default_factory=list)
    presets: list[Preset] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def message_count(self) -> int:
        return sum(len(c.messages) for c in self.conversations)

    def summary(self) -> str:
        """One line for the user: how much came in from what, and what was left out."""
        n, m = len(self.conversations), self.message_count
        line = (f"Imported {n:,} conversation{'' if n == 1 else 's'} ({m:,} "
                f"message{'' if m == 1 else 's'}) from {self.source}")
        if self.notes:
            line += "; " + "; ".join(self.notes)
        return line + "."


def write_batch(conn: sqlite3.Connection, batch: ImportBatch) -> list[int]:
    """Add the presets whose names are free, then every conversation as a new one; returns
    the new conversations' ids. The caller holds the transaction."""
    for preset in batch.presets:
        if preset.name.strip() and not presets.exists(conn, preset.name):
            presets.save(conn, preset)
    return [_write_conversation(conn, conv) for conv in batch.conversations]


def _write_conversation(conn: sqlite3.Connection, conv: ImportedConversation) -> int:
    cursor = conn.execute(
        "INSERT INTO conversations (title, preset, created_at, updated_at, pinned, settings) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        (conv.title, conv.preset, conv.created_at, conv.updated_at, int(conv.pinned),
         None if conv.settings is None else dump_dict(conv.settings)))
    conv_id = db.inserted_id(cursor)
    ids: list[int] = []
    for m in conv.messages:
        cursor = conn.execute(
            "INSERT INTO messages (conversation_id, parent_id, role, content, reasoning, "
            "status, created_at, provenance, active_seq, tool_cards) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (conv_id, None if m.parent is None else ids[m.parent], m.role, m.content,
             m.reasoning, m.status, m.created_at, dump_dict(m.provenance), int(m.active),
             dump_cards(m.tool_cards)))
        ids.append(db.inserted_id(cursor))
        messages.add_attachments(conn, ids[-1], m.attachments)
    return conv_id
