"""The Models dialog's Discover page: search the Hub for GGUF repositories (the curated
catalog while the search box is empty; it works offline), and open one in the panel beside
(repo_panel.py: its files, their fit, Download).

A search runs on a background thread and carries a request number; answers to a search that is
no longer the latest are dropped. In offline mode (HF_HUB_OFFLINE) nothing is started at all;
when the Hub cannot be reached, the page says so in plain words, keeps (or brings back) the
catalog, and offers Retry.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import cast

from PySide6.QtCore import QEvent, QObject, QSize, Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from inglenook.core.units import describe_size
from inglenook.models import hub
from inglenook.models.catalog import CatalogEntry, CatalogError, load_catalog
from inglenook.models.hub import HubOffline, RepoSummary
from inglenook.speech.downloads import SPEECH_MODELS
from inglenook.ui import tasks, theme
from inglenook.ui.models.bridge import DownloadBridge
from inglenook.ui.models.page import notice_label, page_header
from inglenook.ui.models.repo_panel import (
    OFFLINE_MESSAGE,
    RepoPanel,
    failure_message,
    is_unreachable,
    retryable,
)
from inglenook.ui.models.speech_panel import SpeechPanel
from inglenook.ui.widgets.style import restyle

EMBEDDING_HEADING = "Embedding models, for Knowledge"  # one line: the list does not wrap it
EMBEDDING_TIP = ("For Chat → Knowledge…: they find your documents' passages by meaning. They "
                 "do not chat.")
SPEECH_HEADING = "Speech models and voices"
SPEECH_TIP = ("Whisper models write down what you say (Dictate, Voice conversation); Piper voices "
              "read replies aloud. They work offline once downloaded.")
SORTS = (("Most downloaded", "downloads"), ("Most liked", "likes"), ("Recently updated", "recent"))


class DiscoverPage(QWidget):
    """Signals:
        downloads_added(): files were queued for download.
    """

    downloads_added = Signal()

    def __init__(self, bridge: DownloadBridge, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("discoverPage")
        self.bridge = bridge
        self._search: tasks.Task | None = None  # the latest search; older answers are dropped
        self.busy = False
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

        self.repo_panel = panel = RepoPanel(self.bridge, self)
        panel.downloads_added.connect(self.downloads_added)
        panel.failed.connect(self._panel_failed)
        self.speech_panel = SpeechPanel(self.bridge, self)  # in the panel's place for one
        self.speech_panel.downloads_added.connect(self.downloads_added)
        self.speech_panel.hide()

        body = QHBoxLayout()
        body.setSpacing(14)
        body.addWidget(self.results)
        body.addWidget(panel, 1)
        body.addWidget(self.speech_panel, 1)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(24, 20, 24, 20)
        layout.setSpacing(10)
        layout.addLayout(head)
        layout.addSpacing(4)
        layout.addLayout(bar)
        layout.addLayout(notice_row)
        layout.addLayout(body, 1)

    # -- the list on the left ---------------------------------------------------------------------
    def show_catalog(self) -> None:
        if self._search is not None:
            self._search.cancel()  # a search still running is no longer wanted
        self._set_busy(False)
        self.results.clear()
        self._heading("Curated catalog")
        if self.catalog_error:
            self._heading(self.catalog_error)
        chat = [e for e in self.catalog if not e.is_embedding]
        embedding = [e for e in self.catalog if e.is_embedding]
        for entry in chat:
            self._add_entry(entry)
        if embedding:
            self._heading(EMBEDDING_HEADING, EMBEDDING_TIP)
        for entry in embedding:
            self._add_entry(entry)
        self._heading(SPEECH_HEADING, SPEECH_TIP)
        muted = theme.current().colors.text_muted
        for speech in SPEECH_MODELS:
            kind = "speech to text" if speech.kind == "whisper" else "voice"
            self._add_result(("speech", speech),
                             f"<b>{html.escape(speech.title)}</b>"
                             f" <span style='color:{muted}'>{kind} · "
                             f"{describe_size(speech.size)}</span>"
                             f"<br>{html.escape(speech.description)}")

    def _add_entry(self, entry: CatalogEntry) -> None:
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
        self._set_busy(True)
        self.results.clear()
        self._heading(f"Searching for “{text}”…")
        self._search = tasks.run(hub.search_models, text, sort=self.sort.currentData(),
                                 on_done=self._on_done, on_failed=self._on_failed, owner=self,
                                 replaces=self._search)

    @property
    def working(self) -> bool:
        """A search is running whose answer is still wanted."""
        return self._search is not None and self._search.running

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
            if repo.vision:
                facts += " · reads images"
            self._add_result(("repo", repo),
                             f"<b>{html.escape(repo.id.split('/', 1)[-1])}</b>"
                             f" <span style='color:{muted}'>by {html.escape(repo.author)}</span>"
                             f"<br><span style='color:{muted}'>{facts}</span>{gated}")

    def _heading(self, text: str, tip: str = "") -> None:
        item = QListWidgetItem(text, self.results)
        item.setToolTip(tip)
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
        """The repositories (or catalog repositories) listed, in order (not speech models)."""
        ids = []
        for i in range(self.results.count()):
            data = self.results.item(i).data(Qt.ItemDataRole.UserRole)
            if data and data[0] != "speech":
                ids.append(data[1].id if data[0] == "repo" else data[1].repo)
        return ids

    def speech_row(self, name: str) -> int:
        """The list's row of the speech model installed as `name`; -1 when not listed."""
        for i in range(self.results.count()):
            data = self.results.item(i).data(Qt.ItemDataRole.UserRole)
            if data and data[0] == "speech" and data[1].name == name:
                return i
        return -1

    def _on_selection(self) -> None:
        selected = self.results.selectedItems()
        data = selected[0].data(Qt.ItemDataRole.UserRole) if selected else None
        if not data:
            return
        speech = data[0] == "speech"
        self.repo_panel.setVisible(not speech)
        self.speech_panel.setVisible(speech)
        if speech:
            self.speech_panel.open(data[1])
        elif data[0] == "catalog":
            self.repo_panel.open_catalog_entry(data[1])
        else:
            repo: RepoSummary = data[1]
            self.open_repo(repo.id, f"by {repo.author} · {repo.downloads:,} downloads · "
                                    f"{repo.likes:,} likes")

    def open_repo(self, repo: str, meta: str = "", entry: CatalogEntry | None = None) -> None:
        self.speech_panel.hide()
        self.repo_panel.show()
        self.repo_panel.open_repo(repo, meta, entry)

    def _query_edited(self, text: str) -> None:
        if not text.strip():
            self.show_catalog()

    def _sort_changed(self, _index: int) -> None:
        if self.query.text().strip():
            self.search()

    # -- background answers -----------------------------------------------------------------------
    def _on_done(self, value: object) -> None:
        if self._retry is not None:
            self.show_notice("")  # the Hub answered: the failure shown is over
        self._set_busy(False)
        self._show_results(self.query.text().strip(), cast(list[RepoSummary], value))

    def _on_failed(self, exc: object) -> None:
        self._set_busy(False)
        self.show_catalog()  # whatever went wrong, the catalog comes back under the message
        message = failure_message(exc)
        if isinstance(exc, HubOffline) or is_unreachable(exc):
            self.show_notice(message, retry=self.search if is_unreachable(exc) else None)
        else:
            self.show_notice(f"Search failed. {message}", error=True,
                             retry=self.search if retryable(exc) else None)

    def _panel_failed(self, message: str, error: bool, retry: object) -> None:
        if message or self._retry is not None:  # "": the panel's request went through
            self.show_notice(message, error, cast(Callable[[], None] | None, retry))

    def retry(self) -> None:
        """Run again what failed (the notice's Retry button)."""
        again = self._retry
        self.show_notice("")
        if again is not None:
            again()

    # -- small things -----------------------------------------------------------------------------
    def _set_busy(self, busy: bool) -> None:
        self.busy = busy
        self.search_button.setEnabled(not busy)

    def show_notice(self, text: str, error: bool = False,
                    retry: Callable[[], None] | None = None) -> None:
        """A message above the lists (none when text is empty), with Retry when given one."""
        self._retry = retry if text else None
        self.retry_button.setVisible(self._retry is not None)
        self.notice.setText(text)
        restyle(self.notice, kind="error" if error else "info")
        self.notice.setVisible(bool(text))
