"""Help: the Shortcuts sheet and About (versions of Inglenook, Qt and llama.cpp)."""

from __future__ import annotations

import importlib.metadata
import platform
from collections.abc import Sequence

from PySide6 import __version__ as pyside_version
from PySide6.QtCore import Qt, qVersion
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QLabel,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from inglenook import __version__


def _version(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def versions(gpu_offload: bool | None) -> list[tuple[str, str]]:
    """What About shows; the engine's build is known once an engine has started."""
    build = ("unknown until a model loads" if gpu_offload is None else
             "GPU offload (CUDA, Metal or Vulkan)" if gpu_offload else "CPU only")
    return [("Inglenook", __version__),
            ("Qt", f"{qVersion()} (PySide6 {pyside_version})"),
            ("llama.cpp", f"llama-cpp-python {_version('llama-cpp-python')}, {build}"),
            ("Python", f"{platform.python_version()} on {platform.system()} "
                       f"{platform.machine()}")]


class ShortcutsDialog(QDialog):
    def __init__(self, rows: Sequence[tuple[str, str, str]], parent: QWidget | None = None
                 ) -> None:
        super().__init__(parent)
        self.setObjectName("shortcutsDialog")
        self.setWindowTitle("Keyboard shortcuts")
        self.resize(660, 600)
        self.table = QTableWidget(len(rows), 3, self)
        self.table.setObjectName("shortcutsTable")
        self.table.setHorizontalHeaderLabels(["Menu", "Command", "Keys"])
        self.table.verticalHeader().hide()
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QTableWidget.SelectionBehavior.SelectRows)
        for row, values in enumerate(rows):
            for column, value in enumerate(values):
                self.table.setItem(row, column, QTableWidgetItem(value))
        self.table.resizeColumnsToContents()
        self.table.horizontalHeader().setStretchLastSection(True)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(self.table, 1)
        layout.addWidget(buttons)


class AboutDialog(QDialog):
    def __init__(self, gpu_offload: bool | None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("aboutDialog")
        self.setWindowTitle("About Inglenook")
        title = QLabel("Inglenook", self)
        title.setObjectName("aboutTitle")
        blurb = QLabel("A native desktop chat for running language models on your own "
                       "machine, privately. Nothing leaves it unless you ask for a download.",
                       self)
        blurb.setWordWrap(True)
        self.rows = versions(gpu_offload)
        table = QLabel("<table>" + "".join(
            f"<tr><td><b>{name}</b>&nbsp;&nbsp;</td><td>{value}</td></tr>"
            for name, value in self.rows) + "</table>", self)
        table.setObjectName("aboutVersions")
        table.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.setSpacing(10)
        for widget in (title, blurb, table, buttons):
            layout.addWidget(widget)
