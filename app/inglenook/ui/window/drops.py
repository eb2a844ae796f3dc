"""A .gguf file dropped anywhere on the window goes into the library."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QEvent, QMimeData, QObject
from PySide6.QtGui import QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import QWidget


def gguf_paths(data: QMimeData) -> list[str]:
    """Local .gguf files among the dropped URLs (other files are for the composer)."""
    if not data.hasUrls():
        return []
    return [url.toLocalFile() for url in data.urls()
            if url.isLocalFile() and url.toLocalFile().lower().endswith(".gguf")]


class _GgufDrops(QObject):
    def __init__(self, window: QWidget, on_file: Callable[[str], None]) -> None:
        super().__init__(window)
        self._on_file = on_file

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if isinstance(event, (QDragEnterEvent, QDropEvent)) and gguf_paths(event.mimeData()):
            event.acceptProposedAction()
            if isinstance(event, QDropEvent) and event.type() == QEvent.Type.Drop:
                for path in gguf_paths(event.mimeData()):
                    self._on_file(path)
            return True
        return False


def accept_gguf_drops(window: QWidget, on_file: Callable[[str], None]) -> QObject:
    """Returns the filter: keep a reference (Python must not collect its methods)."""
    window.setAcceptDrops(True)
    drops = _GgufDrops(window, on_file)
    window.installEventFilter(drops)
    return drops
