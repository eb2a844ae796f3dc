"""Make a smaller copy of a model (llama.cpp's own quantizer, in an engine process of its own):
choose a type, see the size and the disk space, follow the progress, cancel. The copy is
checked (read, loaded, asked a question) before it is placed in the library."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from inglenook.core.units import describe_size
from inglenook.engine.quantize import (
    Plan,
    Progress,
    QuantizeCancelled,
    QuantizeError,
    Quantizer,
    plan,
    read_headers,
)
from inglenook.models.gguf import GGUFHeader
from inglenook.ui import tasks
from inglenook.ui.plain import plain_label
from inglenook.ui.widgets.content_height import fit_to_content

CHOICES = ("Q4_K_M", "Q5_K_M", "Q6_K", "Q8_0", "Q4_0", "Q3_K_M", "IQ4_XS")


class QuantizeDialog(QDialog):
    """Signals:
    made(str): the path of the checked copy, now in the models folder.
    """

    made = Signal(str)

    def __init__(self, source: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("quantizeDialog")
        self.setWindowTitle("Make a smaller copy")
        self.source = Path(source)
        self.type = QComboBox(self)
        self.type.setObjectName("quantizeType")
        self.type.setToolTip("Q4_K_M: the usual balance. Q5_K_M, Q6_K, Q8_0: closer to the "
                             "original, bigger. Q3/IQ4: smaller, less exact.")
        self.type.addItems(CHOICES)
        self.type.currentTextChanged.connect(self._plan)
        self.note = plain_label("", self, name="quantizeNote")  # errors quote file names
        self.note.setWordWrap(True)
        self.progress = QProgressBar(self)
        self.progress.setObjectName("quantizeProgress")
        self.progress.setRange(0, 1000)
        self.progress.hide()
        self.start_button = QPushButton("Make the copy", self)
        self.start_button.setObjectName("quantizeStartButton")
        self.start_button.setToolTip("Start; the original stays as it is")
        self.start_button.clicked.connect(self.start)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Cancel, self)
        self.buttons.addButton(self.start_button, QDialogButtonBox.ButtonRole.ActionRole)
        self.buttons.rejected.connect(self.reject)
        form = QFormLayout()
        form.addRow("Model", plain_label(self.source.name, self))
        form.addRow("Type", self.type)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(self.note)
        layout.addWidget(self.progress)
        layout.addWidget(self.buttons)
        self._quantizer: Quantizer | None = None
        self._plan_now: Plan | None = None
        self._headers: list[GGUFHeader] | None = None
        self._plan()
        smaller = self._smaller_kinds()
        if smaller and self.type.currentText() not in smaller:
            self.type.setCurrentText(smaller[0])  # opens on a type it will make, not refuse
        self._height = fit_to_content(self, 480)

    def _plan(self) -> None:
        try:
            if self._headers is None:  # read once: a choice of type only redoes the sums
                self._headers = read_headers(self.source)
            self._plan_now = plan(self.source, self.type.currentText(),
                                  allow_requantize=True, headers=self._headers)
        except QuantizeError as exc:
            self._plan_now = None
            self.note.setText(str(exc))
            self.start_button.setEnabled(False)
            return
        made = self._plan_now
        if not made.smaller:  # said before starting, and not started
            others = self._smaller_choices()
            self.note.setText(made.not_smaller() + (
                f" Smaller: {', '.join(others)}." if others else
                " None of the types offered makes this model smaller."))
            self.start_button.setEnabled(False)
            return
        twice = (" It is made from an already quantized file, so it loses a little more "
                 "quality than one made from F16." if made.requantize else "")
        self.note.setText(f"The copy will be {made.output.name}, about "
                          f"{describe_size(made.estimate_bytes)} (now "
                          f"{describe_size(made.source_bytes)}; "
                          f"{describe_size(made.free_bytes)} free).{twice}")
        self.start_button.setEnabled(True)

    def _smaller_choices(self) -> list[str]:
        """The offered types whose copy of this model is smaller, with their sizes."""
        return [f"{kind} ({describe_size(size)})" for kind, size in self._smaller().items()]

    def _smaller_kinds(self) -> list[str]:
        return list(self._smaller()) if self._headers is not None else []

    def _smaller(self) -> dict[str, int]:
        """Type -> estimated size, for the offered types that make this model smaller."""
        found = {}
        for kind in CHOICES:
            try:
                other = plan(self.source, kind, allow_requantize=True, headers=self._headers)
            except QuantizeError:
                continue
            if other.smaller:
                found[kind] = other.estimate_bytes
        return found

    @property
    def running(self) -> bool:
        return self._quantizer is not None

    def start(self) -> None:
        if self._plan_now is None or self.running:
            return
        self._quantizer = Quantizer(self._plan_now)
        self.type.setEnabled(False)
        self.start_button.setEnabled(False)
        self.progress.setValue(0)
        self.progress.show()
        self.note.setText("Quantizing…")
        tasks.run(self._quantizer.run, reports=True, on_progress=self._on_progress,
                  on_done=self._on_done, on_failed=self._on_failed, owner=self,
                  writer=True, name="quantize")  # writes the copy: quitting waits for it

    def reject(self) -> None:
        """Cancel stops a running copy (nothing is kept) before closing."""
        if self._quantizer is not None:
            self._quantizer.cancel()
            self.note.setText("Cancelling…")
            return  # closes once the quantizer has stopped
        super().reject()

    def _on_progress(self, value: object) -> None:
        if not isinstance(value, Progress):
            return
        self.progress.setValue(int(value.fraction * 1000))
        eta = f", about {value.eta_s:.0f} s left" if value.eta_s is not None else ""
        self.note.setText({"checking": "Checking the copy: reading, loading, a short reply…",
                           "done": "Done."}.get(
            value.stage, f"Quantizing: {value.tensors_done} of {value.tensors_total} tensors, "
                         f"{describe_size(value.written_bytes)} written{eta}"))

    def _on_done(self, value: object) -> None:
        self._quantizer = None
        self.made.emit(str(value))
        self.accept()

    def _on_failed(self, exc: object) -> None:
        self._quantizer = None
        if isinstance(exc, QuantizeCancelled):
            super().reject()
            return
        self.progress.hide()
        self.type.setEnabled(True)
        self.start_button.setEnabled(True)
        self.note.setText(f"No copy was made: {exc}")
