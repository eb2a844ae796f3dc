"""The side panel's "Thinking and tools": the loaded model's thinking switch and reasoning
effort (shown only when its chat template reads them), and which tool servers the chat uses
(or that the model cannot call tools). The values belong to the chat on screen."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from inglenook.chat.chat_settings import EFFORTS, ChatSettings
from inglenook.core.reasoning import TemplateTraits
from inglenook.ui.tools.chat_tools import NO_TOOL_SUPPORT
from inglenook.ui.widgets.controls import CollapsibleSection, ComboBox, helper_label
from inglenook.ui.widgets.narrow import WrappingCheckBox


class ReplySection(CollapsibleSection):
    """Changes made with show_chat()/show_model() emit nothing.

    Signals:
        thinking_changed(object): the switch was flipped: True or False.
        effort_changed(str): an effort was chosen ("": the template's default).
        tools_requested(): "Tools…" was pressed.
    """

    thinking_changed = Signal(object)
    effort_changed = Signal(str)
    tools_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Thinking and tools", "replySection", parent)
        self.thinking_check = WrappingCheckBox("Think before answering", self.body)
        self.thinking_check.setObjectName("thinking_check")
        self.thinking_check.setToolTip(
            "This model's chat template can turn its reasoning off: faster, shorter replies. "
            "Kept with this chat.")
        self.thinking_check.toggled.connect(self._on_thinking)
        self.effort_label = QLabel("Reasoning effort", self.body)
        self.effort_combo = ComboBox(self.body)
        self.effort_combo.setObjectName("effort_combo")
        self.effort_combo.setAccessibleName("Reasoning effort")
        self.effort_combo.setToolTip("How long the model reasons before it answers (its "
                                     "template's reasoning_effort). Kept with this chat.")
        self.effort_combo.addItem("Model default", "")
        for effort in EFFORTS:
            self.effort_combo.addItem(effort.capitalize(), effort)
        self.effort_combo.currentIndexChanged.connect(self._on_effort)
        self.tools_label = helper_label("", self.body, name="tools_label")
        self.tools_button = QPushButton("Tools…", self.body)
        self.tools_button.setObjectName("tools_button")
        self.tools_button.setToolTip("MCP tool servers, their tools, and which this chat uses")
        self.tools_button.clicked.connect(self.tools_requested)
        effort_row = QHBoxLayout()
        effort_row.addWidget(self.effort_label)
        effort_row.addWidget(self.effort_combo, 1)
        layout = QVBoxLayout(self.body)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(6)
        layout.addWidget(self.thinking_check)
        layout.addLayout(effort_row)
        layout.addWidget(self.tools_label)
        layout.addWidget(self.tools_button)
        self._quiet = False
        self._traits = TemplateTraits()
        self._tool_support: bool | None = None  # None: no model loaded
        self._chat = ChatSettings()
        self._show()

    def show_model(self, traits: TemplateTraits, tool_format: str) -> None:
        self._traits, self._tool_support = traits, bool(tool_format)
        self._show()

    def show_chat(self, settings: ChatSettings) -> None:
        self._chat = settings
        self._show()

    def _show(self) -> None:
        self._quiet = True
        try:
            self.thinking_check.setVisible(self._traits.thinking_switch)
            self.thinking_check.setChecked(self._chat.thinking is not False)
            for widget in (self.effort_label, self.effort_combo):
                widget.setVisible(self._traits.effort)
            self.effort_combo.setCurrentIndex(max(self.effort_combo.findData(
                self._chat.reasoning_effort), 0))
        finally:
            self._quiet = False
        servers = sorted(self._chat.tools.enabled_servers)
        if self._tool_support is False:
            text = NO_TOOL_SUPPORT
        elif servers:
            text = "This chat uses: " + ", ".join(servers)
        else:
            text = "This chat uses no tools."
        self.tools_label.setText(text)

    def _on_thinking(self, on: bool) -> None:
        if not self._quiet:
            self.thinking_changed.emit(on)

    def _on_effort(self) -> None:
        if not self._quiet:
            self.effort_changed.emit(str(self.effort_combo.currentData()))
