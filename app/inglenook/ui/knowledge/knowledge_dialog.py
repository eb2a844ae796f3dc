"""Chat → Knowledge…: collections of your own folders and files, what is indexed of them, the
files that could not be read and why (and those read only in part), and the indexing run with
its progress and Cancel. Rebuild (asked first) reads every file again from scratch.

The dialog only shows and asks: KnowledgeController makes the changes and runs the indexing, so
closing the dialog mid-run leaves the run going (it shows again when the dialog is opened).
A collection's vectors have two rows of their own: the model (embed_row.py) and where they are
kept (backend_row.py).
"""

from __future__ import annotations

import os
from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QMessageBox,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from inglenook.core.units import count
from inglenook.knowledge.collections import (
    CollectionSummary,
    backend_text,
    describe_progress,
    describe_report,
    describe_summary,
)
from inglenook.knowledge.fts import KnowledgeError
from inglenook.knowledge.indexer import IndexReport, Progress
from inglenook.ui.knowledge.backend_row import BackendRow
from inglenook.ui.knowledge.embed_row import EmbedRow
from inglenook.ui.knowledge.knowledge_controller import KnowledgeController
from inglenook.ui.knowledge.rebuild_question import ask_rebuild
from inglenook.ui.knowledge.unread_list import UnreadList
from inglenook.ui.plain import plain_box, plain_label, plain_tip
from inglenook.ui.widgets.controls import helper_label
from inglenook.ui.widgets.elided_label import ElidedLabel

NAME = Qt.ItemDataRole.UserRole
class KnowledgeDialog(QDialog):
    def __init__(self, knowledge: KnowledgeController, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("knowledgeDialog")
        self.setWindowTitle("Knowledge")
        self.resize(860, 560)
        self.knowledge = knowledge
        self.summaries: list[CollectionSummary] = []
        self.collections = self._list("knowledgeCollections", "Collections",
                                      "Your collections, with their files and passages")
        self.roots = self._list("knowledgeRoots", "Folders and files of the collection",
                                "What the selected collection reads: select some to remove")
        self.roots.setSelectionMode(QListWidget.SelectionMode.ExtendedSelection)
        self.problem_list = UnreadList(self)
        self.problems_label = self.problem_list.label
        self.name_edit = QLineEdit(self)
        self.name_edit.setObjectName("knowledgeNameEdit")
        self.name_edit.setPlaceholderText("Name of a new collection")
        self.name_edit.setAccessibleName("Name of a new collection")
        self.name_edit.setToolTip("A collection is a set of folders and files; name it here")
        self.name_edit.returnPressed.connect(self.create_collection)
        # Room for a name when the dialog is narrow (the list beside it gives way first).
        self.name_edit.setMinimumWidth(self.name_edit.fontMetrics().averageCharWidth() * 14)
        self.new_button = self._button("New collection", "knowledgeNewButton",
                                       "Make an empty collection with this name",
                                       self.create_collection)
        self.delete_button = self._button(
            "Delete collection", "knowledgeDeleteButton",
            "Forget the selected collection and its index (your files are not touched)",
            self._confirm_delete)
        self.title = plain_label("", self, name="knowledgeTitle")
        font = self.title.font()
        font.setBold(True)
        self.title.setFont(font)
        self.figures = helper_label("", self, name="knowledgeFigures")
        self.add_folder_button = self._button("Add folder…", "knowledgeAddFolder",
                                              "Add a folder (and everything under it)",
                                              self._pick_folder)
        self.add_files_button = self._button("Add files…", "knowledgeAddFiles",
                                             "Add single files", self._pick_files)
        self.remove_button = self._button("Remove", "knowledgeRemoveButton",
                                          "Take the selected folders or files out of the "
                                          "collection (the files are not touched)",
                                          self.remove_selected)
        self.reindex_button = self._button("Re-index", "knowledgeReindexButton",
                                           "Read new and changed files again; gone ones leave",
                                           self.reindex)
        self.rebuild_button = self._button("Rebuild…", "knowledgeRebuildButton",
                                           "Read every file again from scratch and make its "
                                           "passages' vectors again", self._confirm_rebuild)
        self.progress = QProgressBar(self)
        self.progress.setObjectName("knowledgeProgress")
        self.progress.setAccessibleName("Indexing progress")
        self.progress_text = ElidedLabel(self)
        self.progress_text.setObjectName("knowledgeProgressText")
        self.cancel_button = self._button("Cancel", "knowledgeCancelButton",
                                          "Stop indexing; what was read so far is kept",
                                          knowledge.cancel)
        self.embed_model = EmbedRow(knowledge, self._say, self)
        self.backend = BackendRow(knowledge, self)
        self.watch_box = QCheckBox("Watch for changes", self)
        self.watch_box.setObjectName("knowledgeWatch")
        self.watch_box.setToolTip("Index the collection again by itself when its files are "
                                  "added, changed or deleted (only what changed is read)")
        self.watch_box.clicked.connect(self._choose_watch)
        self.follow_box = QCheckBox("Follow links out of the folders", self)
        self.follow_box.setObjectName("knowledgeFollowLinks")
        self.follow_box.setToolTip("Also read what symbolic links in the folders point to "
                                   "outside them (off: such links are listed, not followed)")
        self.follow_box.clicked.connect(self._choose_follow)
        self.watch_note = helper_label("", self, name="knowledgeWatchNote")
        self.watch_note.setWordWrap(True)
        self.message = helper_label("", self, name="knowledgeMessage")
        self._build()
        self.collections.currentRowChanged.connect(lambda _row: self._show_selected())
        self.roots.itemSelectionChanged.connect(self._update_buttons)
        knowledge.summaries_ready.connect(self._fill)
        knowledge.progress.connect(self._show_progress)
        knowledge.indexed.connect(self._indexed)
        knowledge.failed.connect(lambda _name, why: self._say(why))
        knowledge.moved.connect(self._moved)
        knowledge.deleted.connect(self._deleted)
        self._wanted = ""  # a collection to select once it is listed (just made)
        self._fill(knowledge.summaries or [])  # as last read, until it is read again
        knowledge.read_summaries()
        self._show_run()

    def _list(self, name: str, accessible: str, tip: str) -> QListWidget:
        widget = QListWidget(self)
        widget.setObjectName(name)
        widget.setAccessibleName(accessible)
        widget.setToolTip(tip)
        widget.setUniformItemSizes(True)  # a long problems list lays out at once
        return widget

    def _button(self, text: str, name: str, tip: str, slot: object) -> QPushButton:
        button = QPushButton(text, self)
        # Enter in the name field makes the collection (returnPressed); a button that is
        # also the dialog's default would be pressed too, with the name already cleared.
        button.setAutoDefault(False)
        button.setObjectName(name)
        button.setToolTip(tip)
        button.clicked.connect(slot)
        return button

    def _build(self) -> None:
        left = QVBoxLayout()
        left.addWidget(QLabel("Collections", self))
        left.addWidget(self.collections, 1)
        new_row = QHBoxLayout()
        new_row.addWidget(self.name_edit, 1)
        new_row.addWidget(self.new_button)
        left.addLayout(new_row)
        left.addWidget(self.delete_button, 0, Qt.AlignmentFlag.AlignLeft)
        right = QVBoxLayout()
        right.addWidget(self.title)
        right.addWidget(self.figures)
        vectors = QGridLayout()  # the two rows' labels in one column
        vectors.addWidget(self.embed_model.label, 0, 0)
        vectors.addWidget(self.embed_model, 0, 1)
        vectors.addWidget(self.embed_model.error, 1, 1)
        vectors.addWidget(self.backend.label, 2, 0)
        vectors.addWidget(self.backend, 2, 1)
        vectors.addWidget(self.backend.url_label, 3, 0)
        vectors.addWidget(self.backend.url, 3, 1)
        vectors.addWidget(self.backend.note, 4, 1)
        vectors.setColumnStretch(1, 1)
        right.addLayout(vectors)
        right.addWidget(self.roots, 1)
        buttons = QHBoxLayout()
        for button in (self.add_folder_button, self.add_files_button, self.remove_button):
            buttons.addWidget(button)
        buttons.addStretch(1)
        buttons.addWidget(self.reindex_button)
        buttons.addWidget(self.rebuild_button)
        right.addLayout(buttons)
        options = QHBoxLayout()  # a line of its own: the buttons' row sets the least width
        options.addWidget(self.watch_box)
        options.addWidget(self.follow_box)
        options.addStretch(1)
        right.addLayout(options)
        right.addWidget(self.watch_note)
        run = QGridLayout()
        run.addWidget(self.progress, 0, 0)
        run.addWidget(self.cancel_button, 0, 1)
        run.addWidget(self.progress_text, 1, 0, 1, 2)
        right.addLayout(run)
        right.addWidget(self.problems_label)
        right.addWidget(self.problem_list, 1)
        columns = QHBoxLayout()
        columns.addLayout(left, 2)
        columns.addLayout(right, 3)
        close = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        close.button(QDialogButtonBox.StandardButton.Close).setToolTip("Close this window")
        close.rejected.connect(self.reject)
        for button in self.findChildren(QPushButton):  # the rows' buttons too (see _button)
            button.setAutoDefault(False)
        layout = QVBoxLayout(self)
        layout.addLayout(columns, 1)
        bottom = QHBoxLayout()
        bottom.addWidget(self.message, 1)
        bottom.addWidget(close)
        layout.addLayout(bottom)

    # ---- showing ----------------------------------------------------------------------------
    def selected(self) -> CollectionSummary | None:
        row = self.collections.currentRow()
        return self.summaries[row] if 0 <= row < len(self.summaries) else None

    def _fill(self, summaries: list[CollectionSummary]) -> None:
        current = self.selected()
        wanted = self._wanted or (current.name if current is not None else "")
        self.summaries = summaries
        self.collections.blockSignals(True)
        self.collections.clear()
        for summary in self.summaries:
            item = QListWidgetItem(self._row_text(summary))
            item.setData(NAME, summary.name)
            item.setToolTip(plain_tip("\n".join(summary.roots) or "No folders yet"))
            self.collections.addItem(item)
        names = [s.name for s in self.summaries]
        if self._wanted in names:
            self._wanted = ""
        row = names.index(wanted) if wanted in names else (0 if names else -1)
        self.collections.setCurrentRow(row)
        self.collections.blockSignals(False)
        self._show_selected()
        self._show_run()  # read again after a run ended, which may have ended quietly

    def select(self, name: str) -> None:
        """Select it now, or once it is listed."""
        names = [s.name for s in self.summaries]
        if name in names:
            self.collections.setCurrentRow(names.index(name))
        else:
            self._wanted = name

    def _show_selected(self) -> None:
        summary = self.selected()
        self.roots.clear()
        self.problem_list.show_collection(summary)
        if summary is None:
            self.title.setText("No collections yet")
            self.figures.setText("Name one on the left, then add the folders and files it "
                                 "holds. Chats choose the collections they use in the side "
                                 "panel.")
            self.watch_note.hide()
            self.embed_model.show_collection(None)
            self.backend.show_collection(None)
            self._update_buttons()
            return
        self.title.setText(summary.name)
        self.figures.setText(self._figures(summary))
        for root in summary.roots:
            item = QListWidgetItem(root)
            item.setData(NAME, root)
            item.setToolTip(plain_tip(root))
            self.roots.addItem(item)
        self.embed_model.show_collection(summary)
        self.backend.show_collection(summary)
        self.watch_box.setChecked(summary.watch)
        self.follow_box.setChecked(summary.follow_links)
        note = self.knowledge.watch_status(summary.name) if summary.roots else ""
        self.watch_note.setText(note)
        self.watch_note.setVisible(bool(note))
        self._update_buttons()

    def _busy(self, name: str) -> str:
        """What a run is doing to the collection now, "" nothing: while it runs, the figures
        as last read (0 files for a new one) would say the wrong thing."""
        if name == self.knowledge.running:
            p = self.knowledge.last_progress
            return f"Indexing now: {describe_progress(p)}" if p is not None else \
                "Indexing now…"
        return "Waiting to be indexed…" if name in self.knowledge.queue else ""

    def _row_text(self, summary: CollectionSummary) -> str:
        if self._busy(summary.name):
            return f"{summary.name}\nindexing…"
        return f"{summary.name}\n{count(summary.documents, 'file')} · " \
               f"{count(summary.chunks, 'passage')}"

    def _figures(self, summary: CollectionSummary) -> str:
        if not summary.roots:
            return "No folders or files yet: add some below."
        return self._busy(summary.name) or describe_summary(summary)

    def _choose_follow(self, checked: bool) -> None:
        summary = self.selected()
        if summary is not None and checked != summary.follow_links:
            self._change(lambda: self.knowledge.set_follow_links(summary.name, checked))

    def _choose_watch(self, checked: bool) -> None:
        summary = self.selected()
        if summary is not None and checked != summary.watch:
            self._change(lambda: self.knowledge.set_watch(summary.name, checked))

    def _change(self, change: Callable[[], None]) -> None:
        """A change through the controller; what refuses it is said below the lists."""
        try:
            change()
        except KnowledgeError as exc:
            self._say(str(exc))

    def _update_buttons(self) -> None:
        summary = self.selected()
        has = summary is not None
        self.watch_box.setEnabled(has)
        self.follow_box.setEnabled(has)
        for button in (self.add_folder_button, self.add_files_button, self.delete_button):
            button.setEnabled(has)
        self.remove_button.setEnabled(has and bool(self.roots.selectedItems()))
        busy = has and summary is not None and (summary.name == self.knowledge.running
                                                 or summary.name in self.knowledge.queue)
        self.reindex_button.setEnabled(has and bool(summary and summary.roots) and not busy)
        self.rebuild_button.setEnabled(self.reindex_button.isEnabled())

    def _show_run(self) -> None:
        running = self.knowledge.running
        for widget in (self.progress, self.cancel_button, self.progress_text):
            widget.setVisible(bool(running))
        if running and self.knowledge.last_progress is not None:
            self._show_progress(running, self.knowledge.last_progress)

    def _show_progress(self, name: str, p: Progress) -> None:
        for widget in (self.progress, self.cancel_button, self.progress_text):
            widget.show()
        if p.total is None:
            self.progress.setRange(0, 0)  # busy: the number of files is not known yet
        else:
            self.progress.setRange(0, max(1, p.total))
            self.progress.setValue(p.done)
        where = f" {os.path.basename(p.path)}" if p.path else ""
        what = f"Rebuilding {name}" if self.knowledge.running_rebuild else name
        self.progress_text.set_forms(f"{what}: {describe_progress(p)}{where}",
                                     f"{what}: {describe_progress(p)}")
        self.progress_text.setToolTip(plain_tip(p.path))
        for row, summary in enumerate(self.summaries):
            if summary.name == name:
                self.collections.item(row).setText(self._row_text(summary))
        selected = self.selected()
        if selected is not None and selected.name == name:
            self.figures.setText(self._figures(selected))
        self._update_buttons()

    def _indexed(self, name: str, report: IndexReport) -> None:
        self._say(f"{name}: {describe_report(report)}", error=False)
        self._show_run()

    def _moved(self, name: str, why: str) -> None:
        """Said under the row when refused; here when done."""
        if not why:
            found = [s for s in self.summaries if s.name == name]
            where = backend_text(found[0].backend, found[0].qdrant_url,
                                 found[0].qdrant_name) if found else "its new place"
            self._say(f"{name}: vectors are kept in {where} from now on.", error=False)

    def _say(self, text: str, error: bool = True) -> None:
        self.message.setText(text)
        self.message.setProperty("kind", "error" if error else "info")
        self._show_run()

    # ---- the user ---------------------------------------------------------------------------
    def create_collection(self) -> None:
        try:
            name = self.knowledge.create(self.name_edit.text())
        except KnowledgeError as exc:
            self._say(str(exc))  # what was typed stays, to be corrected
            return
        self.name_edit.clear()
        self.select(name)
        self._say(f"Made {name}: now add the folders and files it holds.", error=False)

    def add_paths(self, paths: list[str]) -> None:
        summary = self.selected()
        if summary is None or not paths:
            return
        self._say("", error=False)
        try:
            self.knowledge.add_paths(summary.name, paths)
        except KnowledgeError as exc:
            self._say(str(exc))

    def remove_selected(self) -> None:
        summary = self.selected()
        gone = [str(item.data(NAME)) for item in self.roots.selectedItems()]
        if summary is not None and gone:
            try:
                self.knowledge.remove_paths(summary.name, gone)
            except KnowledgeError as exc:
                self._say(str(exc))

    def reindex(self) -> None:
        summary = self.selected()
        if summary is not None:
            self.knowledge.index(summary.name)
            self._update_buttons()

    def rebuild_selected(self) -> None:
        summary = self.selected()
        if summary is not None:
            self.knowledge.rebuild(summary.name)
            self._update_buttons()

    def _confirm_rebuild(self) -> None:
        summary = self.selected()
        if summary is not None:
            ask_rebuild(self, summary, self.rebuild_selected)

    def delete_selected(self) -> None:
        summary = self.selected()
        if summary is None:
            return
        self.knowledge.delete(summary.name)
        self._say(f"Forgetting {summary.name}…", error=False)

    def _deleted(self, name: str) -> None:
        self._say(f"Forgot {name} (its files are untouched).", error=False)

    def _confirm_delete(self) -> None:
        summary = self.selected()
        if summary is None:
            return
        box = plain_box(QMessageBox(QMessageBox.Icon.Question, "Delete collection",
                                    f"Forget the collection {summary.name} and its index? "
                                    "Your files are not touched; chats that use it will "
                                    "answer without it.",
                                    QMessageBox.StandardButton.Yes
                                    | QMessageBox.StandardButton.Cancel, self))
        if box.exec() == QMessageBox.StandardButton.Yes:
            self.delete_selected()

    def _pick_folder(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Add a folder to the collection")
        if folder:
            self.add_paths([folder])

    def _pick_files(self) -> None:
        files, _ = QFileDialog.getOpenFileNames(self, "Add files to the collection")
        self.add_paths(files)
