"""The Models dialog: Library (installed models), Discover (the Hub and the curated catalog) and
Downloads (the queue), behind a navigation list on the left.

The downloads themselves belong to a DownloadBridge that lives with the main window, so they go
on while this dialog is closed; the dialog only shows and steers them.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QShowEvent
from PySide6.QtWidgets import (
    QDialog,
    QFrame,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from inglenook.models.download_queue import DownloadStatus
from inglenook.ui.app_settings import AppSettings
from inglenook.ui.models.bridge import DownloadBridge
from inglenook.ui.models.discover import DiscoverPage
from inglenook.ui.models.downloads import DownloadsPage
from inglenook.ui.models.library import LibraryPage
from inglenook.ui.widgets.window_size import fit_in_window

PAGES = ("library", "discover", "downloads")
_TITLES = {"library": "Library", "discover": "Discover", "downloads": "Downloads"}


class ModelsDialog(QDialog):
    """Non-modal: open it with show(). Keep one instance and show it again; it refreshes the
    library and picks up interrupted downloads each time it is shown.

    Signals:
        model_chosen(str): the user chose a model to chat with; its path. The dialog closes.
        models_changed(): the installed models changed (a download completed, an import or a
            deletion): the model picker should list them again.
        defaults_requested(str): edit the load defaults of the model at this path.
    """

    model_chosen = Signal(str)
    models_changed = Signal()
    defaults_requested = Signal(str)

    def __init__(self, bridge: DownloadBridge, parent: QWidget | None = None,
                 chosen_projector: Callable[[str], str] | None = None,
                 app_settings: AppSettings | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("modelsDialog")
        self.setWindowTitle("Models")
        self.setModal(False)
        self.bridge = bridge
        bridge.adopt_partials()  # first, so that the Downloads page starts with them
        self.library = LibraryPage(self, chosen_projector)
        self.library.speech.bind(app_settings)  # its choices are settings
        self.discover = DiscoverPage(bridge, self)
        self.downloads = DownloadsPage(bridge, self)
        self._build()
        fit_in_window(self, 1040, 680)
        self.library.model_chosen.connect(self._choose)
        self.library.defaults_requested.connect(self.defaults_requested)
        self.library.models_changed.connect(self._models_changed)
        self.discover.downloads_added.connect(lambda: self.show_page("downloads"))
        self.downloads.active_changed.connect(self._update_nav)
        bridge.completed.connect(self._on_completed)
        self._shown_before = False

    def _build(self) -> None:
        nav_panel = QFrame(self)
        nav_panel.setObjectName("modelsNavPanel")
        title = QLabel("Models", nav_panel)
        title.setObjectName("modelsNavTitle")
        self.nav = QListWidget(nav_panel)
        self.nav.setObjectName("modelsNav")
        self.nav.setAccessibleName("Model pages")
        self.nav.setToolTip("Library, Discover and Downloads")
        self.nav.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        for name in PAGES:
            item = QListWidgetItem(_TITLES[name], self.nav)
            item.setData(Qt.ItemDataRole.UserRole, name)
        nav_layout = QVBoxLayout(nav_panel)
        nav_layout.setContentsMargins(12, 18, 12, 12)
        nav_layout.setSpacing(10)
        nav_layout.addWidget(title)
        nav_layout.addWidget(self.nav, 1)
        nav_panel.setFixedWidth(170)

        self.stack = QStackedWidget(self)
        self.stack.setObjectName("modelsStack")
        for page in (self.library, self.discover, self.downloads):
            self.stack.addWidget(page)
        self.nav.currentRowChanged.connect(self.stack.setCurrentIndex)
        self.nav.setCurrentRow(0)

        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(nav_panel)
        layout.addWidget(self.stack, 1)
        self._update_nav(self.downloads.active())

    def show_page(self, name: str) -> None:
        self.nav.setCurrentRow(PAGES.index(name))

    def current_page(self) -> str:
        return PAGES[self.stack.currentIndex()]

    def showEvent(self, event: QShowEvent) -> None:
        if self._shown_before:  # files may have come and gone while it was closed
            self.library.refresh()
            self.bridge.adopt_partials()
        self._shown_before = True
        super().showEvent(event)

    def _choose(self, path: str) -> None:
        self.model_chosen.emit(path)
        self.close()

    def _models_changed(self) -> None:
        self.discover.repo_panel.refresh_installed()
        self.discover.speech_panel.refresh_installed()
        self.models_changed.emit()

    def _on_completed(self, _status: DownloadStatus) -> None:
        self.library.refresh()
        self._models_changed()

    def _update_nav(self, active: int) -> None:
        item = self.nav.item(PAGES.index("downloads"))
        item.setText(f"Downloads  ·  {active}" if active else "Downloads")
