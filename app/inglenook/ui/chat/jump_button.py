"""The button that floats at the foot of the transcript when the user has scrolled up: a click
goes to the latest message; while a reply is being written below, it says so."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QToolButton, QWidget

MARGIN = 16  # px above the bottom of the view

LATEST, WRITING = "↓  Latest", "↓  The reply"


class JumpButton(QToolButton):
    def __init__(self, parent: QWidget) -> None:
        super().__init__(parent)
        self.setObjectName("jumpToLatest")
        self.setText(LATEST)
        self.setToolTip("Jump to the latest message (End)")
        self.setAccessibleName("Jump to the latest message")
        self.setCursor(Qt.CursorShape.PointingHandCursor)
        self.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.hide()

    def set_writing(self, writing: bool) -> None:
        self.setText(WRITING if writing else LATEST)

    def place(self, show: bool, column_x: int, column_width: int, bottom: int) -> None:
        """Shown (or not) centred under the messages' column, `bottom` being the view's."""
        if show:
            size = self.sizeHint()
            self.setGeometry(column_x + (column_width - size.width()) // 2,
                             bottom - size.height() - MARGIN, size.width(), size.height())
            self.raise_()
        self.setVisible(show)
