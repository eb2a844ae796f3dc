"""A message strip above the chat: errors, notices, and one action (Reload model, Undo…)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QToolButton, QWidget

from inglenook.ui.widgets.style import restyle

BannerKind = Literal["error", "info"]


class Banner(QWidget):
    """Shows one message at a time; `show_message` replaces what was there."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("bannerRow")
        self.label = QLabel(self)
        self.label.setObjectName("banner")
        self.label.setWordWrap(True)
        self.label.setTextFormat(Qt.TextFormat.PlainText)  # messages quote file names, errors
        self.action_button = QPushButton(self)
        self.action_button.setObjectName("bannerActionButton")
        self.action_button.clicked.connect(self._act)
        self.close_button = QToolButton(self)
        self.close_button.setObjectName("bannerCloseButton")
        self.close_button.setText("✕")
        self.close_button.setToolTip("Dismiss")
        self.close_button.setAccessibleName("Dismiss")  # "✕" is no name to read out
        self.close_button.setAutoRaise(True)
        self.close_button.clicked.connect(self.clear)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(16, 8, 16, 0)
        layout.addWidget(self.label, 1)
        layout.addWidget(self.action_button)
        layout.addWidget(self.close_button)
        self._action: Callable[[], None] | None = None
        self.kind: BannerKind | None = None
        self.hide()

    def show_message(self, text: str, kind: BannerKind = "error",
                     action: tuple[str, Callable[[], None]] | None = None) -> None:
        self.kind = kind
        self.label.setText(text)
        restyle(self.label, kind=kind)
        self._action = action[1] if action else None
        self.action_button.setText(action[0] if action else "")
        self.action_button.setVisible(action is not None)
        self.show()

    def clear(self) -> None:
        self.kind = None
        self._action = None
        self.hide()

    def text(self) -> str:
        return self.label.text() if self.isVisible() else ""

    def _act(self) -> None:
        action = self._action
        self.clear()
        if action is not None:
            action()
