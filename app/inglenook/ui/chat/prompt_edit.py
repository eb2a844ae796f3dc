"""The prompt box: Enter sends, Shift+Enter is a newline, Esc stops; files (and images) pasted or
dropped on it are handed to the composer, text is typed in.

A paste (or drop) that would make the prompt longer than MAX_PROMPT_CHARS is refused with a
message, and the draft stays as it was: a 20 MB paste used to keep the window busy for a minute
and a half, and no local model's context holds that much anyway. Text with a very long run of
characters without a space (base64, minified code) switches the box to wrapping anywhere: Qt's
usual line breaking takes time quadratic in such a run (48 s for a 1 MB line).

A pasted image is handed on as the bytes of its file (image/png, image/jpeg… as the clipboard
holds them), never decoded here: the composer decodes it off the GUI thread with the bounds of
an attached file, so a 12 MP screenshot or a 30,000 × 30,000 bomb costs this thread nothing.
Only a clipboard that offers no encoded format (Qt's own image alone) is read as a QImage, which
Qt's allocation limit bounds (ui/app.py).
"""

from __future__ import annotations

import re
from pathlib import Path

from PySide6.QtCore import QMimeData, QSize, Qt, QUrl, Signal
from PySide6.QtGui import QImage, QKeyEvent, QTextOption
from PySide6.QtWidgets import QPlainTextEdit, QSizePolicy, QWidget

MAX_LINES = 8
MAX_PROMPT_CHARS = 1_000_000
_LONG_RUN = re.compile(r"\S{2000}")
MAX_PASTED_PATHS = 20  # more lines than this is text that happens to name files, not a list
# Encoded images a clipboard may hold, the most common first (what browsers, screenshot tools
# and image editors offer: Qt names the platforms' types so).
IMAGE_FORMATS = ("image/png", "image/jpeg", "image/webp", "image/gif", "image/bmp")


def _local_files(source: QMimeData) -> bool:
    return source.hasUrls() and bool(source.urls()) and all(
        url.isLocalFile() for url in source.urls())


def files_in(source: QMimeData) -> list[str]:
    """Local files a drop or paste carries: file URLs (a file manager's copy or drag), or text
    that is nothing but paths of existing files, one a line (a copied path). [] otherwise,
    and for models (.gguf), which the window takes into the library (ui/window/drops.py)."""
    if source.hasUrls():
        if not _local_files(source):
            return []
        paths = [url.toLocalFile() for url in source.urls()]
        return [] if any(p.lower().endswith(".gguf") for p in paths) else paths
    if not source.hasText():
        return []
    lines = [line.strip().strip("'\"") for line in source.text().splitlines() if line.strip()]
    if not lines or len(lines) > MAX_PASTED_PATHS:
        return []
    paths = []
    for line in lines:
        if line.startswith("file://"):
            line = QUrl(line).toLocalFile()
        path = Path(line).expanduser()
        if not path.is_absolute() or not path.is_file():
            return []
        paths.append(str(path))
    return paths


def _has_image(source: QMimeData) -> bool:
    return source.hasImage() or any(source.hasFormat(f) for f in IMAGE_FORMATS)


class PromptEdit(QPlainTextEdit):
    """A text box that grows with its content up to MAX_LINES.

    Signals:
        submit(): Enter without Shift.
        escape(): Esc.
        paste_refused(int): a paste or drop of this many characters was refused: with the
            draft, the prompt would have been longer than MAX_PROMPT_CHARS.
        files_dropped(list): a paste or drop of files (their paths), not text.
        image_pasted(object): a paste of an image (a screenshot, a copied picture): the bytes
            of its file as (bytes, MIME type), not decoded; a QImage when the clipboard holds
            no encoded image.
        page(int): PageUp (-1) or PageDown (1) in a draft too short to scroll: the chat scrolls.
    """

    submit = Signal()
    escape = Signal()
    paste_refused = Signal(int)
    files_dropped = Signal(list)
    image_pasted = Signal(object)
    page = Signal(int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("promptEdit")
        self.setAccessibleName("Message")
        self.setToolTip("Your message: Enter sends, Shift+Enter starts a new line")
        self.setPlaceholderText("Ask anything…")  # the tooltip says how Enter works
        self.setTabChangesFocus(True)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.document().contentsChanged.connect(self.updateGeometry)
        self.document().contentsChanged.connect(self._on_contents_changed)

    def canInsertFromMimeData(self, source: QMimeData) -> bool:
        if files_in(source) or (_has_image(source) and not source.hasText()):
            return True
        # Local files that are not for a message (models): ignored, so the window takes them.
        return not _local_files(source) and super().canInsertFromMimeData(source)

    def insertFromMimeData(self, source: QMimeData) -> None:
        files = files_in(source)
        if files:
            self.files_dropped.emit(files)
            return
        if _local_files(source):
            return
        if _has_image(source) and not source.hasText():  # text wins: an office copy has both
            encoded = next((f for f in IMAGE_FORMATS if source.hasFormat(f)), "")
            if encoded:  # the file's bytes: a copy, not a decode
                self.image_pasted.emit((bytes(source.data(encoded).data()), encoded))
                return
            image = source.imageData()
            if isinstance(image, QImage):
                self.image_pasted.emit(image)
            return
        if source.hasText():
            text = source.text()
            if len(text) + self.document().characterCount() > MAX_PROMPT_CHARS:
                self.paste_refused.emit(len(text))
                return
            if _LONG_RUN.search(text):
                self.setWordWrapMode(QTextOption.WrapMode.WrapAnywhere)
        super().insertFromMimeData(source)

    def _on_contents_changed(self) -> None:
        if self.document().isEmpty():  # sent or cleared: back to breaking lines between words
            self.setWordWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)

    def keyPressEvent(self, event: QKeyEvent) -> None:
        key = event.key()
        if key in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            if not event.modifiers() & Qt.KeyboardModifier.ShiftModifier:
                self.submit.emit()
                return
            self.insertPlainText("\n")
            return
        if key == Qt.Key.Key_Escape:
            self.escape.emit()
            return
        if key in (Qt.Key.Key_PageUp, Qt.Key.Key_PageDown) \
                and self.verticalScrollBar().maximum() == 0:
            self.page.emit(-1 if key == Qt.Key.Key_PageUp else 1)
            return
        super().keyPressEvent(event)

    def sizeHint(self) -> QSize:
        line = self.fontMetrics().lineSpacing()
        lines = max(1, min(MAX_LINES, int(self.document().size().height())))
        margins = self.contentsMargins()
        height = lines * line + 2 * int(self.document().documentMargin())
        return QSize(400, height + margins.top() + margins.bottom() + 4)

    def minimumSizeHint(self) -> QSize:
        # QAbstractScrollArea's own minimum is ~5 lines; one line is the right minimum here,
        # and a narrow one: the window must fit 700 px.
        return QSize(120, self.sizeHint().height())
