"""The model chooser in the top bar: installed models plus "Open a GGUF file…"."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QComboBox, QWidget

from inglenook.models.library import describe_size, installed_models

OPEN_ITEM = "open"


class ModelPicker(QComboBox):
    """Lists the installed models, fresh each time it opens (files may have been added).

    Signals:
        model_chosen(str): the user picked a model other than the current one; its path.
        open_requested(): the user picked "Open a GGUF file…".
    """

    model_chosen = Signal(str)
    open_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("modelPicker")
        self.setMinimumWidth(340)
        self.setToolTip("The model to chat with")
        self._current = ""
        self.activated.connect(self._on_activated)

    def refresh(self, select: str = "") -> None:
        self.blockSignals(True)
        self.clear()
        for entry in installed_models():
            label = f"{entry.name}  ·  {describe_size(entry.size_bytes)}"
            if entry.source == "bundled":
                label += "  ·  bundled"
            self.addItem(label, entry.path)
            self.setItemData(self.count() - 1, entry.path, Qt.ItemDataRole.ToolTipRole)
        self.addItem("Open a GGUF file…", OPEN_ITEM)
        self.blockSignals(False)
        self.select(select or self._current)

    def select(self, path: str) -> None:
        """Show `path` as the current model, adding it if it lives outside the models folder."""
        self._current = path
        index = self.findData(path) if path else 0
        if index < 0:
            self.insertItem(self.count() - 1, Path(path).stem, path)
            index = self.findData(path)
        self.setCurrentIndex(max(index, 0))

    def path(self) -> str:
        data = self.currentData()
        return data if isinstance(data, str) and data != OPEN_ITEM else ""

    def showPopup(self) -> None:
        self.refresh()
        super().showPopup()

    def _on_activated(self, index: int) -> None:
        data = self.itemData(index)
        if data == OPEN_ITEM:
            self.select(self._current)  # until a file is actually chosen
            self.open_requested.emit()
        elif data and data != self._current:
            self.model_chosen.emit(data)
