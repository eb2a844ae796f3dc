"""Load options for speed: prompt threads, speculative decoding (prompt lookup, a draft model)
and Tune, which measures this machine and offers the fastest threads and batch size: its
progress, the figures before and after, Keep or Don't keep, and after Keep a way back. Then
what the engine keeps of recent chats: "Keep chats ready: up to N GB on disk" (across
restarts) and Forget cached states."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from inglenook.core.load import LOAD_SPECS, LoadOptions
from inglenook.core.settings import MAX_KEEP_CHATS_GB
from inglenook.core.units import describe_size
from inglenook.ui.widgets.controls import helper_label
from inglenook.ui.widgets.load_field import LoadField

TUNE_TIP = ("Measure a few thread counts and batch sizes with the loaded model (about ten "
            "seconds, longer on a busy machine), then choose whether to keep the fastest")


class SpeedOptions(QWidget):
    """The load options of the "speed" group (LOAD_SPECS), Tune, and what the engine keeps.

    Signals:
        changed(): an option changed (the window saves; it applies at the next load).
        tune_requested(): measure threads and batch size with the loaded model (or, while
            it measures, stop).
        tune_kept(): keep what Tune found. tune_dismissed(): do not.
        tune_restore_requested(): back to the settings from before the tune kept.
        forget_requested(): forget every chat's KV state kept, in memory and on disk.
    """

    changed = Signal()
    tune_requested = Signal()
    tune_kept = Signal()
    tune_dismissed = Signal()
    tune_restore_requested = Signal()
    forget_requested = Signal()

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
        self.tune_button.setToolTip(TUNE_TIP)
        self.tune_button.clicked.connect(self.tune_requested)
        self.tune_note = helper_label("", name="tune_note_label")
        self.tune_note.hide()
        self.tune_progress = QProgressBar(self)
        self.tune_progress.setObjectName("tune_progress")
        self.tune_progress.setTextVisible(False)
        self.tune_progress.setMaximumHeight(6)
        self.tune_progress.hide()
        self.keep_button = QPushButton("Keep", self)
        self.keep_button.setObjectName("tune_keep_button")
        self.keep_button.setToolTip("Use these settings: the model is loaded again with them")
        self.keep_button.clicked.connect(self.tune_kept)
        self.dismiss_button = QPushButton("Don't keep", self)
        self.dismiss_button.setObjectName("tune_dismiss_button")
        self.dismiss_button.setToolTip("Leave the settings as they were")
        self.dismiss_button.clicked.connect(self.tune_dismissed)
        self.restore_button = QPushButton("Restore previous", self)
        self.restore_button.setObjectName("tune_restore_button")
        self.restore_button.clicked.connect(self.tune_restore_requested)
        answers = QHBoxLayout()
        answers.setContentsMargins(0, 0, 0, 0)
        for button in (self.keep_button, self.dismiss_button, self.restore_button):
            button.hide()
            answers.addWidget(button)
        answers.addStretch(1)
        self.state_note = helper_label("", name="state_budget_label")
        self.state_note.setToolTip("After a reply, the engine keeps each recent chat's cache so "
                                   "switching back continues at once; the oldest go to disk, "
                                   "then are dropped.")
        self.state_note.hide()
        self.keep_chats = QSpinBox(self)
        self.keep_chats.setObjectName("keep_chats_spin")
        self.keep_chats.setRange(0, MAX_KEEP_CHATS_GB)
        self.keep_chats.setSuffix(" GB on disk")
        self.keep_chats.setSpecialValueText("Off")
        self.keep_chats.setAccessibleName("Keep chats ready on disk, in GB")
        self.keep_chats.setToolTip(
            "Disk the engine may use to keep chats ready across restarts: a chat reopened "
            "after quitting, unloading or a crash continues without reading it all again. "
            "The least recently used go first. Applies at the next load.")
        self.keep_chats.valueChanged.connect(lambda _v: self.changed.emit())
        keep = QVBoxLayout()  # label above the box: side by side they widened the panel
        keep.setContentsMargins(0, 0, 0, 0)
        keep.setSpacing(2)
        keep_label = QLabel("Keep chats ready: up to", self)
        keep_label.setBuddy(self.keep_chats)
        keep.addWidget(keep_label)
        keep.addWidget(self.keep_chats)
        self.forget_button = QPushButton("Forget cached states", self)
        self.forget_button.setObjectName("forget_states_button")
        self.forget_button.setToolTip("Delete every chat's kept cache, in memory and on disk, "
                                      "for all models; chats then read their text again")
        self.forget_button.clicked.connect(self.forget_requested)
        layout.addWidget(self.tune_button)
        layout.addWidget(self.tune_progress)
        layout.addWidget(self.tune_note)
        layout.addLayout(answers)
        layout.addWidget(self.state_note)
        layout.addLayout(keep)
        layout.addWidget(self.forget_button)

    def show_options(self, options: LoadOptions) -> None:
        for name, field in self.fields.items():
            field.set_value(getattr(options, name))

    def show_keep_chats(self, gigabytes: int) -> None:
        """Emits nothing."""
        self.keep_chats.blockSignals(True)
        self.keep_chats.setValue(gigabytes)
        self.keep_chats.blockSignals(False)

    def keep_chats_gb(self) -> int:
        return self.keep_chats.value()

    def values(self) -> dict[str, object]:
        return {name: field.value() for name, field in self.fields.items()}

    def show_tune(self, text: str, busy: bool = False) -> None:
        """A tune's state in words; `busy`: the button stops it."""
        self.tune_button.setText("Stop tuning" if busy else "Tune for this machine")
        self.tune_button.setToolTip("Stop measuring; nothing changes" if busy else TUNE_TIP)
        self.tune_progress.setVisible(busy)
        if not busy:
            self.tune_progress.setRange(0, 0)
        self.tune_note.setText(text)
        self.tune_note.setVisible(bool(text))
        for button in (self.keep_button, self.dismiss_button, self.restore_button):
            button.hide()

    def show_tune_progress(self, done: int, total: int, text: str) -> None:
        self.tune_progress.setRange(0, max(total, 1))
        self.tune_progress.setValue(done)
        self.tune_note.setText(text)

    def offer_tuned(self, text: str) -> None:
        """What Tune found, before and after, with Keep and Don't keep."""
        self.show_tune(text)
        self.keep_button.show()
        self.dismiss_button.show()

    def offer_restore(self, text: str, previous: str) -> None:
        """Tune's settings kept: the way back to `previous` (a description)."""
        self.show_tune(text)
        self.restore_button.setText(f"Restore previous ({previous})")
        self.restore_button.setToolTip("Load the model again with the settings from before "
                                       "the tune")
        self.restore_button.show()

    def show_state_budget(self, ram_bytes: int, disk_bytes: int) -> None:
        """How much the engine keeps of recent chats' caches (derived from free memory)."""
        if ram_bytes <= 0 and disk_bytes <= 0:
            self.state_note.hide()
            return
        self.state_note.setText(f"Recent chats' caches kept: up to {describe_size(ram_bytes)} "
                                f"in memory, {describe_size(disk_bytes)} on disk (all "
                                "models).")
        self.state_note.show()
