"""Load options for speed: prompt threads, speculative decoding (prompt lookup, a draft model)
and Tune, which measures this machine and keeps the fastest threads and batch size."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from inglenook.core.settings import Settings
from inglenook.core.units import describe_size
from inglenook.ui.widgets.controls import SpinBox, helper_label
from inglenook.ui.widgets.narrow import WrappingCheckBox


class SpeedOptions(QWidget):
    """Signals:
    changed(): an option changed (the window saves; it applies at the next load).
    tune_requested(): measure threads and batch size with the loaded model.
    """

    changed = Signal()
    tune_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("speedOptions")
        self.threads_batch = SpinBox(self)
        self.threads_batch.setObjectName("n_threads_batch_spin")
        self.threads_batch.setRange(0, 512)
        self.threads_batch.setSpecialValueText("All cores")
        self.threads_batch.setAlignment(Qt.AlignmentFlag.AlignRight)
        self.threads_batch.setAccessibleName("Prompt threads")
        self.threads_batch.setToolTip("Threads for reading the prompt, which uses every core "
                                      "well. All cores is usually best.")
        threads_row = QHBoxLayout()
        label = QLabel("Prompt threads", self)
        label.setToolTip(self.threads_batch.toolTip())
        threads_row.addWidget(label, 1)
        threads_row.addWidget(self.threads_batch)
        self.lookup = WrappingCheckBox("Guess ahead from the conversation (prompt lookup)", self)
        self.lookup.setObjectName("prompt_lookup_check")
        self.lookup.setToolTip(
            "Proposes the continuation of text the reply repeats (code being edited, quotes) "
            "and checks several tokens in one step: the same reply, faster. (Token for token "
            "with flash attention on; without it, on a CPU, rounding can rarely pick another "
            "near-tie word.)")
        self.draft = QLineEdit(self)
        self.draft.setObjectName("draft_model_edit")
        self.draft.setAccessibleName("Draft model")
        self.draft.setPlaceholderText("Draft model: none")
        self.draft.setToolTip("A small model with the same vocabulary that guesses ahead for "
                              "this one (speculative decoding). Same replies; faster only "
                              "when the draft is much cheaper than the model.")
        browse = QPushButton("Choose…", self)
        browse.setObjectName("draft_model_button")
        browse.setToolTip("Pick a .gguf file as the draft model")
        browse.clicked.connect(self._choose_draft)
        draft_row = QHBoxLayout()
        draft_row.addWidget(self.draft, 1)
        draft_row.addWidget(browse)
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
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(6)
        layout.addLayout(threads_row)
        layout.addWidget(self.lookup)
        layout.addLayout(draft_row)
        layout.addWidget(self.tune_button)
        layout.addWidget(self.tune_note)
        layout.addWidget(self.state_note)
        self.threads_batch.valueChanged.connect(self.changed)
        self.lookup.toggled.connect(self.changed)
        self.draft.editingFinished.connect(self.changed)

    def show_settings(self, settings: Settings) -> None:
        for widget in (self.threads_batch, self.lookup, self.draft):
            widget.blockSignals(True)
        self.threads_batch.setValue(settings.n_threads_batch)
        self.lookup.setChecked(settings.prompt_lookup)
        self.draft.setText(settings.draft_model_path)
        for widget in (self.threads_batch, self.lookup, self.draft):
            widget.blockSignals(False)

    def values(self) -> dict[str, object]:
        return {"n_threads_batch": self.threads_batch.value(),
                "prompt_lookup": self.lookup.isChecked(),
                "draft_model_path": self.draft.text().strip()}

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

    def _choose_draft(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Choose a draft model", str(Path.home()),
                                              "GGUF models (*.gguf)")
        if path:
            self.draft.setText(path)
            self.changed.emit()
