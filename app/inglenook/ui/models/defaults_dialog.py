"""Per-model defaults: the load options LOAD_SPECS marks per_model (context, GPU layers, prompt
lookup, a draft model), a preset and the chat template (Automatic, a built-in one, the file's
own, or your Jinja), used whenever that model loads (over the side panel's settings)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLabel,
    QPlainTextEdit,
    QVBoxLayout,
    QWidget,
)

from inglenook.core.builtin_templates import BUILTINS, FILE_OWN
from inglenook.core.load import LOAD_SPECS, ModelDefaults, ModelInfo
from inglenook.core.template import ChatTemplate, TemplateError
from inglenook.models.gguf import GGUFHeader, read_header
from inglenook.ui import tasks
from inglenook.ui.plain import plain_label
from inglenook.ui.widgets.load_field import LoadField

PANEL = "Use the side panel's"
CPU_ONLY = "This build of llama.cpp runs on the CPU only."
CUSTOM = "custom"  # the chat template choice that is your Jinja (ModelDefaults.chat_template)
CUSTOM_TEMPLATE = "Your own (Jinja)…"
FILE_TEMPLATE = "The file's own"
AUTOMATIC_TEMPLATE = "Automatic (recommended)"


def _automatic(loaded: ModelInfo | None) -> str:
    """The Automatic choice, with what it chose for the model loaded now (when it chose)."""
    now = {"gguf": FILE_TEMPLATE.lower(), "detected": loaded.template_name}.get(
        loaded.template_source, "") if loaded is not None else ""
    return AUTOMATIC_TEMPLATE + (f": {now}" if now else "")


class ModelDefaultsDialog(QDialog):
    """One row per option: ticked, this model loads with the value beside it; not ticked, it
    uses the side panel's."""

    def __init__(self, model_path: str, defaults: ModelDefaults, presets: Sequence[str],
                 gpu_offload: bool, parent: QWidget | None = None,
                 loaded: ModelInfo | None = None) -> None:
        """`loaded`: this model as loaded now, whose template Automatic chose."""
        super().__init__(parent)
        self.setObjectName("modelDefaultsDialog")
        self.setWindowTitle(f"Defaults for {Path(model_path).stem}")
        self.resize(560, 520)
        form = QFormLayout()
        self.fields: dict[str, LoadField] = {}
        self.overrides: dict[str, QCheckBox] = {}
        for spec in LOAD_SPECS.values():
            if spec.per_model and spec.name != "template_name":  # its own row, below
                self._add_row(form, LoadField(spec, self, "defaults_", switch_as_choice=True),
                              defaults.own(spec.name))
        if not gpu_offload:
            for w in (self.overrides["n_gpu_layers"], self.fields["n_gpu_layers"].editor):
                w.setEnabled(False)
                w.setToolTip(CPU_ONLY)
        self.preset = QComboBox(self)
        self.preset.setObjectName("defaults_preset")
        self.preset.addItem("Keep the current settings", "")
        for name in presets:
            self.preset.addItem(name, name)
        self.preset.setCurrentIndex(max(0, self.preset.findData(defaults.preset)))
        form.addRow("Preset", self.preset)
        self.template_choice = QComboBox(self)
        self.template_choice.setObjectName("defaults_template")
        self.template_choice.setAccessibleName("Chat template")
        self.template_choice.setToolTip(
            "The format this model's conversations are written in. Automatic: the file's own "
            "template, else a built-in one chosen from its vocabulary (the load notice and "
            "the model's tooltip say which and why).")
        self.template_choice.addItem(_automatic(loaded), "")
        for builtin in BUILTINS.values():
            self.template_choice.addItem(builtin.label, builtin.name)
        self.template_choice.addItem(CUSTOM_TEMPLATE, CUSTOM)
        if loaded is not None and loaded.template_source == "gguf":
            self._offer_file_own()
        template_name = defaults.own("template_name", "")
        if template_name == FILE_OWN:  # kept, whether or not the file still has one
            self._offer_file_own()
        current = CUSTOM if defaults.chat_template.strip() else template_name
        self.template_choice.setCurrentIndex(max(0, self.template_choice.findData(current)))
        form.addRow("Chat template", self.template_choice)
        self.template = QPlainTextEdit(self)
        self.template.setObjectName("defaults_chat_template")
        self.template.setAccessibleName("Your chat template (Jinja)")
        self.template.setPlaceholderText("Your chat template, in Jinja (as in a GGUF file's "
                                         "tokenizer.chat_template)")
        self.template.setTabChangesFocus(True)
        self.template.setPlainText(defaults.chat_template)
        self.template_choice.currentIndexChanged.connect(self._show_custom)
        # Offered only when the file has a template of its own: its header is read off the GUI
        # thread (a large vocabulary takes a moment to skip).
        self._reading = tasks.run(read_header, model_path, owner=self, name="template-header",
                                  on_done=self._on_header, on_failed=lambda _exc: None)
        self.error = plain_label("", self, name="defaultsError")  # template errors quote it
        self.error.setWordWrap(True)
        self.error.hide()
        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel, self)
        buttons.accepted.connect(self._save)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(18, 16, 18, 14)
        layout.setSpacing(10)
        intro = QLabel("Used every time this model loads, over the side panel. Options not "
                       "ticked use the side panel's.", self)
        intro.setWordWrap(True)
        layout.addWidget(intro)
        layout.addLayout(form)
        layout.addWidget(self.template, 1)
        layout.addWidget(self.error)
        layout.addStretch(0)  # takes the room the Jinja box leaves while it is hidden
        layout.addWidget(buttons)
        self._layout = layout
        self.result_defaults = defaults
        self._show_custom()

    def _offer_file_own(self) -> None:
        if self.template_choice.findData(FILE_OWN) < 0:
            self.template_choice.insertItem(1, FILE_TEMPLATE, FILE_OWN)

    def _on_header(self, header: GGUFHeader) -> None:
        if header.chat_template and header.chat_template.strip():
            self._offer_file_own()

    def _show_custom(self) -> None:
        custom = self.template_choice.currentData() == CUSTOM
        self.template.setVisible(custom)
        self._layout.setStretch(self._layout.count() - 2, 0 if custom else 1)

    def _add_row(self, form: QFormLayout, field: LoadField, value: object) -> None:
        """`value`: this model's own, or None when it uses the side panel's."""
        name = field.spec.name
        own = value is not None
        tick = QCheckBox(field.spec.label, self)
        tick.setObjectName(f"defaults_{name}_override")
        tick.setToolTip(f"Ticked: this model loads with its own {field.spec.label.lower()}. "
                        f"Not ticked: {PANEL.lower()}.")
        tick.setChecked(own)
        field.set_value(value if own else field.spec.default)
        field.editor.setEnabled(own)
        tick.toggled.connect(field.editor.setEnabled)
        if field.label is not None:
            field.label.hide()  # the tick box is the row's label
        form.addRow(tick, field.editor)
        self.fields[name], self.overrides[name] = field, tick

    def set_own(self, name: str, value: object) -> None:
        """Give this model its own value of one option (ticks its row)."""
        self.overrides[name].setChecked(True)
        self.fields[name].set_value(value)

    def defaults(self) -> ModelDefaults:
        own = {name: field.value() for name, field in self.fields.items()
               if self.overrides[name].isChecked()}
        choice = self.template_choice.currentData() or ""
        custom = choice == CUSTOM
        if choice and not custom:  # "": Automatic, the panel's
            own["template_name"] = choice
        return ModelDefaults.from_dict({
            "load": own, "preset": self.preset.currentData() or "",
            "chat_template": self.template.toPlainText().strip() if custom else ""})

    def _save(self) -> None:
        defaults = self.defaults()
        if self.template_choice.currentData() == CUSTOM and not defaults.chat_template:
            self.error.setText("Write your chat template, or choose another.")
            self.error.show()
            return
        if defaults.chat_template:
            try:  # refuse a template that cannot even compile, before the model loads
                ChatTemplate(defaults.chat_template)
            except TemplateError as exc:
                self.error.setText(str(exc))
                self.error.show()
                return
        self.result_defaults = defaults
        self.accept()
