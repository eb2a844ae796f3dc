"""Per-model defaults: context, GPU layers, a preset and a chat-template override, used
whenever that model loads (over the side panel's settings)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from inglenook.core.load import ModelDefaults
from inglenook.core.template import CHATML_TEMPLATE, ChatTemplate, TemplateError
from inglenook.ui.plain import plain_label

PANEL = "Use the side panel's"


class ModelDefaultsDialog(QDialog):
    def __init__(self, model_path: str, defaults: ModelDefaults, presets: Sequence[str],
                 gpu_offload: bool, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("modelDefaultsDialog")
        self.setWindowTitle(f"Defaults for {Path(model_path).stem}")
        self.resize(560, 480)
        self.context = QSpinBox(self)
        self.context.setObjectName("defaults_n_ctx")
        self.context.setRange(0, 1_048_576)
        self.context.setSingleStep(1024)
        self.context.setSpecialValueText(PANEL)
        self.context.setValue(defaults.n_ctx)
        self.layers = QSpinBox(self)
        self.layers.setObjectName("defaults_n_gpu_layers")
        self.layers.setRange(-2, 1000)
        self.layers.setSpecialValueText(PANEL)
        self.layers.setValue(-2 if defaults.n_gpu_layers is None else defaults.n_gpu_layers)
        self.layers.setToolTip("-1 offloads every layer")
        self.layers.setEnabled(gpu_offload)
        if not gpu_offload:
            self.layers.setToolTip("This build of llama.cpp runs on the CPU only.")
        self.preset = QComboBox(self)
        self.preset.setObjectName("defaults_preset")
        self.preset.addItem("Keep the current settings", "")
        for name in presets:
            self.preset.addItem(name, name)
        self.preset.setCurrentIndex(max(0, self.preset.findData(defaults.preset)))
        self.template = QPlainTextEdit(self)
        self.template.setObjectName("defaults_chat_template")
        self.template.setPlaceholderText("Empty: the model's own chat template")
        self.template.setPlainText(defaults.chat_template)
        chatml = QPushButton("Use ChatML", self)
        chatml.clicked.connect(lambda: self.template.setPlainText(CHATML_TEMPLATE))
        self.error = plain_label("", self, name="defaultsError")  # template errors quote it
        self.error.setWordWrap(True)
        self.error.hide()
        form = QFormLayout()
        form.addRow("Context length", self.context)
        form.addRow("GPU layers", self.layers)
        form.addRow("Preset", self.preset)
        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel, self)
        buttons.accepted.connect(self._save)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(18, 16, 18, 14)
        layout.setSpacing(10)
        layout.addWidget(QLabel("Used every time this model loads, over the side panel.", self))
        layout.addLayout(form)
        layout.addWidget(QLabel("Chat template override (Jinja)", self))
        layout.addWidget(self.template, 1)
        layout.addWidget(chatml)
        layout.addWidget(self.error)
        layout.addWidget(buttons)
        self.result_defaults = defaults

    def defaults(self) -> ModelDefaults:
        layers = self.layers.value()
        return ModelDefaults(n_ctx=self.context.value(),
                             n_gpu_layers=None if layers == -2 else layers,
                             preset=self.preset.currentData() or "",
                             chat_template=self.template.toPlainText().strip())

    def _save(self) -> None:
        defaults = self.defaults()
        if defaults.chat_template:
            try:  # refuse a template that cannot even compile, before the model loads
                ChatTemplate(defaults.chat_template)
            except TemplateError as exc:
                self.error.setText(str(exc))
                self.error.show()
                return
        self.result_defaults = defaults
        self.accept()
