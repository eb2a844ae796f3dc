"""Files dropped anywhere on the window: a .gguf goes into the library, other local files (an
image, a document) onto the draft, as if dropped on the composer."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QEvent, QMimeData, QObject
from PySide6.QtGui import QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import QWidget

from inglenook.ui.chat.prompt_edit import files_in


def gguf_paths(data: QMimeData) -> list[str]:
    """Local .gguf files among the dropped URLs (other files are for the composer)."""
    if not data.hasUrls():
        return []
    return [url.toLocalFile() for url in data.urls()
            if url.isLocalFile() and url.toLocalFile().lower().endswith(".gguf")]


def message_files(data: QMimeData) -> list[str]:
    """Dropped files for the draft: local files, none of them a model (drops of text are not
    files: they go where they are dropped, the prompt box, or nowhere)."""
    return files_in(data) if data.hasUrls() else []


class _Drops(QObject):
    def __init__(self, window: QWidget, on_model: Callable[[str], None],
                 on_files: Callable[[list[str]], None] | None) -> None:
        super().__init__(window)
        self._on_model, self._on_files = on_model, on_files

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if not isinstance(event, (QDragEnterEvent, QDropEvent)):
            return False
        data = event.mimeData()
        models = gguf_paths(data)
        files = message_files(data) if self._on_files is not None and not models else []
        if not (models or files):
            return False
        event.acceptProposedAction()
        if isinstance(event, QDropEvent) and event.type() == QEvent.Type.Drop:
            for path in models:
                self._on_model(path)
            if files and self._on_files is not None:
                self._on_files(files)
        return True


def accept_drops(window: QWidget, on_model: Callable[[str], None],
                 on_files: Callable[[list[str]], None] | None = None) -> QObject:
    """Returns the filter: keep a reference (Python must not collect its methods)."""
    window.setAcceptDrops(True)
    drops = _Drops(window, on_model, on_files)
    window.installEventFilter(drops)
    return drops
