"""The side panel of a chat window: system prompt, sampling settings and model load options."""

from __future__ import annotations

import dataclasses
import random

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import (
    QCheckBox,
    QFormLayout,
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from inglenook.core.load import DEFAULT_SLOTS, KV_CACHE_TYPES, MAX_SLOTS, LoadParams
from inglenook.core.sampling import SPECS, SamplingParams
from inglenook.core.settings import DEFAULT_SYSTEM_PROMPT, Settings
from inglenook.ui.plain import plain_tip
from inglenook.ui.side.reply_section import ReplySection
from inglenook.ui.side.speed_options import SpeedOptions
from inglenook.ui.widgets.controls import (
    SPIN_WIDTH,
    CollapsibleSection,
    ComboBox,
    SliderSpin,
    SpinBox,
    StopStringsEdit,
    VerticalScrollArea,
    helper_label,
)
from inglenook.ui.widgets.narrow import WrappingCheckBox

# Shown in this order; mirostat_mode is a combo box and seed has no slider.
SLIDER_FIELDS = (
    "temperature", "max_tokens", "top_k", "top_p", "min_p", "typical_p",
    "repeat_penalty", "repeat_last_n", "presence_penalty", "frequency_penalty",
)
MIROSTAT_FIELDS = ("mirostat_tau", "mirostat_eta")
# llama.cpp skips these samplers while Mirostat is on.
IGNORED_BY_MIROSTAT = ("top_k", "top_p", "min_p", "typical_p")
MIROSTAT_MODES = ("Off", "Mirostat", "Mirostat 2.0")
OVERFLOW_CHOICES = (
    ("middle", "Leave out the middle",
     "Keep the system prompt, the first exchange and the latest turns; leave out turns in "
     "between, in large blocks so the cache is reused for many turns."),
    ("rolling", "Rolling window",
     "Keep the system prompt and as many of the latest turns as fit."),
    ("stop", "Stop",
     "Leave nothing out: when the chat is full, say so and stop."),
)
KV_NOTE_QUANTIZED = "Quantized KV cache needs flash attention."
KV_NOTE_RESET = "KV cache set back to f16: a quantized cache needs flash attention."


class SamplingPanel(QWidget):
    """System prompt, sampling and load options for the current chat.

    Changes made with set_settings() emit nothing; everything the user does emits.

    Signals:
        sampling_changed(object): the user changed a sampling value; carries SamplingParams.
        overflow_changed(str): the user chose what to leave out when the chat is too long.
        system_prompt_changed(str): the user edited the system prompt.
        reload_requested(): the user pressed "Reload model" to apply the load options.
        settings_changed(): anything on the panel changed (the window saves, debounced).
    """

    sampling_changed = Signal(object)
    overflow_changed = Signal(str)
    system_prompt_changed = Signal(str)
    reload_requested = Signal()
    settings_changed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("samplingPanel")
        self.setMaximumWidth(420)  # a side panel: the chat gets the extra width
        self._quiet = False  # set while filling controls programmatically

        content = QWidget()
        content.setObjectName("samplingPanelContent")
        column = QVBoxLayout(content)
        column.setContentsMargins(16, 14, 16, 16)
        column.setSpacing(18)
        column.addWidget(self._build_prompt_section())
        column.addWidget(self._build_overflow_section())
        self.reply_section = ReplySection(self)  # the model's thinking switch, the chat's tools
        column.addWidget(self.reply_section)
        column.addWidget(self._build_sampling_section())
        column.addWidget(self._build_load_section())
        column.addStretch(1)

        scroll = VerticalScrollArea(self)
        scroll.setObjectName("samplingPanelScroll")
        scroll.setWidget(content)

        self.reset_button = QPushButton("Reset to defaults")
        self.reset_button.setObjectName("reset_button")
        self.reset_button.setToolTip("Reset the system prompt and sampling settings. "
                                     "Model loading options are kept.")
        self.reset_button.clicked.connect(self.reset_to_defaults)
        footer = QHBoxLayout()
        footer.setContentsMargins(16, 8, 16, 12)
        footer.addStretch(1)
        footer.addWidget(self.reset_button)

        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.setSpacing(0)
        outer.addWidget(scroll, 1)
        rule = QFrame()
        rule.setObjectName("samplingPanelFooterRule")
        rule.setFrameShape(QFrame.Shape.HLine)
        rule.setForegroundRole(QPalette.ColorRole.Mid)
        outer.addWidget(rule)
        outer.addLayout(footer)

        self.set_settings(Settings())

    # -- building -------------------------------------------------------------------------

    def _build_prompt_section(self) -> QWidget:
        section = CollapsibleSection("System prompt", "systemPromptSection", self)
        self.system_prompt_edit = QPlainTextEdit()
        self.system_prompt_edit.setObjectName("system_prompt_edit")
        self.system_prompt_edit.setPlaceholderText("Instructions the model sees before the chat")
        self.system_prompt_edit.setAccessibleName("System prompt")
        self.system_prompt_edit.setToolTip(
            "Instructions sent before the conversation. Applies to the next reply.")
        line = self.system_prompt_edit.fontMetrics().lineSpacing()
        self.system_prompt_edit.setFixedHeight(line * 5 + 14)
        self.system_prompt_edit.textChanged.connect(self._on_prompt_edited)
        layout = QVBoxLayout(section.body)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.system_prompt_edit)
        return section

    def _build_overflow_section(self) -> QWidget:
        section = CollapsibleSection("When the chat is full", "overflowSection", self)
        self.overflow_combo = ComboBox()
        self.overflow_combo.setObjectName("overflow_combo")
        for policy, label, tip in OVERFLOW_CHOICES:
            self.overflow_combo.addItem(label, policy)
            self.overflow_combo.setItemData(self.overflow_combo.count() - 1, tip,
                                            Qt.ItemDataRole.ToolTipRole)
        self.overflow_combo.setToolTip(
            "What this chat leaves out when it no longer fits the model's context. The system "
            "prompt is always kept; a marker in the chat shows where history was left out.")
        self.overflow_combo.currentIndexChanged.connect(self._on_overflow_changed)
        layout = QVBoxLayout(section.body)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.overflow_combo)
        return section

    def overflow(self) -> str:
        return str(self.overflow_combo.currentData())

    def set_overflow(self, policy: str) -> None:
        """Show a chat's policy; emits nothing."""
        self._quiet = True
        try:
            index = self.overflow_combo.findData(policy)
            self.overflow_combo.setCurrentIndex(max(index, 0))
        finally:
            self._quiet = False

    def _on_overflow_changed(self) -> None:
        if not self._quiet:
            self.overflow_changed.emit(self.overflow())

    def _build_sampling_section(self) -> QWidget:
        section = CollapsibleSection("Sampling", "samplingSection", self)
        grid = QGridLayout(section.body)
        grid.setContentsMargins(0, 0, 0, 0)
        grid.setHorizontalSpacing(8)
        grid.setVerticalSpacing(4)
        grid.setColumnStretch(0, 1)
        self._pairs: dict[str, SliderSpin] = {}
        self._lines: dict[str, QHBoxLayout] = {}

        def add_pair(name: str) -> SliderSpin:
            pair = SliderSpin(SPECS[name], slider=name != "seed", parent=section.body)
            row = grid.rowCount()
            # Label and number on one line of their own: the panel is as narrow as the widest
            # such line, not the widest label plus the widest box.
            self._lines[name] = line = QHBoxLayout()
            line.setSpacing(8)
            line.addWidget(pair.label, 1)
            line.addWidget(pair.spin)
            grid.addLayout(line, row, 0, 1, 3)
            if pair.slider is not None:
                grid.addWidget(pair.slider, row + 1, 0, 1, 3)
            grid.setRowMinimumHeight(grid.rowCount(), 8)  # breathing room between settings
            pair.value_changed.connect(self._on_sampling_edited)
            self._pairs[name] = pair
            return pair

        for name in SLIDER_FIELDS:
            add_pair(name)

        row = grid.rowCount()
        mirostat_label = QLabel(SPECS["mirostat_mode"].label)
        mirostat_label.setObjectName("mirostat_mode_label")
        self.mirostat_combo = ComboBox()
        self.mirostat_combo.setObjectName("mirostat_mode_combo")
        self.mirostat_combo.addItems(MIROSTAT_MODES)
        for w in (mirostat_label, self.mirostat_combo):
            w.setToolTip(SPECS["mirostat_mode"].tooltip)
        self.mirostat_combo.currentIndexChanged.connect(self._on_mirostat_changed)
        mirostat_line = QHBoxLayout()
        mirostat_line.setSpacing(8)
        mirostat_line.addWidget(mirostat_label, 1)
        mirostat_line.addWidget(self.mirostat_combo)
        grid.addLayout(mirostat_line, row, 0, 1, 3)
        grid.setRowMinimumHeight(row + 1, 8)
        for name in MIROSTAT_FIELDS:
            add_pair(name)

        seed = add_pair("seed")
        seed.spin.setFixedWidth(SPIN_WIDTH + 28)  # room for ten digits
        self.seed_dice_button = QToolButton()
        self.seed_dice_button.setObjectName("seed_dice_button")
        self.seed_dice_button.setText("⚄")
        self.seed_dice_button.setToolTip("Pick a new fixed seed")
        self.seed_dice_button.clicked.connect(
            lambda: seed.set_value(random.randrange(0, 2**31 - 1)))
        self._lines["seed"].addWidget(self.seed_dice_button)

        stop_label = QLabel("Stop strings")
        stop_label.setObjectName("stop_label")
        self.stop_edit = StopStringsEdit()
        self.stop_edit.setObjectName("stop_edit")
        stop_label.setToolTip(self.stop_edit.toolTip())
        self.stop_edit.textChanged.connect(self._on_sampling_edited)
        row = grid.rowCount()
        grid.addWidget(stop_label, row, 0, 1, 3)
        grid.addWidget(self.stop_edit, row + 1, 0, 1, 3)
        return section

    def _build_load_section(self) -> QWidget:
        section = CollapsibleSection("Model loading", "loadSection", self)
        layout = QVBoxLayout(section.body)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(8)
        layout.addWidget(helper_label("These apply when the model is next loaded.",
                                      name="load_hint_label"))
        form = QFormLayout()
        form.setContentsMargins(0, 0, 0, 0)
        form.setHorizontalSpacing(8)
        form.setVerticalSpacing(6)
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        form.setRowWrapPolicy(QFormLayout.RowWrapPolicy.WrapLongRows)  # a box under its label
        form.setLabelAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter)
        form.setFormAlignment(Qt.AlignmentFlag.AlignLeft)
        layout.addLayout(form)

        def spin(name: str, label: str, lo: int, hi: int, step: int, special: str,
                 tip: str) -> SpinBox:
            box = SpinBox()
            box.setObjectName(f"{name}_spin")
            box.setRange(lo, hi)
            box.setSingleStep(step)
            box.setSpecialValueText(special)
            box.setAlignment(Qt.AlignmentFlag.AlignRight)
            box.setToolTip(tip)
            box.setAccessibleName(label)
            box.valueChanged.connect(self._on_load_edited)
            lab = QLabel(label)
            lab.setObjectName(f"{name}_label")
            lab.setToolTip(tip)
            form.addRow(lab, box)
            return box

        self.n_ctx_spin = spin(
            "n_ctx", "Context length", 0, 1 << 20, 1024, "Model default",
            "How many tokens of the chat the model can see at once. Longer contexts use more "
            "memory. Model default: min(trained context, 8192).")
        self._gpu_tooltip = ("How many layers to put on the GPU. All is fastest if they fit "
                             "in video memory; lower it if loading runs out of memory.")
        self.n_gpu_layers_spin = spin("n_gpu_layers", "GPU layers", -1, 999, 1, "All",
                                      self._gpu_tooltip)
        self.gpu_unsupported_label = helper_label("", name="gpu_unsupported_label")
        self.gpu_unsupported_label.hide()
        form.addRow(self.gpu_unsupported_label)
        self.n_threads_spin = spin(
            "n_threads", "CPU threads", 0, 512, 1, "All physical cores",
            "Threads used for the parts that run on the CPU. Physical cores is usually best; "
            "more threads than cores tends to be slower.")
        self.n_batch_spin = spin(
            "n_batch", "Batch size", 1, 8192, 128, "",
            "Prompt tokens processed per step. Larger is faster for long prompts and uses "
            "more memory.")
        self.n_slots_spin = spin(
            "n_slots", "Replies at once", 0, MAX_SLOTS, 1, "Automatic",
            "How many replies the model writes at the same time (chats, API clients), each "
            "with a KV cache of the context length of its own: more costs memory. Several "
            "decoded together are faster in total than one after another. Automatic: up to "
            f"{DEFAULT_SLOTS}, as free memory allows.")

        self.kv_cache_combo = ComboBox()
        self.kv_cache_combo.setObjectName("kv_cache_combo")
        self.kv_cache_combo.addItems(KV_CACHE_TYPES)
        kv_tip = ("Precision of the attention cache. q8_0 halves its memory with little loss; "
                  "q4_0 saves more. Quantized caches need flash attention.")
        self.kv_cache_combo.setToolTip(kv_tip)
        self.kv_cache_combo.currentTextChanged.connect(self._on_kv_changed)
        kv_label = QLabel("KV cache")
        kv_label.setObjectName("kv_cache_label")
        kv_label.setToolTip(kv_tip)
        form.addRow(kv_label, self.kv_cache_combo)

        self.flash_attn_check = self._check(
            layout, "flash_attn", "Flash attention",
            "Faster attention that uses less memory on supported hardware. Needed for a "
            "quantized KV cache. With it, guessing ahead (prompt lookup, a draft model) gives "
            "exactly the reply plain decoding gives; on a CPU it can be slower.")
        self.flash_attn_check.toggled.connect(self._on_flash_attn_toggled)
        self.kv_note_label = helper_label("", name="kv_note_label")
        self.kv_note_label.hide()
        layout.addWidget(self.kv_note_label)
        self.use_mmap_check = self._check(
            layout, "use_mmap", "Memory-map the model file",
            "Load the file lazily through the page cache: faster start, shares memory.")
        self.use_mlock_check = self._check(
            layout, "use_mlock", "Lock the model in memory",
            "Keep the model in RAM so the system never swaps it out. Needs enough free memory.")
        self.beyond_trained_check = self._check(
            layout, "allow_beyond_trained", "Allow a longer context than the model was trained on",
            "Without this, a context length above the model's trained length is refused: "
            "beyond it, replies are often incoherent.")

        self.speed = SpeedOptions(section.body)
        self.speed.changed.connect(self._on_load_edited)
        layout.addWidget(self.speed)

        self.reload_button = QPushButton("Reload model")
        self.reload_button.setObjectName("reload_button")
        self.reload_button.setToolTip("Load the current model again with these options.")
        self.reload_button.clicked.connect(self.reload_requested)
        layout.addSpacing(4)
        layout.addWidget(self.reload_button)
        return section

    def _check(self, layout: QVBoxLayout, name: str, text: str, tip: str) -> QCheckBox:
        box = WrappingCheckBox(text)  # long labels wrap rather than widen the panel
        box.setObjectName(f"{name}_check")
        box.setToolTip(tip)
        box.toggled.connect(self._on_load_edited)
        layout.addWidget(box)
        return box

    # -- public API -----------------------------------------------------------------------

    def set_settings(self, settings: Settings) -> None:
        """Show these settings; emits nothing."""
        self._quiet = True
        try:
            s = settings.sampling
            for name, pair in self._pairs.items():
                pair.set_value(getattr(s, name))
            self.mirostat_combo.setCurrentIndex(s.mirostat_mode)
            self.stop_edit.set_stop_strings(s.stop)
            self.system_prompt_edit.setPlainText(settings.system_prompt)
            self.n_ctx_spin.setValue(settings.n_ctx)
            self.n_gpu_layers_spin.setValue(settings.n_gpu_layers)
            self.n_threads_spin.setValue(settings.n_threads)
            self.n_batch_spin.setValue(settings.n_batch)
            self.n_slots_spin.setValue(settings.n_slots)
            self.flash_attn_check.setChecked(settings.flash_attn)
            self.kv_cache_combo.setCurrentText(settings.kv_cache_type)
            self.use_mmap_check.setChecked(settings.use_mmap)
            self.use_mlock_check.setChecked(settings.use_mlock)
            self.beyond_trained_check.setChecked(settings.allow_beyond_trained)
            self.speed.show_settings(settings)
            if self._kv_quantized():  # stored by hand or an older version: keep it loadable
                self.flash_attn_check.setChecked(True)
        finally:
            self._quiet = False
        self._show_kv_note(KV_NOTE_QUANTIZED if self._kv_quantized() else "")
        self._update_mirostat_rows()

    def sampling(self) -> SamplingParams:
        values: dict[str, object] = {name: pair.value() for name, pair in self._pairs.items()}
        values["mirostat_mode"] = self.mirostat_combo.currentIndex()
        values["stop"] = self.stop_edit.stop_strings()
        return SamplingParams.from_dict(values)

    def system_prompt(self) -> str:
        return self.system_prompt_edit.toPlainText()

    def apply_to(self, settings: Settings) -> Settings:
        """A copy of `settings` with everything this panel shows taken from the panel."""
        return dataclasses.replace(
            settings,
            sampling=self.sampling(),
            system_prompt=self.system_prompt(),
            n_ctx=self.n_ctx_spin.value(),
            n_gpu_layers=self.n_gpu_layers_spin.value(),
            n_threads=self.n_threads_spin.value(),
            n_batch=self.n_batch_spin.value(),
            n_slots=self.n_slots_spin.value(),
            flash_attn=self.flash_attn_check.isChecked(),
            kv_cache_type=self.kv_cache_combo.currentText(),
            use_mmap=self.use_mmap_check.isChecked(),
            use_mlock=self.use_mlock_check.isChecked(),
            allow_beyond_trained=self.beyond_trained_check.isChecked(),
            **self.speed.values(),  # type: ignore[arg-type]
        )

    def load_params(self, model_path: str) -> LoadParams:
        return self.apply_to(Settings()).load_params(model_path)

    def set_context(self, n_ctx: int, allow_beyond_trained: bool | None = None) -> None:
        """Set the context length to load with (a fix offered when a load was refused)."""
        self.n_ctx_spin.setValue(n_ctx)
        if allow_beyond_trained is not None:
            self.beyond_trained_check.setChecked(allow_beyond_trained)

    def set_slots(self, n_slots: int) -> None:
        """Set how many replies load at once (a fix offered when a load was refused)."""
        self.n_slots_spin.setValue(n_slots)

    def show_slots_in_use(self, n_slots: int) -> None:
        """What "Automatic" chose for the model loaded now."""
        self.n_slots_spin.setSpecialValueText(f"Automatic ({n_slots})" if n_slots else
                                              "Automatic")

    def limit_sampling(self, accepted: frozenset[str] | None) -> None:
        """A remote engine takes only some settings: the others are shown disabled (None: all,
        as for the local engine)."""
        for name, pair in self._pairs.items():
            pair.set_enabled(accepted is None or name in accepted)
            pair.set_tooltip(pair.spec.tooltip + ("" if accepted is None or name in accepted
                                                  else "\n\nThis engine does not take it."))
        if accepted is None:
            self._update_mirostat_rows()

    def set_gpu_offload_supported(self, supported: bool, reason: str = "") -> None:
        """Disable the GPU layers row, saying why, when the engine cannot offload."""
        label = self.findChild(QLabel, "n_gpu_layers_label")
        tip = self._gpu_tooltip if supported else reason
        for w in (label, self.n_gpu_layers_spin):
            if w is None:
                continue
            w.setEnabled(supported)
            w.setToolTip(plain_tip(tip))  # the engine's words
        self.gpu_unsupported_label.setText(reason)
        self.gpu_unsupported_label.setVisible(not supported and bool(reason))

    def set_physical_cores(self, n: int) -> None:
        self.n_threads_spin.setSpecialValueText(
            f"All physical cores ({n})" if n > 0 else "All physical cores")

    def reset_to_defaults(self) -> None:
        """Reset the sampling settings and system prompt; load options are kept."""
        self.set_settings(dataclasses.replace(self.apply_to(Settings()),
                                              sampling=SamplingParams(),
                                              system_prompt=DEFAULT_SYSTEM_PROMPT))
        self.sampling_changed.emit(self.sampling())
        self.system_prompt_changed.emit(self.system_prompt())
        self.settings_changed.emit()

    # -- reacting to the user -------------------------------------------------------------

    def _on_sampling_edited(self) -> None:
        if self._quiet:
            return
        self.sampling_changed.emit(self.sampling())
        self.settings_changed.emit()

    def _on_prompt_edited(self) -> None:
        if self._quiet:
            return
        self.system_prompt_changed.emit(self.system_prompt())
        self.settings_changed.emit()

    def _on_load_edited(self) -> None:
        if not self._quiet:
            self.settings_changed.emit()

    def _on_mirostat_changed(self) -> None:
        self._update_mirostat_rows()
        self._on_sampling_edited()

    def _update_mirostat_rows(self) -> None:
        on = self.mirostat_combo.currentIndex() != 0
        for name in MIROSTAT_FIELDS:
            pair = self._pairs[name]
            pair.set_enabled(on)
            pair.set_tooltip(pair.spec.tooltip + ("" if on else "\n\nUsed when Mirostat is on."))
        for name in IGNORED_BY_MIROSTAT:
            pair = self._pairs[name]
            pair.set_enabled(not on)
            pair.set_tooltip(pair.spec.tooltip + (
                "\n\nIgnored while Mirostat is on: llama.cpp skips this sampler." if on else ""))

    def _kv_quantized(self) -> bool:
        return self.kv_cache_combo.currentText() != "f16"

    def _on_kv_changed(self) -> None:
        if self._quiet:
            return
        if self._kv_quantized():
            self.flash_attn_check.setChecked(True)
            self._show_kv_note(KV_NOTE_QUANTIZED)
        else:
            self._show_kv_note("")
        self._on_load_edited()

    def _on_flash_attn_toggled(self, checked: bool) -> None:
        if self._quiet:
            return
        if not checked and self._kv_quantized():
            self.kv_cache_combo.setCurrentText("f16")
            self._show_kv_note(KV_NOTE_RESET)
        elif checked:
            self._show_kv_note(KV_NOTE_QUANTIZED if self._kv_quantized() else "")

    def _show_kv_note(self, text: str) -> None:
        self.kv_note_label.setText(text)
        self.kv_note_label.setVisible(bool(text))
