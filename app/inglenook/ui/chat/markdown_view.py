"""A read-only, self-sizing rich-text view for one chat bubble.

Model output is hostile, so the view never loads a resource (local file, qrc or network), never
follows a link by itself, and opens web links only after the user confirms.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from PySide6.QtCore import QSize, Qt, QUrl, Signal
from PySide6.QtGui import (
    QDesktopServices,
    QGuiApplication,
    QImage,
    QPalette,
    QResizeEvent,
    QTextDocument,
    QWheelEvent,
)
from PySide6.QtWidgets import QFrame, QMessageBox, QSizePolicy, QTextBrowser, QWidget

from inglenook.ui.chat.markdown import DEFAULT_PALETTE, MarkdownPalette, render

log = logging.getLogger(__name__)

OPENABLE_SCHEMES = frozenset({"http", "https", "mailto"})


def _inert_resource(type: int) -> Any:
    # When an image resource comes back empty, Qt's image handler loads the file by name itself,
    # so images get a blank placeholder; other resource types have no such fallback.
    if type == QTextDocument.ResourceType.ImageResource:
        image = QImage(1, 1, QImage.Format.Format_ARGB32)
        image.fill(Qt.GlobalColor.transparent)
        return image
    return None


class _InertDocument(QTextDocument):
    """A document that resolves no resources.

    The stock QTextDocument.loadResource reads local files (e.g. `<link type="text/css">`)
    itself when its parent returns nothing, so overriding the browser's alone is not enough.
    """

    def loadResource(self, type: int, name: QUrl) -> Any:
        return _inert_resource(type)


class MarkdownView(QTextBrowser):
    """Shows one message's Markdown; grows to fit its content for the width it is given.

    Signals:
        code_copied: the source of code block N was put on the clipboard.
            arg: the block's index in this message.
        link_opened: a link was handed to the desktop after the user confirmed it.
            arg: the URL opened.
    """

    code_copied = Signal(int)
    link_opened = Signal(QUrl)

    def __init__(
        self, parent: QWidget | None = None, palette: MarkdownPalette = DEFAULT_PALETTE
    ) -> None:
        super().__init__(parent)
        self._md_palette = palette
        self._markdown = ""
        self._html = ""
        self._code_blocks: tuple[str, ...] = ()
        self._hfw_cache: dict[int, int] = {}

        doc = _InertDocument(self)
        doc.setDocumentMargin(2)  # the bubble pads; just keep selection highlights unclipped
        self.setDocument(doc)
        doc.contentsChanged.connect(self._hfw_cache.clear)
        doc.documentLayout().documentSizeChanged.connect(self._on_size_changed)

        self.setOpenLinks(False)
        self.setOpenExternalLinks(False)
        self.setReadOnly(True)
        self.setAcceptDrops(False)
        self.setUndoRedoEnabled(False)
        self.setTextInteractionFlags(
            Qt.TextInteractionFlag.TextBrowserInteraction
            | Qt.TextInteractionFlag.TextSelectableByKeyboard
        )
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setContentsMargins(0, 0, 0, 0)
        self.setViewportMargins(0, 0, 0, 0)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        pal = self.palette()
        pal.setColor(QPalette.ColorRole.Base, Qt.GlobalColor.transparent)
        self.setPalette(pal)
        self.viewport().setAutoFillBackground(False)
        policy = QSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        policy.setHeightForWidth(True)
        self.setSizePolicy(policy)

        self.anchorClicked.connect(self._on_anchor_clicked)

    # --- content -------------------------------------------------------------------------

    def markdown(self) -> str:
        return self._markdown

    def code_blocks(self) -> tuple[str, ...]:
        return self._code_blocks

    def set_markdown(self, text: str) -> None:
        """Show `text`; call again with the longer text as a reply streams in."""
        if text == self._markdown:
            return
        rendered = render(text, self._md_palette)
        self._markdown = text
        self._code_blocks = rendered.code_blocks
        if rendered.html == self._html:
            return  # e.g. trailing whitespace streamed in: skip the re-layout
        self._html = rendered.html
        # setHtml resets the cursor; keep a selection the user is making while tokens arrive.
        cursor = self.textCursor()
        anchor, position = cursor.anchor(), cursor.position()
        self.setHtml(rendered.html)
        if anchor != position:
            last = self.document().characterCount() - 1
            cursor = self.textCursor()
            cursor.setPosition(min(anchor, last))
            cursor.setPosition(min(position, last), cursor.MoveMode.KeepAnchor)
            self.setTextCursor(cursor)

    def loadResource(self, type: int, name: QUrl) -> Any:
        return _inert_resource(type)  # never read files, qrc or the network for model output

    # --- sizing ----------------------------------------------------------------------------

    def hasHeightForWidth(self) -> bool:
        return True

    def heightForWidth(self, width: int) -> int:
        margins = self.contentsMargins()
        text_width = max(1, width - margins.left() - margins.right())
        doc = self.document()
        if math.isclose(doc.textWidth(), text_width):
            height = doc.size().height()
        else:
            cached = self._hfw_cache.get(text_width)
            if cached is not None:
                return cached
            # Lay out a copy: re-wrapping the live document would repaint it at the wrong width.
            probe = doc.clone()
            probe.setTextWidth(text_width)
            height = probe.size().height()
        result = math.ceil(height) + margins.top() + margins.bottom()
        self._hfw_cache[text_width] = result
        return result

    def sizeHint(self) -> QSize:
        hint = super().sizeHint()
        width = self.width() if self.width() > 0 else hint.width()
        return QSize(hint.width(), self.heightForWidth(width))

    def minimumSizeHint(self) -> QSize:
        return QSize(super().minimumSizeHint().width(), 0)

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        if event.oldSize().width() != event.size().width():
            self.updateGeometry()

    def _on_size_changed(self) -> None:
        self._hfw_cache.clear()
        self.updateGeometry()

    def wheelEvent(self, event: QWheelEvent) -> None:
        event.ignore()  # the view never scrolls itself; let the chat's scroll area have it

    # --- links -----------------------------------------------------------------------------

    def confirm_open(self, url: QUrl) -> bool:
        """Ask before leaving the app. Tests replace this (on the instance or a subclass)."""
        box = QMessageBox(self)
        box.setIcon(QMessageBox.Icon.Question)
        box.setWindowTitle("Open link")
        box.setTextFormat(Qt.TextFormat.PlainText)  # the URL comes from the model
        box.setText(f"Open this link in your browser?\n\n{_shown(url)}")
        box.setStandardButtons(QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No)
        box.setDefaultButton(QMessageBox.StandardButton.No)
        return box.exec() == QMessageBox.StandardButton.Yes

    def _on_anchor_clicked(self, url: QUrl) -> None:
        scheme = url.scheme().lower()
        if scheme == "copy":
            self._copy_block(url.path())
        elif scheme in OPENABLE_SCHEMES and url.isValid():
            if self.confirm_open(url):
                QDesktopServices.openUrl(url)
                self.link_opened.emit(url)
        else:
            log.debug("Not opening link with scheme %r", scheme)

    def _copy_block(self, index_text: str) -> None:
        if not index_text.isdigit() or int(index_text) >= len(self._code_blocks):
            return
        index = int(index_text)
        QGuiApplication.clipboard().setText(self._code_blocks[index])
        self.code_copied.emit(index)


def _shown(url: QUrl) -> str:
    # Fully encoded, so look-alike Unicode hosts and hidden characters show as what they are.
    return bytes(url.toEncoded().data()).decode("ascii", "replace")
