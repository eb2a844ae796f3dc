"""Keys a widget keeps for itself although the window has a shortcut on them (Esc stops the
reply window-wide, but Esc in an editor cancels the edit)."""

from __future__ import annotations

from PySide6.QtCore import QEvent, Qt
from PySide6.QtGui import QKeyEvent


def keeps_key(event: QEvent, *keys: Qt.Key) -> bool:
    """True (and the event accepted) when `event` asks whether a shortcut may take one of
    `keys`: the widget's keyPressEvent gets it instead. Call it first in `event()`."""
    if event.type() == QEvent.Type.ShortcutOverride and isinstance(event, QKeyEvent) \
            and event.key() in keys:
        event.accept()
        return True
    return False
