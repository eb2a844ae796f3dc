"""A dialog as tall as its content, word-wrapped text included.

Qt gives a window whose layout has height-for-width (any word-wrapped label) a minimum height of
0, so `resize(width, 0)` (or a note that grows to three lines) squeezes every field below its
own height: line edits at half height with their text cut, buttons without a label. This keeps
the window's minimum height at what its content needs at its current width, whenever the layout
changes or the width does.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject
from PySide6.QtWidgets import QWidget


class ContentHeight(QObject):
    def __init__(self, window: QWidget) -> None:
        super().__init__(window)
        self.window = window
        window.installEventFilter(self)
        self.fit()

    def fit(self) -> None:
        window = self.window
        layout = window.layout()
        if layout is None:
            return
        layout.activate()
        width = window.width()
        needed = (layout.totalHeightForWidth(width) if layout.hasHeightForWidth()
                  else layout.totalMinimumSize().height())
        needed = max(needed, layout.totalMinimumSize().height())
        if needed != window.minimumHeight():
            window.setMinimumHeight(needed)  # grows the window when it is shorter
        if window.height() < needed:
            window.resize(width, needed)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self.window and event.type() in (QEvent.Type.LayoutRequest,
                                                       QEvent.Type.Resize):
            self.fit()
        return False


def fit_to_content(window: QWidget, width: int) -> ContentHeight:
    """`window` at `width`, as tall as its content needs, and kept so."""
    window.resize(width, 1)
    return ContentHeight(window)
