"""The conversation list: sidebar, search, rename, pin, delete with undo, export and import.

A deleted chat is hidden while the banner offers Undo (for the latest deletion only) and purged
for good once it no longer does: when another chat is deleted, and when the window closes
(chat/forget.py: its rows, its images' files). The search index is merged free of their words
at quit (and at the next start after a crash), not at each deletion: the merge rewrites it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QWidget

from inglenook.chat.forget import purge_for_good
from inglenook.store import Store, StoreError
from inglenook.ui import tasks
from inglenook.ui.history import dialogs
from inglenook.ui.history.search_dialog import SearchDialog
from inglenook.ui.history.sidebar import ConversationSidebar
from inglenook.ui.widgets.banner import Banner


class HistoryController(QObject):
    """`current` says which conversation is on screen (None: a new chat).

    Signals:
        open_requested(int, int): open conversation (id, message id to show or 0).
        hit_chosen(int, int, object): a search hit: conversation, message, the words sought.
        new_requested(): start a new chat.
        deleting(int): a conversation is about to be deleted (stop its reply).
        deleted(int): a conversation was deleted (soft: Undo brings it back until the next
            deletion or the window closes; then it is purged).
        imported(): conversations and presets were imported.
    """

    open_requested = Signal(int, int)
    hit_chosen = Signal(int, int, object)
    new_requested = Signal()
    deleting = Signal(int)
    deleted = Signal(int)
    imported = Signal()

    def __init__(self, sidebar: ConversationSidebar, store: Store, banner: Banner,
                 current: Callable[[], int | None], parent: QWidget) -> None:
        super().__init__(parent)
        self.sidebar, self.store, self.banner = sidebar, store, banner
        self._current = current
        self._parent = parent
        self._deleted: int | None = None
        self._unscrubbed = False  # a chat was purged whose words the search index still has
        self._import_cancel: threading.Event | None = None
        sidebar.conversation_selected.connect(lambda conv_id: self.open_requested.emit(conv_id, 0))
        sidebar.new_requested.connect(self.new_requested)
        sidebar.rename_requested.connect(self.rename)
        sidebar.pin_requested.connect(self.pin)
        sidebar.delete_requested.connect(self.delete)
        sidebar.export_requested.connect(self.export_conversation)

    def refresh(self) -> None:
        try:
            conversations = self.store.conversations()
        except StoreError as exc:
            self.banner.show_message(f"Could not read conversations: {exc}")
            return
        self.sidebar.set_conversations(conversations, self._current())

    def neighbour(self, step: int) -> int | None:
        """The conversation `step` places away from the one on screen, in sidebar order
        (from a new chat: the first or the last)."""
        order = self.sidebar.order()
        if not order:
            return None
        current = self._current()
        if current not in order:
            return order[0] if step > 0 else order[-1]
        index = order.index(current) + step
        return order[index] if 0 <= index < len(order) else None

    def step(self, step: int) -> None:
        """Open the next (+1) or previous (-1) conversation in sidebar order."""
        conv_id = self.neighbour(step)
        if conv_id is not None:
            self.open_requested.emit(conv_id, 0)

    def _write(self, action: Callable[[], object]) -> bool:
        try:
            action()
        except (StoreError, KeyError) as exc:
            self.banner.show_message(f"Could not save the change: {exc}")
            return False
        return True

    def rename(self, conv_id: int, title: str) -> None:
        if self._write(lambda: self.store.rename(conv_id, title)):
            self.refresh()

    def pin(self, conv_id: int, pinned: bool) -> None:
        if self._write(lambda: self.store.set_pinned(conv_id, pinned)):
            self.refresh()

    def delete(self, conv_id: int) -> None:
        self.deleting.emit(conv_id)
        if not self._write(lambda: self.store.delete(conv_id)):
            return
        if self._deleted is not None and self._deleted != conv_id:
            # Undo brings back the latest only; its words leave the search index at quit.
            self._purge([self._deleted], scrub=False)
            self._unscrubbed = True
        self._deleted = conv_id
        self.deleted.emit(conv_id)
        self.banner.show_message("Conversation deleted.", "info", ("Undo", self.undo_delete))
        self.refresh()

    def undo_delete(self) -> None:
        conv_id, self._deleted = self._deleted, None
        if conv_id is not None and self._write(lambda: self.store.undelete(conv_id)):
            self.banner.clear()
            self.refresh()
            self.open_requested.emit(conv_id, 0)

    def close(self) -> None:
        """The window closes: Undo is no longer offered, so the chat it would bring back is
        purged (a writer task: MainWindow.shutdown waits for it with tasks.join_writers)."""
        conv_id, self._deleted = self._deleted, None
        if conv_id is not None or self._unscrubbed:
            self._purge([] if conv_id is None else [conv_id], scrub=True)
        self._unscrubbed = False

    def _purge(self, conv_ids: list[int], scrub: bool) -> None:
        if not self.store.read_only:
            tasks.run(purge_for_good, self.store.path, conv_ids, scrub=scrub,
                      scrub_anyway=self._unscrubbed, writer=True, name="purge deleted chats")

    def search(self) -> None:
        dialog = SearchDialog(self.store, self._parent)
        dialog.hit_chosen.connect(lambda conv_id, message_id: self.hit_chosen.emit(
            conv_id, message_id, dialog.query.text().split()))
        dialog.open()

    def export_conversation(self, conv_id: int | None = None) -> None:
        conv_id = conv_id or self._current()
        if conv_id is not None:
            self._file_action(lambda: self._exported(dialogs.export_conversation(
                self.store, conv_id, self._parent)), "export")

    def export_all(self) -> None:
        self._file_action(lambda: self._exported(dialogs.export_everything(
            self.store, self._parent)), "export")

    def _exported(self, path: Path | None) -> None:
        if path is not None:  # else cancelled: nothing to say
            self.banner.show_message(f"Exported to {path}.", "info")

    def import_conversations(self, path: str = "") -> None:
        """Read, check and write the file on a worker thread (a 100 MB export takes a while);
        the banner says so, with Cancel. All or nothing: a bad file adds no conversation."""
        path = path or dialogs.ask_import_file(self._parent)
        if not path or self._import_cancel is not None:
            return
        self._import_cancel = threading.Event()
        self.banner.show_message(f"Importing {Path(path).name}…", "info",
                                 ("Cancel", self._import_cancel.set))
        tasks.run(dialogs.import_file, path, self.store.path, self._import_cancel,
                  on_done=self._imported, on_failed=self._import_failed, owner=self,
                  writer=True)  # writes the database: quitting waits for it

    @property
    def importing(self) -> bool:
        return self._import_cancel is not None

    def _imported(self, result: object) -> None:
        self._import_cancel = None
        assert isinstance(result, dialogs.ImportResult)
        self.banner.clear()
        self.refresh()
        self.imported.emit()
        if result.ids:
            self.open_requested.emit(result.ids[0], 0)
        if result.summary:
            dialogs.show_summary(result.summary, self._parent)

    def _import_failed(self, exc: object) -> None:
        self._import_cancel = None
        if isinstance(exc, dialogs.ImportCancelled):
            self.banner.show_message("Import cancelled; nothing was added.", "info")
        elif isinstance(exc, (OSError, ValueError, StoreError)):
            self.banner.show_message(f"Could not import: {exc}")
        else:
            self.banner.show_message(f"Could not import: {type(exc).__name__}: {exc}")

    def _file_action(self, action: Callable[[], object], what: str) -> bool:
        try:
            action()
        except (OSError, ValueError, StoreError) as exc:
            self.banner.show_message(f"Could not {what}: {exc}")
            return False
        return True
