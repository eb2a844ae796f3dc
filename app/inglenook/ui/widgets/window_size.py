"""A dialog's first size: what it would like, within the window it opens over and the screen.

A Models dialog of 1040 × 680 over a 700 × 600 window hid the window and ran off a small
screen; a dialog opened no larger than its window stays over it, and can be made larger. A
window of its own leaves room for the frame the window manager adds (before it is shown Qt
cannot say how tall that is): on a 1280 × 800 screen the main window's status bar ran off the
bottom."""

from __future__ import annotations

from PySide6.QtCore import QMargins, QSize
from PySide6.QtWidgets import QWidget

FRAME = QSize(16, 48)  # a title bar and borders, generously


def fit_in_window(dialog: QWidget, width: int, height: int) -> None:
    """Resize `dialog` to `width` × `height`, or less: no larger than the window of its parent
    (when it has one) nor the screen's free area, and never below its own minimum."""
    parent = dialog.parentWidget()
    limits = [parent.window().size()] if parent is not None else []
    screen = (parent or dialog).screen()
    if screen is not None:
        free = screen.availableGeometry().size()
        limits.append(free if parent is not None else free.shrunkBy(
            QMargins(0, 0, FRAME.width(), FRAME.height())))
    for limit in limits:
        width, height = min(width, limit.width()), min(height, limit.height())
    least = dialog.minimumSizeHint().expandedTo(dialog.minimumSize())
    dialog.resize(max(width, least.width()), max(height, least.height()))
