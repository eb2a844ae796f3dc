"""Presets above the side panel: pick one, save the panel's values as one, delete one."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QInputDialog,
    QLabel,
    QMessageBox,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from inglenook.store import Preset
from inglenook.ui.plain import plain_box

CUSTOM = "Custom"


class PresetBar(QWidget):
    """Signals:
    preset_chosen(object): the user picked a Preset.
    save_requested(str): save the panel's current values under this name.
    delete_requested(str): delete the preset with this name.
    """

    preset_chosen = Signal(object)
    save_requested = Signal(str)
    delete_requested = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("presetBar")
        self.combo = QComboBox(self)
        self.combo.setObjectName("preset_combo")
        # As narrow as the panel needs (long names elide), as wide as it allows.
        self.combo.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.combo.setMinimumContentsLength(4)
        self.combo.setToolTip("A named system prompt and sampling settings, kept with the chat")
        self.combo.activated.connect(self._chosen)
        self.save_button = QToolButton(self)
        self.save_button.setObjectName("preset_save_button")
        self.save_button.setText("Save…")
        self.save_button.setToolTip("Save the current system prompt and sampling as a preset")
        self.save_button.clicked.connect(self._ask_save)
        self.delete_button = QToolButton(self)
        self.delete_button.setObjectName("preset_delete_button")
        self.delete_button.setText("Delete")
        self.delete_button.setToolTip("Delete this preset (built-in presets stay)")
        self.delete_button.clicked.connect(self._ask_delete)
        title = QLabel("Preset", self)
        title.setObjectName("presetTitle")
        # The title and the buttons on one line, the presets under them at the full width:
        # side by side, the three were wider than the narrowest side panel.
        row = QHBoxLayout()
        row.setSpacing(6)
        row.addWidget(title, 1)
        row.addWidget(self.save_button)
        row.addWidget(self.delete_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(14, 12, 14, 4)
        layout.setSpacing(6)
        layout.addLayout(row)
        layout.addWidget(self.combo)
        self._presets: list[Preset] = []

    def set_presets(self, presets: Sequence[Preset], current: str | None) -> None:
        self._presets = list(presets)
        self.combo.clear()
        for preset in self._presets:
            self.combo.addItem(preset.name + ("" if preset.builtin else "  (yours)"), preset.name)
        self.combo.addItem(CUSTOM, None)
        self.show_current(current)

    def show_current(self, name: str | None) -> None:
        """Which preset the values on screen came from; None once the user changed them."""
        index = self.combo.findData(name) if name else -1
        self.combo.setCurrentIndex(index if index >= 0 else self.combo.count() - 1)
        preset = self.current()
        self.delete_button.setEnabled(preset is not None and not preset.builtin)

    def current(self) -> Preset | None:
        name = self.combo.currentData()
        return next((p for p in self._presets if p.name == name), None)

    def _chosen(self, _index: int) -> None:
        preset = self.current()
        self.delete_button.setEnabled(preset is not None and not preset.builtin)
        if preset is not None:
            self.preset_chosen.emit(preset)

    def _ask_save(self) -> None:
        current = self.current()
        label, name = "Name:", current.name if current else ""
        if current is not None and current.builtin:
            name = f"{current.name} (mine)"
        while True:
            name, ok = QInputDialog.getText(self, "Save preset", label, text=name)
            name = name.strip()
            if not ok or not name:
                return
            builtin = self.builtin_named(name)
            if builtin is None:
                break
            # A built-in keeps its values: say so, and offer a name of the user's own.
            label = (f"“{builtin.name}” is a built-in preset and keeps its settings. "
                     "Save yours under another name:")
            name = f"{builtin.name} (mine)"  # saved again: that one is updated
        self.save_requested.emit(name)

    def builtin_named(self, name: str) -> Preset | None:
        return next((p for p in self._presets
                     if p.builtin and p.name.casefold() == name.casefold()), None)

    def _ask_delete(self) -> None:
        preset = self.current()
        if preset is None or preset.builtin:
            return
        box = plain_box(QMessageBox(  # an imported chat's preset names are outside text
            QMessageBox.Icon.Question, "Delete preset", f"Delete the preset “{preset.name}”?",
            QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No, self))
        if box.exec() == QMessageBox.StandardButton.Yes:
            self.delete_requested.emit(preset.name)
