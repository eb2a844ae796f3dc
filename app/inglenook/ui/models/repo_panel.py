"""Discover's right side: one Hub repository — its GGUF files grouped by quantization, a
memory-fit label each (or "Won't load" when the bundled engine does not know the model's
architecture or tokenizer), and Download.

Opening a repository runs two requests on background threads: its file list, then (reading one
header) the fit of each file. Each carries the number of the opening it belongs to; answers to
an opening that is no longer the latest are dropped, but a header once read is kept for the
repository. Failures go to the page as `failed` (its notice, with Retry when it may help).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast
from urllib.parse import urlsplit

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFrame,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from inglenook.core.units import describe_size
from inglenook.models import compat, fit, hub
from inglenook.models.advice import (
    FIT_TEXT,
    FitReport,
    download_files,
    fit_breakdown,
    is_installed,
    is_recommended,
    plan_fits,
    vision_note,
)
from inglenook.models.catalog import CatalogEntry
from inglenook.models.filenames import UnsafeFileName, parse_quant
from inglenook.models.hub import GGUFModel, HubOffline, RepoListing
from inglenook.ui import tasks
from inglenook.ui.models.bridge import DownloadBridge
from inglenook.ui.plain import plain_label, plain_tip

OFFLINE_MESSAGE = ("You're offline — search needs the internet. The curated catalog below still "
                   "works.")
FILE_COLUMNS = ("File", "Size", "Fit", "")
QUANT_ROLE = Qt.ItemDataRole.UserRole + 1
Retry = Callable[[], None] | None


def is_unreachable(exc: object) -> bool:
    """A network failure (no connection, no DNS, no answer) rather than an answer from the Hub:
    models/hub.py reports those as retryable HubErrors without an HTTP status."""
    if isinstance(exc, (HubOffline, hub.HubTooSlow)):  # it answered, slowly: its own words
        return False
    if isinstance(exc, hub.HubError):
        return exc.status is None and exc.retryable
    return isinstance(exc, OSError)


def unreachable_message() -> str:
    """What a network failure means for the user; the errno text stays out of it."""
    host = urlsplit(hub.endpoint()).netloc or hub.endpoint()
    return (f"Can't reach {host} — you may be offline. The curated catalog below still works; "
            "Retry once you're connected.")


def failure_message(exc: object) -> str:
    if isinstance(exc, HubOffline):
        return OFFLINE_MESSAGE
    if is_unreachable(exc):
        return unreachable_message()
    if isinstance(exc, hub.HubError):
        return str(exc)
    return f"Something went wrong: {type(exc).__name__}: {exc}"


def retryable(exc: object) -> bool:
    return (isinstance(exc, hub.HubError) and exc.retryable) or is_unreachable(exc)


def chip(text: str, kind: str, parent: QWidget | None = None, name: str = "fitChip") -> QWidget:
    """A small coloured label (styled by its `kind` property), left-aligned in a table cell."""
    holder = QWidget(parent)
    label = plain_label(text, holder, name=name)
    label.setProperty("kind", kind)
    layout = QHBoxLayout(holder)
    layout.setContentsMargins(4, 2, 4, 2)
    layout.addWidget(label)
    layout.addStretch(1)
    return holder


class RepoPanel(QFrame):
    """Signals:
        downloads_added(): files were queued for download.
        failed(str, bool, object): a message for the page's notice, whether it is an error,
            and what Retry does (None: no Retry). An empty message clears the notice.
    """

    downloads_added = Signal()
    failed = Signal(str, bool, object)

    def __init__(self, bridge: DownloadBridge, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("repoPanel")
        self.bridge = bridge
        # The latest repository's listing and fit; older answers are dropped (a fit still
        # fills the header cache, see _on_fit).
        self._listing_task: tasks.Task | None = None
        self._fit_task: tasks.Task | None = None
        self.repo = ""
        self.listing: RepoListing | None = None
        self.report: FitReport | None = None
        self.fit_error = ""
        self._opened: tuple[str, str, CatalogEntry | None] = ("", "", None)
        # What a repository's header said (read once per repository): its shape and verdict.
        self._shapes: dict[str, tuple[fit.ModelShape, compat.Compatibility | None]] = {}
        self._catalog_entry: CatalogEntry | None = None
        # Plain text: repository names, descriptions and headers come from the Hub.
        self.repo_title = plain_label("", self, name="repoTitle")
        self.repo_title.setWordWrap(True)
        self.repo_meta = plain_label("", self, name="repoMeta")
        self.repo_meta.setWordWrap(True)
        self.repo_status = plain_label("", self, name="repoStatus")
        self.repo_status.setWordWrap(True)
        self.files = QTreeWidget(self)
        self.files.setObjectName("repoFiles")
        self.files.setHeaderLabels(FILE_COLUMNS)
        self.files.setRootIsDecorated(False)
        self.files.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        self.files.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.files.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        self.files.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        header = self.files.header()
        header.setStretchLastSection(False)
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.ResizeToContents)
        # A chip (wide enough for "Won't load") and a button: their own widths.
        for column, width in ((2, 112), (3, 108)):
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.Fixed)
            header.resizeSection(column, width)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(18, 16, 18, 16)
        layout.setSpacing(6)
        layout.addWidget(self.repo_title)
        layout.addWidget(self.repo_meta)
        layout.addWidget(self.repo_status)
        layout.addWidget(self.files, 1)
        self.clear("Choose a model on the left to see its files.")

    # ---- opening --------------------------------------------------------------------------

    def open_catalog_entry(self, entry: CatalogEntry) -> None:
        meta = (f"{entry.description}\n{entry.params} parameters · {entry.context:,} tokens of "
                f"context · {entry.licence} · by {entry.publisher}")
        if not hub.is_offline():
            self.open_repo(entry.repo, meta, entry)
            return
        self._forget_requests()
        self._show_recommended(entry, meta)

    def open_repo(self, repo: str, meta: str = "", entry: CatalogEntry | None = None) -> None:
        if hub.is_offline():
            self.failed.emit(OFFLINE_MESSAGE, False, None)
            return
        self._forget_requests()
        self._opened = (repo, meta, entry)  # what Retry opens again
        self.repo, self._catalog_entry = repo, entry
        self.listing, self.report, self.fit_error = None, None, ""
        self.clear("Listing the repository's files…", entry.name if entry else repo, meta)
        self._listing_task = tasks.run(hub.list_gguf_files, repo, on_done=self._on_listed,
                                       on_failed=lambda exc: self._on_failed("files", exc),
                                       owner=self)

    def _forget_requests(self) -> None:
        if self._listing_task is not None:
            self._listing_task.cancel()
        self._listing_task = self._fit_task = None  # a fit still running fills the cache

    @property
    def working(self) -> bool:
        """A listing or fit is running whose answer is still wanted."""
        return any(t is not None and t.running for t in (self._listing_task, self._fit_task))

    def reopen(self) -> None:
        self.open_repo(*self._opened)

    def _show_recommended(self, entry: CatalogEntry, meta: str) -> None:
        """A catalog entry without the Hub: the files the catalog recommends, none offered."""
        self.clear("You're offline. These are the recommended files; connect to the internet "
                   "to see all of them, check the fit and download.", entry.name, meta)
        self.repo, self._catalog_entry = entry.repo, entry
        self.files.setVisible(True)
        for i, name in enumerate(entry.recommended):
            item = self._item(self.files.invisibleRootItem(), parse_quant(name), name, i == 0)
            item.setText(1, "—")
            self.files.setItemWidget(item, 2, chip("offline", "unknown"))
            self.files.setItemWidget(item, 3, self._download_button(None, "Offline"))

    def _show_listing(self, listing: RepoListing) -> None:
        self.listing = listing
        if not listing.models:
            self.repo_status.setText("This repository has no GGUF files.")
            return
        self._render_files()
        self.repo_status.setText(self._with_vision(
            "Reading the model's header to estimate its memory needs…"))
        shape, verdict = self._shapes.get(listing.repo, (None, None))
        # The callbacks name their own task (bound by the time they run, on this thread).
        task = tasks.run(plan_fits, listing.repo, listing, shape, verdict, owner=self,
                         on_done=lambda report: self._on_fit(task, report),
                         on_failed=lambda exc: self._on_fit_failed(task, exc))
        self._fit_task = task

    def _show_fits(self, report: FitReport) -> None:
        self.report = report
        where = "free RAM" if not report.memory.gpu_offload else "free RAM and GPU memory"
        status = (f"Memory estimates for {report.n_ctx:,} tokens of context (f16 KV cache) "
                  f"against {describe_size(report.memory.ram_free)} of {where}.")
        if report.verdict is not None and report.verdict.wont_load:
            status = f"{report.verdict.summary}. {report.verdict.detail}"
        self.repo_status.setText(self._with_vision(status))
        self._render_files()

    def _with_vision(self, status: str) -> str:
        note = vision_note(self.listing) if self.listing is not None else ""
        return f"{status}\n{note}" if note else status

    # ---- the files ------------------------------------------------------------------------

    def _render_files(self) -> None:
        assert self.listing is not None
        self.files.clear()
        self.files.setVisible(True)
        root = self.files.invisibleRootItem()
        groups = self.listing.by_quant()
        for quant, models in groups.items():
            if len(models) == 1:
                self._file_row(root, quant, models[0])
                continue
            group = QTreeWidgetItem(self.files)
            group.setText(0, f"{quant or 'Other'} · {len(models)} files")
            font = group.font(0)
            font.setBold(True)
            group.setFont(0, font)
            group.setFirstColumnSpanned(True)
            for model in models:
                self._file_row(group, quant, model)
            group.setExpanded(True)
        self.files.setRootIsDecorated(any(len(m) > 1 for m in groups.values()))

    def _item(self, parent: QTreeWidgetItem, quant: str, name: str,
              star: bool) -> QTreeWidgetItem:
        """A file row: the quantization (★ when recommended) over the file name."""
        item = QTreeWidgetItem(parent)
        head = quant or "?"
        item.setText(0, f"{head}  ★ recommended\n{name}" if star else f"{head}\n{name}")
        item.setData(0, Qt.ItemDataRole.UserRole, name)
        item.setData(0, QUANT_ROLE, quant)
        return item

    def _file_row(self, parent: QTreeWidgetItem, quant: str, model: GGUFModel) -> None:
        star = is_recommended(model, self.report, self._catalog_entry)
        parts = f"  ({len(model.parts)} parts)" if model.is_split else ""
        item = self._item(parent, quant or model.quant, model.name + parts, star)
        item.setData(0, Qt.ItemDataRole.UserRole, model.name)
        assert self.listing is not None
        files = download_files(self.listing, model)
        tip = "\n".join(p.path for p in files)
        if star:
            tip += ("\n\nRecommended by the curated catalog" if self._catalog_entry
                    else "\n\nRecommended for this computer")
        item.setToolTip(0, plain_tip(tip))
        item.setText(1, describe_size(model.size))
        self.files.setItemWidget(item, 2, self._fit_chip(model))
        if not model.complete:
            button = self._download_button(None, "Incomplete")
            button.setToolTip("Some parts of this split model are missing from the repository.")
        elif is_installed(self.repo, files):
            button = self._download_button(None, "Installed")
        else:
            button = self._download_button(model, "Download")
        self.files.setItemWidget(item, 3, button)

    def refresh_installed(self) -> None:
        """Show files downloaded since the list was drawn as installed."""
        if self.listing is not None and self.listing.models:
            self._render_files()

    def _fit_chip(self, model: GGUFModel) -> QWidget:
        verdict = self.report.verdict if self.report is not None else None
        if verdict is not None and verdict.wont_load:
            widget = chip("Won't load", "wont")
            widget.setToolTip(plain_tip(f"{verdict.summary}.\n{verdict.detail}"))
            return widget
        if self.report is not None and model.name in self.report.plans:
            plan = self.report.plans[model.name]
            kind = {"fits": "fits", "tight": "tight"}.get(plan.label, "wont")
            widget = chip(FIT_TEXT[plan.label], kind)
            widget.setToolTip(plain_tip(fit_breakdown(plan)))
            return widget
        if self.fit_error:
            widget = chip("unknown", "unknown")
            widget.setToolTip(plain_tip(self.fit_error))
            return widget
        return chip("checking…", "pending")

    def _download_button(self, model: GGUFModel | None, text: str) -> QPushButton:
        button = QPushButton(text)
        button.setObjectName("downloadFileButton")
        button.setEnabled(model is not None)
        if model is not None:
            button.clicked.connect(lambda: self.download(model, button))
        return button

    def download(self, model: GGUFModel, button: QPushButton | None = None) -> None:
        files = download_files(self.listing, model) if self.listing is not None else model.parts
        try:
            for part in files:
                if not is_installed(self.repo, (part,)):  # a projector shared by every model
                    self.bridge.add(self.repo, part.path)
        except UnsafeFileName as exc:
            self.failed.emit(str(exc), True, None)
            return
        if button is not None:
            button.setText("Queued")
            button.setEnabled(False)
        self.downloads_added.emit()

    def file_rows(self) -> list[tuple[str, str, str, str]]:
        """(quantization, file, size, fit) of each file row, in order (tests)."""
        rows = []

        def walk(item: QTreeWidgetItem) -> None:
            for i in range(item.childCount()):
                child = item.child(i)
                if child is None:
                    continue
                if child.childCount():
                    walk(child)
                    continue
                holder = self.files.itemWidget(child, 2)
                label = holder.findChild(QLabel) if holder is not None else None
                rows.append((child.data(0, QUANT_ROLE), child.data(0, Qt.ItemDataRole.UserRole),
                             child.text(1), label.text() if label is not None else ""))

        walk(self.files.invisibleRootItem())
        return rows

    def model_named(self, name: str) -> GGUFModel | None:
        if self.listing is None:
            return None
        return next((m for m in self.listing.models if m.name == name), None)

    def clear(self, status: str, title: str = "", meta: str = "") -> None:
        self.files.clear()
        self.files.setVisible(False)
        self.repo_title.setText(title)
        self.repo_title.setVisible(bool(title))
        self.repo_meta.setText(meta)
        self.repo_meta.setVisible(bool(meta))
        self.repo_status.setText(status)

    # ---- background answers ---------------------------------------------------------------

    def _on_listed(self, value: object) -> None:
        self.failed.emit("", False, None)  # the Hub answered: a failure shown is over
        self._show_listing(cast(RepoListing, value))

    def _on_fit(self, task: tasks.Task, value: object) -> None:
        report = cast(FitReport, value)
        self._shapes[report.repo] = (report.shape, report.verdict)  # kept if moved on
        if task is self._fit_task:
            self._show_fits(report)

    def _on_fit_failed(self, task: tasks.Task, exc: object) -> None:
        if task is self._fit_task:
            self._on_failed("fit", exc)

    def _on_failed(self, kind: str, exc: object) -> None:
        message, unreachable = failure_message(exc), is_unreachable(exc)
        reopen: Retry = self.reopen if retryable(exc) else None
        if kind == "files":
            if unreachable and self._catalog_entry is not None:
                self._show_recommended(self._catalog_entry, self._opened[1])
                self.failed.emit(message, False, reopen)
            elif unreachable:
                self.repo_status.setText("The files cannot be listed while the Hub is out of "
                                         "reach.")
                self.failed.emit(message, False, reopen)
            else:
                self.repo_status.setText(message if isinstance(exc, HubOffline) else
                                         f"Could not list the files: {message}")
                if reopen is not None:
                    self.failed.emit(f"Could not list the files: {message}", True, reopen)
        elif kind == "fit":
            self.fit_error = ("The memory needs cannot be estimated while the Hub is out of "
                              "reach." if unreachable else
                              f"Could not estimate the memory needs: {exc}")
            self.repo_status.setText(self.fit_error)
            self._render_files()
            if unreachable:
                self.failed.emit(message, False, self.reopen)
