"""A dialog's first size: what it would like, within the window it opens over and the screen.

A Models dialog of 1040 × 680 over a 700 × 600 window hid the window and ran off a small
screen; a dialog opened no larger than its window stays over it, and can be made larger."""

from __future__ import annotations

from PySide6.QtWidgets import QWidget


def fit_in_window(dialog: QWidget, width: int, height: int) -> None:
    """Resize `dialog` to `width` × `height`, or less: no larger than the window of its parent
    (when it has one) nor the screen's free area, and never below its own minimum."""
    parent = dialog.parentWidget()
    limits = [parent.window().size()] if parent is not None else []
    screen = (parent or dialog).screen()
    if screen is not None:
        limits.append(screen.availableGeometry().size())
    for limit in limits:
        width, height = min(width, limit.width()), min(height, limit.height())
    least = dialog.minimumSizeHint().expandedTo(dialog.minimumSize())
    dialog.resize(max(width, least.width()), max(height, least.height()))
