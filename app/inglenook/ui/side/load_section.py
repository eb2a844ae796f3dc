"""The side panel's "Model loading" section: every load option of LOAD_SPECS (core/load.py), the
hints about what the engine can do, and the rule that a quantized KV cache needs flash attention."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QFormLayout, QPushButton, QVBoxLayout, QWidget

from inglenook.core.load import LOAD_SPECS, LoadOptions
from inglenook.ui.plain import plain_tip
from inglenook.ui.side.speed_options import SpeedOptions
from inglenook.ui.widgets.controls import CollapsibleSection, helper_label
from inglenook.ui.widgets.load_field import LoadField

KV_NOTE_QUANTIZED = "Quantized KV cache needs flash attention."
KV_NOTE_RESET = "KV cache set back to f16: a quantized cache needs flash attention."


class LoadSection(CollapsibleSection):
    """Numbers and choices in a form, switches under it, then the speed options and Reload.

    show_options() emits nothing; everything the user does emits.

    Signals:
        changed(): a load option changed (it applies at the next load).
        reload_requested(): the user pressed "Reload model".
    """

    changed = Signal()
    reload_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Model loading", "loadSection", parent)
        layout = QVBoxLayout(self.body)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(8)
        layout.addWidget(helper_label("These apply when the model is next loaded.",
                                      name="load_hint_label"))
        self.fields: dict[str, LoadField] = {}
        self._build_form(layout)
        self._build_switches(layout)
        self.speed = SpeedOptions(self.body)
        self.speed.changed.connect(self.changed)
        self.fields.update(self.speed.fields)
        layout.addWidget(self.speed)
        self.reload_button = QPushButton("Reload model")
        self.reload_button.setObjectName("reload_button")
        self.reload_button.setToolTip("Load the current model again with these options.")
        self.reload_button.clicked.connect(self.reload_requested)
        layout.addSpacing(4)
        layout.addWidget(self.reload_button)

    def _build_form(self, layout: QVBoxLayout) -> None:
        """The numbers and choices: label and box on a line, or the box under its label."""
        form = QFormLayout()
        form.setContentsMargins(0, 0, 0, 0)
        form.setHorizontalSpacing(8)
        form.setVerticalSpacing(6)
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        form.setRowWrapPolicy(QFormLayout.RowWrapPolicy.WrapLongRows)
        form.setLabelAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter)
        form.setFormAlignment(Qt.AlignmentFlag.AlignLeft)
        layout.addLayout(form)
        for spec in LOAD_SPECS.values():
            if spec.group != "load" or spec.kind == "bool":
                continue
            field = self._add(LoadField(spec, self.body))
            assert field.label is not None  # only a switch has none
            form.addRow(field.label, field.editor)
            if spec.name == "n_gpu_layers":  # why it is off, on a CPU-only build
                self.gpu_unsupported_label = helper_label("", name="gpu_unsupported_label")
                self.gpu_unsupported_label.hide()
                form.addRow(self.gpu_unsupported_label)
        self.fields["kv_cache_type"].changed.disconnect(self.changed)
        self.fields["kv_cache_type"].changed.connect(self._on_kv_changed)

    def _build_switches(self, layout: QVBoxLayout) -> None:
        for spec in LOAD_SPECS.values():
            if spec.group == "load" and spec.kind == "bool":
                layout.addWidget(self._add(LoadField(spec, self.body)).editor)
                if spec.name == "flash_attn":  # the KV cache's rule, said under the switch
                    self.kv_note_label = helper_label("", name="kv_note_label")
                    self.kv_note_label.hide()
                    layout.addWidget(self.kv_note_label)
        self.fields["flash_attn"].changed.disconnect(self.changed)
        self.fields["flash_attn"].changed.connect(self._on_flash_attn_toggled)
        self.fields["kv_per_reply"].changed.connect(self._show_pool)

    def _add(self, field: LoadField) -> LoadField:
        self.fields[field.spec.name] = field
        field.changed.connect(self.changed)
        return field

    # -- values ---------------------------------------------------------------------------

    def show_options(self, options: LoadOptions) -> None:
        """Show these load options; emits nothing."""
        for name, field in self.fields.items():
            field.set_value(getattr(options, name))
        if self._kv_quantized():  # stored by hand or an older version: keep it loadable
            self.fields["flash_attn"].set_value(True)
        self._show_kv_note(KV_NOTE_QUANTIZED if self._kv_quantized() else "")
        self._show_pool()

    def values(self) -> dict[str, object]:
        """The load options shown, by LoadOptions name."""
        return {name: field.value() for name, field in self.fields.items()}

    def set_value(self, name: str, value: object) -> None:
        """Set one option as if the user had (a fix offered when a load was refused)."""
        self.fields[name].set_value(value)
        self.changed.emit()

    # -- what the engine says -------------------------------------------------------------

    def set_gpu_offload_supported(self, supported: bool, reason: str = "") -> None:
        """Disable the GPU layers row, saying why, when the engine cannot offload."""
        field = self.fields["n_gpu_layers"]
        field.set_enabled(supported)
        field.set_tooltip(plain_tip(field.spec.tooltip if supported else reason))  # its words
        self.gpu_unsupported_label.setText(reason)
        self.gpu_unsupported_label.setVisible(not supported and bool(reason))

    def set_physical_cores(self, n: int) -> None:
        field = self.fields["n_threads"]
        field.set_special_text(f"{field.spec.special_value_text} ({n})" if n > 0 else "")

    def show_slots_in_use(self, n_slots: int) -> None:
        """What "Automatic" chose for the model loaded now."""
        field = self.fields["n_slots"]
        field.set_special_text(f"{field.spec.special_value_text} ({n_slots})" if n_slots else "")

    def _show_pool(self) -> None:
        """The pool's size means nothing with a KV cache per reply."""
        self.fields["kv_pool"].set_enabled(not self.fields["kv_per_reply"].value())

    # -- a quantized KV cache needs flash attention ---------------------------------------

    def _kv_quantized(self) -> bool:
        return self.fields["kv_cache_type"].value() != "f16"

    def _on_kv_changed(self) -> None:
        if self._kv_quantized():
            self.fields["flash_attn"].set_value(True)
            self._show_kv_note(KV_NOTE_QUANTIZED)
        else:
            self._show_kv_note("")
        self.changed.emit()

    def _on_flash_attn_toggled(self) -> None:
        if not self.fields["flash_attn"].value() and self._kv_quantized():
            self.fields["kv_cache_type"].set_value("f16")
            self._show_kv_note(KV_NOTE_RESET)
        elif self.fields["flash_attn"].value():
            self._show_kv_note(KV_NOTE_QUANTIZED if self._kv_quantized() else "")
        self.changed.emit()

    def _show_kv_note(self, text: str) -> None:
        self.kv_note_label.setText(text)
        self.kv_note_label.setVisible(bool(text))
