"""The Models dialog's Discover page: search the Hub for GGUF repositories, open one to see its
files grouped by quantization with a memory-fit label each (or "Won't load" when the bundled
engine does not know the model's architecture or tokenizer), and queue downloads. The curated
catalog is shown while the search box is empty, and works offline.

Every Hub request runs on a background thread; each carries a request number, and answers to a
request that is no longer the latest are dropped. In offline mode (HF_HUB_OFFLINE) nothing is
started at all; when the Hub cannot be reached, the page says so in plain words, keeps (or
brings back) the catalog, and offers Retry.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import cast
from urllib.parse import urlsplit

from PySide6.QtCore import QEvent, QObject, QSize, Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QFrame,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
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
    fit_breakdown,
    is_installed,
    is_recommended,
    plan_fits,
)
from inglenook.models.catalog import CatalogEntry, CatalogError, load_catalog
from inglenook.models.filenames import UnsafeFileName, parse_quant
from inglenook.models.hub import GGUFModel, HubOffline, RepoListing, RepoSummary
from inglenook.ui import theme
from inglenook.ui.models.bridge import BackgroundTasks, DownloadBridge
from inglenook.ui.models.page import notice_label, page_header
from inglenook.ui.plain import plain_label, plain_tip

OFFLINE_MESSAGE = ("You're offline — search needs the internet. The curated catalog below still "
                   "works.")
SORTS = (("Most downloaded", "downloads"), ("Most liked", "likes"), ("Recently updated", "recent"))
FILE_COLUMNS = ("File", "Size", "Fit", "")
QUANT_ROLE = Qt.ItemDataRole.UserRole + 1


def is_unreachable(exc: object) -> bool:
    """A network failure (no connection, no DNS, no answer) rather than an answer from the Hub:
    models/hub.py reports those as retryable HubErrors without an HTTP status."""
    if isinstance(exc, HubOffline):
        return False
    if isinstance(exc, hub.HubError):
        return exc.status is None and exc.retryable
    return isinstance(exc, OSError)


def unreachable_message() -> str:
    """What a network failure means for the user; the errno text stays out of it."""
    host = urlsplit(hub.endpoint()).netloc or hub.endpoint()
    return (f"Can't reach {host} — you may be offline. The curated catalog below still works; "
            "Retry once you're connected.")


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


class DiscoverPage(QWidget):
    """Signals:
        downloads_added(): files were queued for download.
    """

    downloads_added = Signal()

    def __init__(self, bridge: DownloadBridge, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("discoverPage")
        self.bridge = bridge
        self.tasks = BackgroundTasks(self)
        self.tasks.done.connect(self._on_done)
        self.tasks.failed.connect(self._on_failed)
        self._request = 0  # the latest search
        self._open_request = 0  # the latest repository opened
        self.busy = False
        self.repo = ""
        self.listing: RepoListing | None = None
        self.report: FitReport | None = None
        self.fit_error = ""
        self._opened: tuple[str, str, CatalogEntry | None] = ("", "", None)
        # What a repository's header said (read once per repository): its shape and verdict.
        self._shapes: dict[str, tuple[fit.ModelShape, compat.Compatibility | None]] = {}
        self._catalog_entry: CatalogEntry | None = None
        try:
            self.catalog, self.catalog_error = load_catalog(), ""
        except CatalogError as exc:
            self.catalog, self.catalog_error = [], str(exc)
        self._build()
        self.show_catalog()

    def _build(self) -> None:
        head = page_header(self, "Discover", QLabel(
            "Search Hugging Face for GGUF models, or start from the curated catalog.", self))
        self.query = QLineEdit(self)
        self.query.setObjectName("hubQuery")
        self.query.setAccessibleName("Search the Hub")
        self.query.setToolTip("Words in a model repository's name; Enter searches")
        self.query.setPlaceholderText("Search models, e.g. qwen, llama, phi…")
        self.query.setClearButtonEnabled(True)
        self.query.returnPressed.connect(self.search)
        self.query.textChanged.connect(self._query_edited)
        self.sort = QComboBox(self)
        self.sort.setObjectName("hubSort")
        self.sort.setToolTip("How search results are ordered")
        for label, value in SORTS:
            self.sort.addItem(label, value)
        self.sort.currentIndexChanged.connect(self._sort_changed)
        self.search_button = QPushButton("Search", self)
        self.search_button.setObjectName("hubSearchButton")
        self.search_button.setToolTip("Search the Hugging Face Hub for GGUF models")
        self.search_button.clicked.connect(self.search)
        bar = QHBoxLayout()
        bar.addWidget(self.query, 1)
        bar.addWidget(self.sort)
        bar.addWidget(self.search_button)

        self.notice = notice_label(self)
        self.retry_button = QPushButton("Retry", self)
        self.retry_button.setObjectName("discoverRetry")
        self.retry_button.hide()
        self.retry_button.clicked.connect(self.retry)
        self._retry: Callable[[], None] | None = None
        notice_row = QHBoxLayout()
        notice_row.addWidget(self.notice, 1)
        notice_row.addWidget(self.retry_button, 0, Qt.AlignmentFlag.AlignVCenter)

        self.results = QListWidget(self)
        self.results.setObjectName("discoverResults")
        self.results.setAccessibleName("Models found")
        self.results.setToolTip("Pick a repository to see its files")
        self.results.setVerticalScrollMode(QAbstractItemView.ScrollMode.ScrollPerPixel)
        self.results.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.results.setFixedWidth(290)
        self.results.viewport().installEventFilter(self)
        # Opened when selected (a click, the arrow keys), not merely made current: the list
        # makes its first row current when it gets focus (as when a search disables its
        # button), which must not open that model on the Hub unasked.
        self.results.itemSelectionChanged.connect(self._on_selection)

        panel = QFrame(self)
        panel.setObjectName("repoPanel")
        # Plain text: repository names, descriptions and headers come from the Hub.
        self.repo_title = plain_label("", panel, name="repoTitle")
        self.repo_title.setWordWrap(True)
        self.repo_meta = plain_label("", panel, name="repoMeta")
        self.repo_meta.setWordWrap(True)
        self.repo_status = plain_label("", panel, name="repoStatus")
        self.repo_status.setWordWrap(True)
        self.files = QTreeWidget(panel)
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
        panel_layout = QVBoxLayout(panel)
        panel_layout.setContentsMargins(18, 16, 18, 16)
        panel_layout.setSpacing(6)
        panel_layout.addWidget(self.repo_title)
        panel_layout.addWidget(self.repo_meta)
        panel_layout.addWidget(self.repo_status)
        panel_layout.addWidget(self.files, 1)

        body = QHBoxLayout()
        body.setSpacing(14)
        body.addWidget(self.results)
        body.addWidget(panel, 1)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(24, 20, 24, 20)
        layout.setSpacing(10)
        layout.addLayout(head)
        layout.addSpacing(4)
        layout.addLayout(bar)
        layout.addLayout(notice_row)
        layout.addLayout(body, 1)
        self._clear_panel("Choose a model on the left to see its files.")

    # -- the list on the left ---------------------------------------------------------------------
    def show_catalog(self) -> None:
        self._request += 1  # a search still running is no longer wanted
        self._set_busy(False)
        self.results.clear()
        self._heading("Curated catalog")
        if self.catalog_error:
            self._heading(self.catalog_error)
        for entry in self.catalog:
            facts = f"{entry.params} · {entry.context:,} tokens · {entry.licence}"
            muted = theme.current().colors.text_muted
            self._add_result(("catalog", entry),
                             f"<b>{html.escape(entry.name)}</b>"
                             f" <span style='color:{muted}'>by {html.escape(entry.publisher)}"
                             f"</span><br><span style='color:{muted}'>{html.escape(facts)}</span>"
                             f"<br>{html.escape(entry.description)}")

    def search(self) -> None:
        text = self.query.text().strip()
        if not text:
            self.show_catalog()
            return
        if hub.is_offline():  # refuse before any thread or connection
            self.show_notice(OFFLINE_MESSAGE)
            self.show_catalog()
            return
        self.show_notice("")
        self._request += 1
        self._set_busy(True)
        self.results.clear()
        self._heading(f"Searching for “{text}”…")
        self.tasks.start(("search", self._request), hub.search_models, text,
                         sort=self.sort.currentData())

    def _show_results(self, text: str, found: list[RepoSummary]) -> None:
        self.results.clear()
        if not found:
            self._heading(f"No GGUF models match “{text}”.")
            return
        self._heading(f"{len(found)} GGUF repositor{'ies' if len(found) != 1 else 'y'} · "
                      f"{self.sort.currentText().lower()}")
        for repo in found:
            facts = f"↓ {repo.downloads:,} · ♥ {repo.likes:,}"
            if repo.last_modified is not None:
                facts += f" · updated {repo.last_modified:%d %b %Y}"
            muted, danger = theme.current().colors.text_muted, theme.current().colors.danger_text
            gated = f" · <span style='color:{danger}'>gated</span>" if repo.gated else ""
            self._add_result(("repo", repo),
                             f"<b>{html.escape(repo.id.split('/', 1)[-1])}</b>"
                             f" <span style='color:{muted}'>by {html.escape(repo.author)}</span>"
                             f"<br><span style='color:{muted}'>{facts}</span>{gated}")

    def _heading(self, text: str) -> None:
        item = QListWidgetItem(text, self.results)
        item.setFlags(Qt.ItemFlag.NoItemFlags)
        item.setData(Qt.ItemDataRole.UserRole, None)

    def _add_result(self, data: tuple[str, object], rich: str) -> None:
        item = QListWidgetItem(self.results)
        item.setData(Qt.ItemDataRole.UserRole, data)
        label = QLabel(rich)
        label.setObjectName("discoverResult")
        label.setTextFormat(Qt.TextFormat.RichText)
        label.setWordWrap(True)
        label.setContentsMargins(10, 8, 10, 8)
        label.setAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents)
        self.results.setItemWidget(item, label)
        self._fit_height(item, label)

    def _fit_height(self, item: QListWidgetItem, label: QLabel) -> None:
        width = self.results.viewport().width()
        item.setSizeHint(QSize(width, label.heightForWidth(width) + 2))

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self.results.viewport() and event.type() == QEvent.Type.Resize:
            for i in range(self.results.count()):  # word-wrapped labels: height follows width
                item = self.results.item(i)
                label = self.results.itemWidget(item)
                if isinstance(label, QLabel):
                    self._fit_height(item, label)
        return super().eventFilter(watched, event)

    def result_ids(self) -> list[str]:
        """The repositories (or catalog repositories) listed, in order."""
        ids = []
        for i in range(self.results.count()):
            data = self.results.item(i).data(Qt.ItemDataRole.UserRole)
            if data:
                ids.append(data[1].id if data[0] == "repo" else data[1].repo)
        return ids

    def _on_selection(self) -> None:
        selected = self.results.selectedItems()
        data = selected[0].data(Qt.ItemDataRole.UserRole) if selected else None
        if not data:
            return
        if data[0] == "catalog":
            self.open_catalog_entry(data[1])
        else:
            repo: RepoSummary = data[1]
            self.open_repo(repo.id, f"by {repo.author} · {repo.downloads:,} downloads · "
                                    f"{repo.likes:,} likes")

    # -- a repository -----------------------------------------------------------------------------
    def open_catalog_entry(self, entry: CatalogEntry) -> None:
        meta = (f"{entry.description}\n{entry.params} parameters · {entry.context:,} tokens of "
                f"context · {entry.licence} · by {entry.publisher}")
        if not hub.is_offline():
            self.open_repo(entry.repo, meta, entry)
            return
        self._open_request += 1
        self._show_recommended(entry, meta)

    def _show_recommended(self, entry: CatalogEntry, meta: str) -> None:
        """A catalog entry without the Hub: the files the catalog recommends, none offered."""
        self._clear_panel("You're offline. These are the recommended files; connect to the "
                          "internet to see all of them, check the fit and download.",
                          entry.name, meta)
        self.repo, self._catalog_entry = entry.repo, entry
        self.files.setVisible(True)
        for i, name in enumerate(entry.recommended):
            item = self._item(self.files.invisibleRootItem(), parse_quant(name), name, i == 0)
            item.setText(1, "—")
            self.files.setItemWidget(item, 2, chip("offline", "unknown"))
            self.files.setItemWidget(item, 3, self._download_button(None, "Offline"))

    def open_repo(self, repo: str, meta: str = "", entry: CatalogEntry | None = None) -> None:
        if hub.is_offline():
            self.show_notice(OFFLINE_MESSAGE)
            return
        self._open_request += 1
        self._opened = (repo, meta, entry)  # what Retry opens again
        self.repo, self._catalog_entry = repo, entry
        self.listing, self.report, self.fit_error = None, None, ""
        self._clear_panel("Listing the repository's files…", entry.name if entry else repo, meta)
        self.tasks.start(("files", self._open_request), hub.list_gguf_files, repo)

    def _show_listing(self, listing: RepoListing) -> None:
        self.listing = listing
        if not listing.models:
            self.repo_status.setText("This repository has no GGUF files.")
            return
        self._render_files()
        self.repo_status.setText("Reading the model's header to estimate its memory needs…")
        shape, verdict = self._shapes.get(listing.repo, (None, None))
        self.tasks.start(("fit", self._open_request), plan_fits, listing.repo, listing, shape,
                         verdict)

    def _show_fits(self, report: FitReport) -> None:
        self.report = report
        where = "free RAM" if not report.memory.gpu_offload else "free RAM and GPU memory"
        status = (f"Memory estimates for {report.n_ctx:,} tokens of context (f16 KV cache) "
                  f"against {report.memory.ram_free / 1e9:.1f} GB of {where}.")
        if report.verdict is not None and report.verdict.wont_load:
            status = f"{report.verdict.summary}. {report.verdict.detail}"
        self.repo_status.setText(status)
        self._render_files()

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
        tip = "\n".join(p.path for p in model.parts)
        if star:
            tip += ("\n\nRecommended by the curated catalog" if self._catalog_entry
                    else "\n\nRecommended for this computer")
        item.setToolTip(0, plain_tip(tip))
        item.setText(1, describe_size(model.size))
        self.files.setItemWidget(item, 2, self._fit_chip(model))
        if not model.complete:
            button = self._download_button(None, "Incomplete")
            button.setToolTip("Some parts of this split model are missing from the repository.")
        elif is_installed(model):
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
        try:
            for part in model.parts:
                self.bridge.add(self.repo, part.path)
        except UnsafeFileName as exc:
            self.show_notice(str(exc), error=True)
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

    def _query_edited(self, text: str) -> None:
        if not text.strip():
            self.show_catalog()

    def _sort_changed(self, _index: int) -> None:
        if self.query.text().strip():
            self.search()

    # -- background answers -----------------------------------------------------------------------
    def _on_done(self, key: object, value: object) -> None:
        kind, number = cast(tuple[str, int], key)
        if kind in ("search", "files") and self._retry is not None:
            self.show_notice("")  # the Hub answered: the failure shown is over
        if kind == "search" and number == self._request:
            self._set_busy(False)
            self._show_results(self.query.text().strip(), value)  # type: ignore[arg-type]
        elif kind == "files" and number == self._open_request:
            self._show_listing(value)  # type: ignore[arg-type]
        elif kind == "fit":
            report: FitReport = value  # type: ignore[assignment]
            # Kept even if the user moved on.
            self._shapes[report.repo] = (report.shape, report.verdict)
            if number == self._open_request:
                self._show_fits(report)

    def _on_failed(self, key: object, exc: object) -> None:
        kind, number = cast(tuple[str, int], key)
        unreachable = is_unreachable(exc)
        if isinstance(exc, HubOffline):
            message = OFFLINE_MESSAGE
        elif unreachable:
            message = unreachable_message()
        elif isinstance(exc, hub.HubError):
            message = str(exc)
        else:
            message = f"Something went wrong: {type(exc).__name__}: {exc}"
        retryable = (isinstance(exc, hub.HubError) and exc.retryable) or unreachable
        if kind == "search" and number == self._request:
            self._set_busy(False)
            # Whatever went wrong, the catalog comes back under the message.
            self.show_catalog()
            if isinstance(exc, HubOffline) or unreachable:
                self.show_notice(message, retry=self.search if unreachable else None)
            else:
                self.show_notice(f"Search failed. {message}", error=True,
                                 retry=self.search if retryable else None)
        elif kind == "files" and number == self._open_request:
            reopen = self._reopen if retryable else None
            if unreachable and self._catalog_entry is not None:
                self._show_recommended(self._catalog_entry, self._opened[1])
                self.show_notice(message, retry=reopen)
            elif unreachable:
                self.repo_status.setText("The files cannot be listed while the Hub is out of "
                                         "reach.")
                self.show_notice(message, retry=reopen)
            else:
                self.repo_status.setText(message if isinstance(exc, HubOffline) else
                                         f"Could not list the files: {message}")
                if reopen is not None:
                    self.show_notice(f"Could not list the files: {message}", error=True,
                                     retry=reopen)
        elif kind == "fit" and number == self._open_request:
            self.fit_error = ("The memory needs cannot be estimated while the Hub is out of "
                              "reach." if unreachable else
                              f"Could not estimate the memory needs: {exc}")
            self.repo_status.setText(self.fit_error)
            self._render_files()
            if unreachable:
                self.show_notice(message, retry=self._reopen)

    def _reopen(self) -> None:
        self.open_repo(*self._opened)

    def retry(self) -> None:
        """Run again what failed (the notice's Retry button)."""
        again = self._retry
        self.show_notice("")
        if again is not None:
            again()

    # -- small things -----------------------------------------------------------------------------
    def _clear_panel(self, status: str, title: str = "", meta: str = "") -> None:
        self.files.clear()
        self.files.setVisible(False)
        self.repo_title.setText(title)
        self.repo_title.setVisible(bool(title))
        self.repo_meta.setText(meta)
        self.repo_meta.setVisible(bool(meta))
        self.repo_status.setText(status)

    def _set_busy(self, busy: bool) -> None:
        self.busy = busy
        self.search_button.setEnabled(not busy)

    def show_notice(self, text: str, error: bool = False,
                    retry: Callable[[], None] | None = None) -> None:
        """A message above the lists (none when text is empty), with Retry when given one."""
        self._retry = retry if text else None
        self.retry_button.setVisible(self._retry is not None)
        self.notice.setText(text)
        self.notice.setProperty("kind", "error" if error else "info")
        self.notice.style().unpolish(self.notice)
        self.notice.style().polish(self.notice)
        self.notice.setVisible(bool(text))
