"""Help: the Shortcuts sheet and About (versions of Inglenook, Qt and llama.cpp)."""

from __future__ import annotations

import html
import importlib.metadata
import platform
from collections.abc import Sequence

from PySide6 import __version__ as pyside_version
from PySide6.QtCore import Qt, qVersion
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QHeaderView,
    QLabel,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from inglenook import __version__
from inglenook.ui.plain import plain_label


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
        # The keys whole, always; the command's words wrap in what is left.
        header = self.table.horizontalHeader()
        fit, stretch = QHeaderView.ResizeMode.ResizeToContents, QHeaderView.ResizeMode.Stretch
        for column, mode in enumerate((fit, stretch, fit)):
            header.setSectionResizeMode(column, mode)
        self.table.setWordWrap(True)
        self.table.verticalHeader().setSectionResizeMode(fit)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(self.table, 1)
        layout.addWidget(buttons)


ABOUT = (
    "A native desktop chat for running language models on your own machine. Your "
    "conversations and models stay on it. Only these reach beyond it, each when you turn it "
    "on:\n"
    "• Model downloads and Hub search (Models → Discover): requests to the Hugging Face Hub.\n"
    "• Remote engines you add: your chat goes to the engine whose model you choose.\n"
    "• Tool servers you add (MCP): HTTP servers receive the tool calls you approve; local ones "
    "run as programs on this machine.\n"
    "• The local API server (Models → Local API server): while it is on, other programs can "
    "use the loaded model; on this computer only unless you choose other addresses and a "
    "token.\n"
    "Nothing else: no telemetry, no update checks, no crash reports.")


class AboutDialog(QDialog):
    def __init__(self, gpu_offload: bool | None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("aboutDialog")
        self.setWindowTitle("About Inglenook")
        title = QLabel("Inglenook", self)
        title.setObjectName("aboutTitle")
        blurb = plain_label(ABOUT, self, name="aboutBlurb")
        blurb.setWordWrap(True)
        self.rows = versions(gpu_offload)
        table = QLabel("<table>" + "".join(
            f"<tr><td><b>{name}</b>&nbsp;&nbsp;</td><td>{html.escape(value)}</td></tr>"
            for name, value in self.rows) + "</table>", self)
        table.setObjectName("aboutVersions")
        table.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.setSpacing(10)
        for widget in (title, blurb, table, buttons):
            layout.addWidget(widget)
