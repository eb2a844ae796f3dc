"""Store: the one object the app uses for conversations, messages, search, export and presets.

Every write is one transaction: it happens completely or not at all. Database failures come out
as StoreError with a message for the user (disk full, read-only, in use, damaged); unknown ids
raise KeyError and invalid arguments ValueError. A Store belongs to the thread that opened it
(sqlite3's check); WAL lets another Store on another thread or process read meanwhile.
"""

from __future__ import annotations

import functools
import logging
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar, cast

from inglenook import paths
from inglenook.core.attachments import Attachment
from inglenook.core.provenance import Provenance
from inglenook.store import (
    conversations,
    db,
    export,
    imports,
    messages,
    native,
    presets,
    purge,
    search,
)
from inglenook.store.imports import ImportBatch
from inglenook.store.instances import InstanceLock
from inglenook.store.records import ConversationSummary, Preset, SearchHit, StoredMessage
from inglenook.tools.cards import ToolCard

log = logging.getLogger(__name__)

F = TypeVar("F", bound=Callable[..., Any])


def _guarded(method: F) -> F:
    """Turn sqlite3 failures into StoreError (bugs such as a closed Store still raise)."""
    @functools.wraps(method)
    def wrapper(self: Store, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except (sqlite3.IntegrityError, sqlite3.ProgrammingError, sqlite3.InterfaceError):
            raise
        except sqlite3.DatabaseError as exc:
            raise db.translate(exc, self.path) from exc
    return cast(F, wrapper)


class Store:
    """The conversation database. `recovered_from` is where a damaged file was moved on open
    (or None); `read_only` is True when changes cannot be saved (every write raises StoreError);
    `alone` is True when no other Store (another window, the CLI) had it open as this one opened.
    """

    def __init__(self, path: Path | None = None, *, read_only: bool = False) -> None:
        self.path = Path(path) if path is not None else paths.database_file()
        self._instances = InstanceLock(self.path)
        with self._instances.opening():  # one process at a time checks and migrates the file
            self._conn, self.recovered_from, self.read_only = db.open_database(self.path,
                                                                               read_only)
            self.alone = False
            if not self.read_only:
                # What is deleted is overwritten, not left in free pages (store/purge.py): a
                # few hundredths of a millisecond on a streaming reply's save.
                self._conn.execute(purge.SECURE_DELETE)
                self.alone = self._instances.join()
            # Replies left streaming were cut short only if no other Store is open: another
            # window, or the CLI beside one, may be streaming them now.
            if self.alone:
                self._mark_interrupted()

    def _mark_interrupted(self) -> None:
        try:
            with db.transaction(self._conn):
                count = messages.mark_interrupted(self._conn)
            if count:
                log.info("%d reply(ies) cut short by the last exit marked interrupted", count)
        except sqlite3.OperationalError as exc:  # e.g. a full disk: still let the user read
            log.warning("Could not mark interrupted replies: %s", exc)

    # -- lifecycle -------------------------------------------------------------------------

    def close(self) -> None:
        conn, self._conn = self._conn, None  # type: ignore[assignment]
        if conn is not None:
            try:
                if not self.read_only:
                    conn.execute("PRAGMA optimize")
            except sqlite3.Error as exc:
                log.debug("PRAGMA optimize failed: %s", exc)
            finally:
                conn.close()
                self._instances.release()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with db.transaction(self._conn) as conn:
            yield conn

    # -- conversations ---------------------------------------------------------------------

    @_guarded
    def create_conversation(self, title: str = "New chat", preset: str | None = None) -> int:
        with self._write() as conn:
            return conversations.create(conn, title, preset)

    @_guarded
    def conversations(self, include_deleted: bool = False) -> list[ConversationSummary]:
        """Pinned first, then the most recently active; soft-deleted ones only if asked."""
        return conversations.list_summaries(self._conn, include_deleted)

    @_guarded
    def conversation(self, conv_id: int) -> ConversationSummary:
        return conversations.get(self._conn, conv_id)

    @_guarded
    def rename(self, conv_id: int, title: str) -> None:
        with self._write() as conn:
            conversations.rename(conn, conv_id, title)

    @_guarded
    def set_pinned(self, conv_id: int, pinned: bool) -> None:
        with self._write() as conn:
            conversations.set_pinned(conn, conv_id, pinned)

    @_guarded
    def set_unread(self, conv_id: int, unread: bool) -> None:
        with self._write() as conn:
            conversations.set_unread(conn, conv_id, unread)

    @_guarded
    def unread_ids(self) -> list[int]:
        return conversations.unread_ids(self._conn)

    @_guarded
    def set_preset(self, conv_id: int, name: str | None) -> None:
        with self._write() as conn:
            conversations.set_preset(conn, conv_id, name)

    @_guarded
    def chat_settings(self, conv_id: int) -> tuple[str | None, dict | None]:
        """(preset name or None, the chat's own settings as stored or None)."""
        return conversations.settings(self._conn, conv_id)

    @_guarded
    def set_chat_settings(self, conv_id: int, preset: str | None, values: dict) -> None:
        """Keep a chat's settings (ChatSettings.to_dict()) and the preset they came from."""
        with self._write() as conn:
            conversations.set_settings(conn, conv_id, preset, values)

    @_guarded
    def delete(self, conv_id: int) -> None:
        """Soft delete: hidden from conversations() and search, kept for undelete()."""
        with self._write() as conn:
            conversations.delete(conn, conv_id)

    @_guarded
    def undelete(self, conv_id: int) -> None:
        with self._write() as conn:
            conversations.undelete(conn, conv_id)

    @_guarded
    def purge_deleted(self, older_than_s: float = 0) -> int:
        """Remove for good what was deleted at least older_than_s ago; returns how many. The
        window purges with chat/forget.py, which also removes the images' cache files."""
        with self._write() as conn:
            ids, _images = purge.purge(
                conn, purge.deleted_ids(conn, time.time() - older_than_s))
        return len(ids)

    # -- messages --------------------------------------------------------------------------

    @_guarded
    def add_message(self, conv_id: int, role: str, content: str, parent_id: int | None, *,
                    status: str = "complete", provenance: dict | Provenance | None = None,
                    reasoning: str = "", attachments: Sequence[Attachment] = (),
                    tool_cards: Sequence[ToolCard] = ()) -> int:
        """Append under parent_id (None: a root). The new message becomes the active child of
        its parent, and the parent's branch becomes the one on screen, so adding a sibling is
        branching. Bumps the conversation's updated_at. `content` is the answer alone; what a
        thinking model wrote before it goes in `reasoning` (its times in the provenance).
        `attachments` are the files of a user's message, kept with it in this order;
        `tool_cards` the tool calls a reply made."""
        with self._write() as conn:
            return messages.add(conn, conv_id, role, content, parent_id, status, provenance,
                                reasoning, attachments, tool_cards)

    @_guarded
    def update_message(self, msg_id: int, content: str, *, status: str | None = None,
                       provenance: dict | Provenance | None = None,
                       reasoning: str | None = None,
                       tool_cards: Sequence[ToolCard] | None = None) -> None:
        """Save a streaming reply's text so far (call per batch, not per token). status,
        provenance, reasoning and tool cards change only when given; provenance and cards
        replace what was stored."""
        with self._write() as conn:
            messages.update(conn, msg_id, content, status, provenance, reasoning, tool_cards)

    @_guarded
    def active_path(self, conv_id: int) -> list[StoredMessage]:
        """Root to leaf along active children: the branch on screen and sent to the model."""
        return messages.active_path(self._conn, conv_id)

    @_guarded
    def outline(self, conv_id: int, below: int | None = None) -> list[tuple]:
        """The active path as rows of numbers (branch.Outline), without reading the messages;
        only below `below` if given."""
        return messages.outline(self._conn, conv_id, below)

    @_guarded
    def messages_by_id(self, msg_ids: Sequence[int]) -> list[StoredMessage]:
        """These messages, in the order given; ids that no longer exist are left out."""
        return messages.by_ids(self._conn, msg_ids)

    @_guarded
    def show(self, msg_id: int) -> int:
        """Put msg_id (and its ancestors) on screen, as select_sibling does, without reading
        the new path; returns the conversation's id."""
        with self._write() as conn:
            return messages.select(conn, msg_id)

    @_guarded
    def select_sibling(self, msg_id: int) -> list[StoredMessage]:
        """Put msg_id (and its ancestors) on screen; returns the new active path. Also the
        way to open a search hit that lies on another branch."""
        with self._write() as conn:
            conv_id = messages.select(conn, msg_id)
        return messages.active_path(self._conn, conv_id)

    @_guarded
    def siblings(self, msg_id: int) -> list[StoredMessage]:
        """msg_id and the other children of its parent (or the other roots), in the order of
        sibling_index: what ‹ 2/3 › steps through."""
        return messages.siblings(self._conn, msg_id)

    @_guarded
    def delete_from(self, msg_id: int) -> None:
        """Delete the message and its descendants; the parent's active child falls back to
        the most recently active remaining sibling."""
        with self._write() as conn:
            messages.delete_from(conn, msg_id)

    # -- search and export -----------------------------------------------------------------

    @_guarded
    def search(self, query: str, limit: int = 50) -> list[SearchHit]:
        """Titles, answers and reasoning; a hit in reasoning has in_reasoning set."""
        return search.search(self._conn, query, limit)

    @_guarded
    def find_in(self, conv_id: int, query: str) -> list[int]:
        """Ids of the messages of this conversation (any branch) that match `query` as search
        does: every word, the last as a prefix, ignoring case and accents."""
        return search.in_conversation(self._conn, conv_id, query)

    @_guarded
    def export_json(self, conv_id: int) -> dict:
        return export.export_json(self._conn, conv_id)

    @_guarded
    def export_markdown(self, conv_id: int) -> str:
        return export.export_markdown(self._conn, conv_id)

    @_guarded
    def import_json(self, data: dict) -> int:
        """A new conversation from export_json's output (ValueError if it is not one)."""
        return self.import_batch(native.read_conversation_export(data))[0]

    @_guarded
    def export_all(self) -> dict:
        return export.export_all(self._conn)

    @_guarded
    def export_some(self, conv_ids: Sequence[int]) -> dict:
        """These conversations as an archive, with the presets they name (KeyError: no such
        conversation)."""
        return export.export_some(self._conn, conv_ids)

    @_guarded
    def import_all(self, data: dict) -> list[int]:
        """Every conversation of an export_all archive, all or nothing."""
        return self.import_batch(native.read_archive(data))

    @_guarded
    def import_batch(self, batch: ImportBatch) -> list[int]:
        """A checked import file (transfer.read_import) in one transaction: every conversation
        and the presets whose names are free, or nothing. Returns the new conversations' ids."""
        with self._write() as conn:
            return imports.write_batch(conn, batch)

    # -- presets ---------------------------------------------------------------------------

    @_guarded
    def presets(self) -> list[Preset]:
        return presets.list_presets(self._conn)

    @_guarded
    def save_preset(self, preset: Preset) -> None:
        with self._write() as conn:
            presets.save(conn, preset)

    @_guarded
    def delete_preset(self, name: str) -> None:
        with self._write() as conn:
            presets.delete(conn, name)
