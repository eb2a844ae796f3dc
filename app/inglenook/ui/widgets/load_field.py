"""The editor of one load option, built from its LoadSpec (core/load.py LOAD_SPECS): the side
panel's Model loading section and the per-model defaults dialog both show options through it,
so a range, a label or the spelling of "automatic" cannot differ between them."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QWidget,
)

from inglenook.core.load import LoadSpec
from inglenook.ui.widgets.controls import ComboBox, SpinBox
from inglenook.ui.widgets.narrow import WrappingCheckBox

ON_OFF = ("On", "Off")


class LoadField(QObject):
    """A spin box, a combo box, a check box or a path with "Choose…", for one option.

    `editor` is what goes into a layout (for a path: the line and its button); `label` is
    None for a check box, whose text is its label. Object names are `{prefix}{name}_spin`,
    `_combo`, `_check` or `_edit` (and `_label`, `_button`).

    Signals:
        changed(): the user changed the value (set_value() emits nothing).
    """

    changed = Signal()

    def __init__(self, spec: LoadSpec, parent: QWidget, prefix: str = "", *,
                 switch_as_choice: bool = False) -> None:
        """`switch_as_choice`: an on/off option as a combo box (On, Off) with a label, for a
        form whose labels are check boxes of their own (the defaults dialog)."""
        super().__init__(parent)
        self.spec = spec
        name = prefix + spec.name
        self.label: QLabel | None = None
        self._spin: SpinBox | None = None
        self._combo: ComboBox | None = None
        self._check: WrappingCheckBox | None = None
        self._line: QLineEdit | None = None
        self.editor: QWidget
        self._switch = spec.kind == "bool" and switch_as_choice
        if spec.kind == "bool" and not self._switch:
            self._check = WrappingCheckBox(spec.label, parent)  # long labels wrap
            self._check.setObjectName(f"{name}_check")
            self._check.toggled.connect(self.changed)
            self.editor = self._check
            self._focus: QWidget = self._check
        else:
            self.label = QLabel(spec.label, parent)
            self.label.setObjectName(f"{name}_label")
        if spec.kind == "int":
            self._spin = SpinBox(parent)
            self._spin.setObjectName(f"{name}_spin")
            self._spin.setRange(int(spec.minimum), int(spec.maximum))
            self._spin.setSingleStep(int(spec.step))
            self._spin.setSpecialValueText(spec.special_value_text)
            self._spin.setAlignment(Qt.AlignmentFlag.AlignRight)
            self._spin.valueChanged.connect(self.changed)
            self.editor = self._focus = self._spin
        elif spec.kind == "choice" or self._switch:
            self._combo = ComboBox(parent)
            self._combo.setObjectName(f"{name}_combo")
            self._combo.addItems(ON_OFF if self._switch else spec.choices)
            self._combo.currentTextChanged.connect(self.changed)
            self.editor = self._focus = self._combo
        elif spec.kind == "path":
            self.editor = QWidget(parent)
            self._line = QLineEdit(self.editor)
            self._line.setObjectName(f"{name}_edit")
            self._line.setPlaceholderText(f"{spec.label}: none")
            self._line.editingFinished.connect(self.changed)
            browse = QPushButton("Choose…", self.editor)
            browse.setObjectName(f"{name}_button")
            browse.setToolTip("Pick a .gguf file")
            browse.clicked.connect(self._choose)
            row = QHBoxLayout(self.editor)
            row.setContentsMargins(0, 0, 0, 0)
            row.addWidget(self._line, 1)
            row.addWidget(browse)
            self._focus = self._line
        self._focus.setAccessibleName(spec.label)
        if self.label is not None:
            self.label.setBuddy(self._focus)
        self.set_tooltip(spec.tooltip)

    @property
    def spin(self) -> QSpinBox:
        """The spin box of a number option."""
        assert self._spin is not None, f"{self.spec.name} is not a number"
        return self._spin

    def value(self) -> object:
        if self._spin is not None:
            return self._spin.value()
        if self._combo is not None:
            return self._combo.currentText() == ON_OFF[0] if self._switch else (
                self._combo.currentText())
        if self._check is not None:
            return self._check.isChecked()
        assert self._line is not None
        return self._line.text().strip()

    def set_value(self, value: object) -> None:
        """Show `value`; emits nothing."""
        self.blockSignals(True)
        try:
            if self._spin is not None and isinstance(value, int):
                self._spin.setValue(value)
            elif self._combo is not None and self._switch and isinstance(value, bool):
                self._combo.setCurrentText(ON_OFF[0] if value else ON_OFF[1])
            elif self._combo is not None and isinstance(value, str):
                self._combo.setCurrentText(value)
            elif self._check is not None and isinstance(value, bool):
                self._check.setChecked(value)
            elif self._line is not None and isinstance(value, str):
                self._line.setText(value)
        finally:
            self.blockSignals(False)

    def set_special_text(self, text: str) -> None:
        """Say what "automatic" chose (e.g. "All physical cores (8)")."""
        if self._spin is not None:
            self._spin.setSpecialValueText(text or self.spec.special_value_text)

    def widgets(self) -> list[QWidget]:
        return [w for w in (self.label, self.editor) if w is not None]

    def set_tooltip(self, text: str) -> None:
        for w in self.widgets():
            w.setToolTip(text)
        self._focus.setToolTip(text)

    def set_enabled(self, enabled: bool) -> None:
        for w in self.widgets():
            w.setEnabled(enabled)

    def _choose(self) -> None:
        assert self._line is not None
        path, _ = QFileDialog.getOpenFileName(self.editor, f"Choose a {self.spec.label.lower()}",
                                              str(Path.home()), "GGUF models (*.gguf)")
        if path:
            self._line.setText(path)
            self.changed.emit()
