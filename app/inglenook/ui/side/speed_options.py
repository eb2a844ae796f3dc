"""Load options for speed: prompt threads, speculative decoding (prompt lookup, a draft model)
and Tune, which measures this machine and keeps the fastest threads and batch size."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QHBoxLayout, QPushButton, QVBoxLayout, QWidget

from inglenook.core.load import LOAD_SPECS
from inglenook.core.settings import Settings
from inglenook.core.units import describe_size
from inglenook.ui.widgets.controls import helper_label
from inglenook.ui.widgets.load_field import LoadField


class SpeedOptions(QWidget):
    """The load options of the "speed" group (LOAD_SPECS), Tune, and what the engine keeps.

    Signals:
        changed(): an option changed (the window saves; it applies at the next load).
        tune_requested(): measure threads and batch size with the loaded model.
    """

    changed = Signal()
    tune_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("speedOptions")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(6)
        self.fields: dict[str, LoadField] = {}
        for spec in LOAD_SPECS.values():
            if spec.group != "speed":
                continue
            field = self.fields[spec.name] = LoadField(spec, self)
            field.changed.connect(self.changed)
            if spec.kind == "int" and field.label is not None:  # label and number on one line
                row = QHBoxLayout()
                row.addWidget(field.label, 1)
                row.addWidget(field.editor)
                layout.addLayout(row)
            else:
                if field.label is not None:
                    field.label.hide()  # a path says what it is in its placeholder
                layout.addWidget(field.editor)
        self.threads_batch = self.fields["n_threads_batch"].spin  # set by Tune
        self.tune_button = QPushButton("Tune for this machine", self)
        self.tune_button.setObjectName("tune_button")
        self.tune_button.setToolTip("Measure a few thread counts and batch sizes with the loaded "
                                    "model (a few seconds) and keep the fastest")
        self.tune_button.clicked.connect(self.tune_requested)
        self.tune_note = helper_label("", name="tune_note_label")
        self.tune_note.hide()
        self.state_note = helper_label("", name="state_budget_label")
        self.state_note.setToolTip("After a reply, the engine keeps each recent chat's cache so "
                                   "switching back continues at once; the oldest go to disk, "
                                   "then are dropped. They are dropped when the model reloads.")
        self.state_note.hide()
        layout.addWidget(self.tune_button)
        layout.addWidget(self.tune_note)
        layout.addWidget(self.state_note)

    def show_settings(self, settings: Settings) -> None:
        for name, field in self.fields.items():
            field.set_value(getattr(settings, name))

    def values(self) -> dict[str, object]:
        return {name: field.value() for name, field in self.fields.items()}

    def show_tune(self, text: str, busy: bool = False) -> None:
        self.tune_button.setEnabled(not busy)
        self.tune_note.setText(text)
        self.tune_note.setVisible(bool(text))

    def show_state_budget(self, ram_bytes: int, disk_bytes: int) -> None:
        """How much the engine keeps of recent chats' caches (derived from free memory)."""
        if ram_bytes <= 0 and disk_bytes <= 0:
            self.state_note.hide()
            return
        self.state_note.setText(f"Recent chats' caches kept: up to {describe_size(ram_bytes)} "
                                f"in memory, {describe_size(disk_bytes)} on disk.")
        self.state_note.show()
