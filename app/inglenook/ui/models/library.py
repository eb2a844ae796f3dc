"""The Models dialog's Library page: the installed models with what their GGUF headers say
(and a note on those whose architecture or tokenizer the bundled engine does not know), and
whether each can see images (a projector chosen for it, or one beside it); import, reveal,
delete, and "use this model".

Headers are read on a background thread (each read is bounded to ~2 s, but a dozen big files on
a slow disk add up), and rows fill in as the answers come back.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import cast

from PySide6.QtCore import Qt, QUrl, Signal
from PySide6.QtGui import QDesktopServices, QResizeEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFileDialog,
    QFrame,
    QHBoxLayout,
    QHeaderView,
    QMessageBox,
    QPushButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from inglenook import paths
from inglenook.core.units import describe_params, describe_size
from inglenook.models import compat
from inglenook.models.filenames import parse_quant
from inglenook.models.gguf import GGUFError, GGUFHeader, read_header
from inglenook.models.library import (
    ImportMode,
    LibraryError,
    ModelEntry,
    import_model,
    installed_models,
    plan_removal,
    quantization,
    remove,
)
from inglenook.models.projector import known_projector, vision_projector
from inglenook.ui import tasks
from inglenook.ui.models.page import notice_label, page_header
from inglenook.ui.models.picker import LOADED_MARK
from inglenook.ui.models.quantize_dialog import QuantizeDialog
from inglenook.ui.models.speech_library import SpeechLibrary
from inglenook.ui.plain import plain_box, plain_label, plain_tip
from inglenook.ui.widgets.style import restyle

COLUMNS = ("Model", "Architecture", "Params", "Quant", "Size", "Context", "Template", "Vision",
           "Source")
PENDING = "…"
NAME_ROOM = 220  # pixels the Model column keeps before other columns are hidden
OPTIONAL_COLUMNS = (8, 6, 7, 5, 1)  # Source, Template, Vision, Context, Architecture
EMBEDDING_NOTE = ("An embedding model: Knowledge makes its vectors with it (and the API serves "
                  "/v1/embeddings); it does not chat.")


# -- questions to the user (module functions, so that tests can answer them) ----------------------
def ask(parent: QWidget, title: str, text: str, confirm: str) -> bool:
    """A yes/no question whose safe answer (Cancel) is the default."""
    box = plain_box(QMessageBox(QMessageBox.Icon.Question, title, text,
                                QMessageBox.StandardButton.Cancel, parent))
    yes = box.addButton(confirm, QMessageBox.ButtonRole.DestructiveRole)
    box.setDefaultButton(QMessageBox.StandardButton.Cancel)
    box.exec()
    return box.clickedButton() is yes


def pick_gguf_file(parent: QWidget) -> str:
    path, _ = QFileDialog.getOpenFileName(parent, "Import a GGUF model", str(Path.home()),
                                          "GGUF models (*.gguf)")
    return path


def ask_import_mode(parent: QWidget, name: str) -> ImportMode | None:
    box = plain_box(QMessageBox(QMessageBox.Icon.Question, "Import a model",
                                f"How should Inglenook keep {name}?",
                                QMessageBox.StandardButton.Cancel, parent))
    box.setInformativeText("A copy lives in Inglenook's models folder and stays if the original "
                           "is moved. Using it where it is saves disk space: the library links "
                           "to the file.")
    copy = box.addButton("Copy into the models folder", QMessageBox.ButtonRole.AcceptRole)
    link = box.addButton("Use it where it is", QMessageBox.ButtonRole.AcceptRole)
    box.setDefaultButton(copy)
    box.exec()
    clicked = box.clickedButton()
    return "copy" if clicked is copy else "link" if clicked is link else None


def open_folder(folder: Path) -> bool:
    return QDesktopServices.openUrl(QUrl.fromLocalFile(str(folder)))


# -- the page -------------------------------------------------------------------------------------
def _read_headers(report: object, generation: int, paths_: list[str],
                  chosen: dict[str, str]) -> None:
    """Each header (a path in `chosen` only when its header is known already), then where the
    model's projector is (vision_projector: remembered for known_projector)."""
    for path in paths_:
        try:
            result: GGUFHeader | str = read_header(path)
        except GGUFError as exc:
            result = str(exc)
        if path in chosen:
            vision_projector(path, chosen[path])
        report((generation, path, result))  # type: ignore[operator]
    for path, projector in chosen.items():
        if path not in paths_:
            vision_projector(path, projector)
            report((generation, path, None))  # type: ignore[operator]


class LibraryPage(QWidget):
    """Signals:
        model_chosen(str): the user chose a model to chat with; its path.
        models_changed(): a model was imported or deleted.
        defaults_requested(str): the user wants to edit a model's load defaults; its path.
    """

    model_chosen = Signal(str)
    models_changed = Signal()
    defaults_requested = Signal(str)

    def __init__(self, parent: QWidget | None = None,
                 chosen_projector: Callable[[str], str] | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("libraryPage")
        self.entries: list[ModelEntry] = []
        self.loaded = ""  # the model loaded now, marked LOADED_MARK
        self.headers: dict[str, GGUFHeader | str] = {}
        self._cache: dict[tuple[str, int, int], GGUFHeader | str] = {}
        self._generation = 0
        self.importing = False
        # The projector a model's defaults name ("" none).
        self.chosen_projector: Callable[[str], str] = chosen_projector or (lambda _path: "")
        self._build()
        self.refresh()

    def _build(self) -> None:
        self.summary = plain_label("", self)  # it names the models folder
        self.import_button = QPushButton("Import a GGUF…", self)
        self.import_button.setObjectName("importModelButton")
        self.import_button.setToolTip("Add a .gguf file from anywhere on this computer")
        self.import_button.clicked.connect(self.import_clicked)
        head = page_header(self, "Library", self.summary, self.import_button)
        self.notice = notice_label(self)

        self.table = QTreeWidget(self)
        self.table.setObjectName("libraryTable")
        self.table.setHeaderLabels(COLUMNS)
        self.table.setRootIsDecorated(False)
        self.table.setUniformRowHeights(True)
        # A name's start says what the model is: cut at its end (the tooltip has it all).
        self.table.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.table.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        header = self.table.header()
        header.setStretchLastSection(False)
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        for column in range(1, len(COLUMNS)):
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.ResizeToContents)
        header.setMinimumSectionSize(40)
        self.table.itemSelectionChanged.connect(self._show_selected)
        self.table.itemDoubleClicked.connect(lambda *_: self.use_selected())

        card = QFrame(self)
        card.setObjectName("modelDetails")
        # Plain text: a file's name and header are outside text.
        self.detail_name = plain_label("", card, name="modelDetailsName")
        self.detail_facts = plain_label("", card, name="modelDetailsFacts")
        self.detail_facts.setWordWrap(True)
        self.detail_path = plain_label("", card, name="modelDetailsPath")
        self.detail_path.setWordWrap(True)
        self.detail_path.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.use_button = QPushButton("Use this model", card)
        self.use_button.setObjectName("useModelButton")
        self.use_button.setToolTip("Load this model for chatting")
        self.use_button.clicked.connect(self.use_selected)
        self.defaults_button = QPushButton("Defaults…", card)
        self.defaults_button.setObjectName("modelDefaultsButton")
        self.defaults_button.setToolTip("Context, GPU layers, preset and chat template for "
                                        "this model")
        self.defaults_button.clicked.connect(self._defaults_clicked)
        self.reveal_button = QPushButton("Show in folder", card)
        self.reveal_button.setObjectName("revealModelButton")
        self.reveal_button.setToolTip("Open the folder that holds this model's file")
        self.reveal_button.clicked.connect(self.reveal_selected)
        self.quantize_button = QPushButton("Smaller copy…", card)
        self.quantize_button.setObjectName("quantizeModelButton")
        self.quantize_button.setToolTip("Make a quantized copy that needs less memory")
        self.quantize_button.clicked.connect(self.quantize_selected)
        self.delete_button = QPushButton("Delete…", card)
        self.delete_button.setObjectName("deleteModelButton")
        self.delete_button.clicked.connect(self.delete_selected)
        # Two rows (using it; the file): in one, the five made the Models dialog wider than a
        # 700-pixel window.
        use_row, file_row = QHBoxLayout(), QHBoxLayout()
        use_row.addWidget(self.use_button)
        use_row.addWidget(self.defaults_button)
        use_row.addStretch(1)
        file_row.addWidget(self.reveal_button)
        file_row.addWidget(self.quantize_button)
        file_row.addStretch(1)
        file_row.addWidget(self.delete_button)
        buttons = QVBoxLayout()
        buttons.addLayout(use_row)
        buttons.addLayout(file_row)
        card_layout = QVBoxLayout(card)
        card_layout.setContentsMargins(16, 14, 16, 14)
        card_layout.setSpacing(4)
        card_layout.addWidget(self.detail_name)
        card_layout.addWidget(self.detail_facts)
        card_layout.addWidget(self.detail_path)
        card_layout.addSpacing(6)
        card_layout.addLayout(buttons)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(24, 20, 24, 20)
        layout.setSpacing(12)
        layout.addLayout(head)
        layout.addWidget(self.notice)
        layout.addWidget(self.table, 1)
        layout.addWidget(card)
        self.speech = SpeechLibrary(self)  # whisper models and voices, and which are used
        layout.addWidget(self.speech)

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self.fit_columns()

    def fit_columns(self) -> None:
        """Room for the names first: in a narrow window the columns the details card also
        shows are hidden, least useful first, so that a name is not cut to a few letters."""
        header, table = self.table.header(), self.table
        for column in OPTIONAL_COLUMNS:
            header.setSectionHidden(column, False)

        def width(column: int) -> int:
            return max(table.sizeHintForColumn(column), header.sectionSizeHint(column))

        room = table.viewport().width()
        shown = [c for c in range(1, len(COLUMNS))]
        for column in OPTIONAL_COLUMNS:
            if room - sum(width(c) for c in shown) >= NAME_ROOM:
                break
            header.setSectionHidden(column, True)
            shown.remove(column)

    # -- listing ----------------------------------------------------------------------------------
    def refresh(self, entries: list[ModelEntry] | None = None) -> None:
        """List the installed models again (`entries`: a listing made off the GUI thread);
        headers not read before are read in the background."""
        selected = self.selected_entry()
        self.speech.refresh()
        self._generation += 1
        self.entries = installed_models() if entries is None else entries
        self.headers = {}
        self.table.clear()
        to_read, chosen = [], {}
        for entry in self.entries:
            key = self._cache_key(entry.path)
            if key in self._cache:
                self.headers[entry.path] = self._cache[key]
            else:
                to_read.append(entry.path)
            picked = self.chosen_projector(entry.path)
            if known_projector(entry.path, picked) is None:
                chosen[entry.path] = picked
            item = QTreeWidgetItem(self.table)
            item.setData(0, Qt.ItemDataRole.UserRole, entry.path)
            self._fill(item, entry)
        if to_read or chosen:
            # Not replaced by the next refresh: an older read still fills the cache.
            generation = self._generation
            tasks.run(_read_headers, generation, to_read, chosen, reports=True, owner=self,
                      on_progress=self._on_header,
                      on_failed=lambda exc: self._headers_failed(generation, exc))
        total = sum(e.size_bytes for e in self.entries)
        count = len(self.entries)
        self.summary.setText(f"{count} model{'s' if count != 1 else ''} · "
                             f"{describe_size(total)} · stored in {paths.models_dir()}")
        index = next((i for i, e in enumerate(self.entries)
                      if selected and e.path == selected.path), 0)
        current = self.table.topLevelItem(index) if self.entries else None
        if current is not None:
            self.table.setCurrentItem(current)
        self._show_selected()
        self.fit_columns()

    @property
    def reading(self) -> bool:
        return any(e.path not in self.headers for e in self.entries)

    @staticmethod
    def _cache_key(path: str) -> tuple[str, int, int]:
        try:
            st = os.stat(path)
        except OSError:
            return (path, -1, -1)
        return (os.path.realpath(path), st.st_size, st.st_mtime_ns)

    def set_loaded(self, path: str) -> None:
        """Mark the model loaded now ("" none)."""
        self.loaded = path
        for i, entry in enumerate(self.entries):
            item = self.table.topLevelItem(i)
            if item is not None:
                self._fill(item, entry)
        self._show_selected()

    def _source(self, entry: ModelEntry) -> str:
        if entry.source == "bundled":
            return "Bundled"
        return "Linked" if Path(entry.path).is_symlink() else "Models folder"

    def _name(self, entry: ModelEntry) -> str:
        """The name column: the loaded model marked, an embedding model said to be one."""
        mark = f"{LOADED_MARK} " if entry.path == self.loaded else ""
        return mark + entry.name + ("  ·  Embedding" if entry.embedding else "")

    def projector_of(self, entry: ModelEntry) -> str | None:
        """The projector it loads with ("" none; None: not known yet)."""
        return known_projector(entry.path, self.chosen_projector(entry.path))

    def _fill(self, item: QTreeWidgetItem, entry: ModelEntry) -> None:
        header = self.headers.get(entry.path)
        size = describe_size(entry.size_bytes)
        projector = self.projector_of(entry)
        verdict = compat.check(header) if isinstance(header, GGUFHeader) else None
        if isinstance(header, GGUFHeader):
            quant = quantization(header, entry.path) or "?"
            context = f"{header.context_length:,}" if header.context_length else "?"
            arch = header.architecture or "?"
            if verdict is not None and verdict.wont_load:
                arch += f" · {compat.WONT_LOAD}"
            values = [arch, describe_params(header.parameter_count),
                      quant, size, context, "Yes" if header.chat_template else "No"]
        elif isinstance(header, str):  # unreadable: the message is in the tooltip
            values = ["unreadable", "", parse_quant(entry.path), size, "", ""]
        else:
            values = [PENDING, PENDING, parse_quant(entry.path) or PENDING, size, PENDING, PENDING]
        vision = PENDING if projector is None else "Yes" if projector else "No"
        for column, text in enumerate([self._name(entry), *values, vision,
                                       self._source(entry)]):
            item.setText(column, text)
        if projector:
            item.setToolTip(7, plain_tip(f"Sees images, with the projector {projector}"))
        tip = entry.path if not isinstance(header, str) else f"{entry.path}\n\n{header}"
        if entry.path == self.loaded:
            tip = f"Loaded now\n{tip}"
        if entry.embedding:
            tip += f"\n\n{EMBEDDING_NOTE}"
        if verdict is not None and verdict.wont_load:
            tip += f"\n\n{verdict.summary}.\n{verdict.detail}"
            item.setToolTip(1, plain_tip(f"{verdict.summary}.\n{verdict.detail}"))
        item.setToolTip(0, plain_tip(tip))

    def _on_header(self, value: object) -> None:
        generation, path, header = cast(tuple[int, str, "GGUFHeader | str | None"], value)
        if header is not None:  # None: only its projector was looked for
            self._cache[self._cache_key(path)] = header
        if generation != self._generation:
            return
        if header is not None:
            self.headers[path] = header
        for i, entry in enumerate(self.entries):
            item = self.table.topLevelItem(i)
            if entry.path == path and item is not None:
                self._fill(item, entry)
        self._show_selected()
        self.fit_columns()

    # -- the selected model -----------------------------------------------------------------------
    def selected_entry(self) -> ModelEntry | None:
        item = self.table.currentItem() if hasattr(self, "table") else None
        if item is None:
            return None
        path = item.data(0, Qt.ItemDataRole.UserRole)
        return next((e for e in self.entries if e.path == path), None)

    def select(self, path: str) -> None:
        for i, entry in enumerate(self.entries):
            item = self.table.topLevelItem(i)
            if entry.path == path and item is not None:
                self.table.setCurrentItem(item)

    def _show_selected(self) -> None:
        entry = self.selected_entry()
        for button in (self.use_button, self.defaults_button, self.reveal_button,
                       self.quantize_button, self.delete_button):
            button.setEnabled(entry is not None)
        if entry is None:
            self.detail_name.setText("No models yet")
            self.detail_facts.setText("Import a GGUF file, or find one in Discover.")
            self.detail_path.setText("")
            return
        header = self.headers.get(entry.path)
        self.detail_name.setText(self._name(entry))
        loaded, embedding = entry.path == self.loaded, entry.embedding
        self.use_button.setEnabled(not loaded and not embedding)
        self.use_button.setText("Loaded" if loaded else "Use this model")
        self.use_button.setToolTip(EMBEDDING_NOTE if embedding else
                                   "This model is loaded now" if loaded
                                   else "Load this model for chatting")
        if isinstance(header, GGUFHeader):
            facts = [header.architecture or "unknown architecture",
                     f"{describe_params(header.parameter_count)} parameters",
                     quantization(header, entry.path) or "unknown quantization",
                     f"{header.context_length:,} tokens of context" if header.context_length
                     else "context unknown",
                     "has a chat template" if header.chat_template else "no chat template",
                     describe_size(entry.size_bytes)]
            projector = self.projector_of(entry)
            if projector:
                facts.insert(-1, f"sees images ({Path(projector).name})")
            verdict = compat.check(header)
            note = f"\n{verdict.sentence}" if verdict.wont_load else ""
            self.detail_facts.setText(" · ".join(facts) + note)
        elif isinstance(header, str):
            self.detail_facts.setText(header)
        else:
            self.detail_facts.setText("Reading the file's header…")
        where = entry.path
        if Path(entry.path).is_symlink():
            where += f"  →  {os.path.realpath(entry.path)}"
        self.detail_path.setText(where)
        removal = plan_removal(entry, paths.models_dir())
        self.delete_button.setEnabled(not removal.refusal)
        self.delete_button.setText("Remove link…" if removal.link_only else "Delete…")
        self.delete_button.setToolTip(plain_tip(removal.refusal or (
            "Remove the link; the file it points to stays" if removal.link_only
            else "Delete the file from disk")))

    def _defaults_clicked(self) -> None:
        entry = self.selected_entry()
        if entry is not None:
            self.defaults_requested.emit(entry.path)

    def use_selected(self) -> None:
        entry = self.selected_entry()
        if entry is not None and not entry.embedding:
            self.model_chosen.emit(entry.path)

    def reveal_selected(self) -> None:
        entry = self.selected_entry()
        if entry is not None and not open_folder(Path(entry.path).parent):
            self.show_notice(f"Could not open {Path(entry.path).parent}.", error=True)

    def delete_selected(self) -> None:
        entry = self.selected_entry()
        if entry is None:
            return
        removal = plan_removal(entry, paths.models_dir())
        if removal.refusal:
            self.show_notice(removal.refusal, error=True)
            return
        path = Path(entry.path)
        if removal.link_only:
            question = (f"Remove {entry.name} from the library?\n\nIt is a link to "
                        f"{os.path.realpath(path)}. Only the link is removed; the file itself "
                        "stays where it is.")
            confirm = "Remove link"
        else:
            what = (f"{path} ({describe_size(removal.size_bytes)})" if len(removal.files) < 2
                    else f"All {len(removal.files)} parts of it "
                         f"({describe_size(removal.size_bytes)})")
            question = (f"Delete {entry.name}?\n\n{what} will be removed from disk. This "
                        "cannot be undone.")
            confirm = "Delete"
        if not ask(self, "Delete a model", question, confirm):
            return
        try:
            remove(removal)
        except LibraryError as exc:
            self.show_notice(str(exc), error=True)
        else:
            self.show_notice(f"Removed the link to {entry.name}." if removal.link_only
                             else f"Deleted {entry.name}.")
        self.refresh()
        self.models_changed.emit()

    # -- import -----------------------------------------------------------------------------------
    def import_clicked(self) -> None:
        path = pick_gguf_file(self)
        if not path:
            return
        mode = ask_import_mode(self, Path(path).name)
        if mode is not None:
            self.import_file(path, mode)

    def import_file(self, path: str, mode: ImportMode) -> None:
        """Import in the background (a copy of a big model takes a while)."""
        self.importing = True
        self.import_button.setEnabled(False)
        self.show_notice(f"Importing {Path(path).name}…")
        tasks.run(import_model, Path(path), mode, paths.models_dir(), owner=self,
                  on_done=self._imported, on_failed=self._import_failed,
                  writer=True)  # writes the models folder: quitting waits for it

    def _imported(self, value: object) -> None:
        self._import_finished()
        installed, message = cast(tuple[Path, str], value)
        self.show_notice(message)
        self._list_again(str(installed))

    def _headers_failed(self, generation: int, exc: object) -> None:
        if generation == self._generation:  # a bug, not a bad file: say so per row
            for entry in self.entries:
                if entry.path not in self.headers:
                    self._on_header((generation, entry.path,
                                     f"Could not read the header: {exc}"))

    def _import_failed(self, exc: object) -> None:
        self._import_finished()
        self.show_notice(f"Could not import: {exc}", error=True)

    def _import_finished(self) -> None:
        self.importing = False
        self.import_button.setEnabled(True)

    def quantize_selected(self) -> None:
        entry = self.selected_entry()
        if entry is None:
            return
        dialog = QuantizeDialog(entry.path, self)
        dialog.made.connect(self._quantized)
        dialog.open()

    def _quantized(self, path: str) -> None:
        self.show_notice(f"{Path(path).name} was made, checked and added to the library.")
        self._list_again(path)

    def _list_again(self, select: str) -> None:
        """The folder listed off the GUI thread (globs and a stat per file: on a busy disk the
        window froze ~150 ms when a Smaller copy finished), then shown with `select` selected;
        the picker is refreshed from the same listing."""
        tasks.run(installed_models, owner=self, name="list models",
                  on_done=lambda entries: self._listed(cast(list[ModelEntry], entries), select))

    def _listed(self, entries: list[ModelEntry], select: str) -> None:
        self.refresh(entries)
        self.select(select)
        self.models_changed.emit()

    def show_notice(self, text: str, error: bool = False) -> None:
        self.notice.setText(text)
        restyle(self.notice, kind="error" if error else "info")
        self.notice.setVisible(bool(text))
