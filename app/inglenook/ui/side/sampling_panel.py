"""The side panel of a chat window: system prompt, sampling settings and model load options."""

from __future__ import annotations

import dataclasses
import random

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import (
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

from inglenook.core.load import LoadOptions
from inglenook.core.sampling import SPECS, SamplingParams
from inglenook.core.settings import DEFAULT_SYSTEM_PROMPT, Settings
from inglenook.ui.side.knowledge_section import KnowledgeSection
from inglenook.ui.side.load_section import LoadSection
from inglenook.ui.side.reply_format_section import ReplyFormatSection
from inglenook.ui.side.reply_section import ReplySection
from inglenook.ui.widgets.controls import (
    SPIN_WIDTH,
    CollapsibleSection,
    ComboBox,
    SliderSpin,
    StopStringsEdit,
    VerticalScrollArea,
)

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
        self.knowledge_section = KnowledgeSection(self)  # the collections the chat searches
        column.addWidget(self.knowledge_section)
        self.reply_format_section = ReplyFormatSection(self)  # the chat's "Reply as JSON"
        column.addWidget(self.reply_format_section)
        column.addWidget(self._build_sampling_section())
        self.load = LoadSection(self)
        self.load.changed.connect(self._on_load_edited)
        self.load.reload_requested.connect(self.reload_requested)
        column.addWidget(self.load)
        # The options Tune and a refused load's fixes set (model and side controllers).
        self.speed = self.load.speed
        self.n_ctx_spin = self.load.fields["n_ctx"].spin
        self.n_threads_spin = self.load.fields["n_threads"].spin
        self.n_batch_spin = self.load.fields["n_batch"].spin
        column.addStretch(1)

        scroll = VerticalScrollArea(self)
        scroll.setObjectName("samplingPanelScroll")
        # Not a tab stop of its own: Tab goes to its controls, and scrolls them into view.
        scroll.setFocusPolicy(Qt.FocusPolicy.NoFocus)
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
        self.system_prompt_edit.setTabChangesFocus(True)  # Tab typed no tab into the prompt
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
        self.seed_dice_button.setAccessibleName("New random seed")
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
            self.load.show_options(settings.load)
        finally:
            self._quiet = False
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
        return dataclasses.replace(settings, sampling=self.sampling(),
                                   system_prompt=self.system_prompt(),
                                   load=self.load_options(settings.load))

    def load_options(self, base: LoadOptions | None = None) -> LoadOptions:
        """`base` (None: the defaults) with the load options this panel shows over it (it
        shows none of one model's own: its projector, its template)."""
        return (base or LoadOptions()).replace(**self.load.values())

    def set_context(self, n_ctx: int, allow_beyond_trained: bool | None = None) -> None:
        """Set the context length to load with (a fix offered when a load was refused)."""
        self.load.set_value("n_ctx", n_ctx)
        if allow_beyond_trained is not None:
            self.load.set_value("allow_beyond_trained", allow_beyond_trained)

    def set_slots(self, n_slots: int) -> None:
        """Set how many replies load at once (a fix offered when a load was refused)."""
        self.load.set_value("n_slots", n_slots)

    def show_slots_in_use(self, n_slots: int) -> None:
        """What "Automatic" chose for the model loaded now."""
        self.load.show_slots_in_use(n_slots)

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
        self.load.set_gpu_offload_supported(supported, reason)

    def set_physical_cores(self, n: int) -> None:
        self.load.set_physical_cores(n)

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
