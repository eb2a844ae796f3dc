"""The documents a RichTextView paints: inert (they load nothing), and releasable.

Documents here never load resources: the stock QTextDocument would read local files itself.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QRectF, Qt, QUrl
from PySide6.QtGui import QImage, QTextCursor, QTextDocument, QTextTable


def text_cursor(doc: QTextDocument, span: tuple[int, int]) -> QTextCursor:
    """A cursor selecting `span` (start, end positions) of `doc`."""
    cursor = QTextCursor(doc)
    cursor.setPosition(span[0])
    cursor.setPosition(span[1], QTextCursor.MoveMode.KeepAnchor)
    return cursor


def inert_resource(type: int) -> Any:
    # When an image resource comes back empty, Qt's image handler loads the file by name itself,
    # so images get a blank placeholder; other resource types have no such fallback.
    if type == QTextDocument.ResourceType.ImageResource:
        image = QImage(1, 1, QImage.Format.Format_ARGB32)
        image.fill(Qt.GlobalColor.transparent)
        return image
    return None


class InertDocument(QTextDocument):
    """A document that resolves no resources.

    The stock QTextDocument.loadResource reads local files (e.g. `<link type="text/css">`)
    itself when nothing else answers, so a view cannot simply decline to load them.
    """

    def loadResource(self, type: int, name: QUrl | str) -> Any:
        return inert_resource(type)


class TextPart:
    """One document of the stack, where it sits and how tall it is. Its document can be
    released (a long message's parts far out of view) and is made again from `html` when next
    needed; `height` stays valid for `width` meanwhile."""

    __slots__ = ("_code_rects", "_doc", "_make", "chars", "height", "html", "top", "width")

    def __init__(self, make: Callable[[], QTextDocument], html: str) -> None:
        self._make = make
        self._doc: QTextDocument | None = None
        self.html = html
        self.chars = 1  # the document's character count (with the final paragraph separator)
        self.top = 0
        self.width = 0.0  # laid out at this width; negative: `height` is an estimate for -width
        self.height = 0.0
        self._code_rects: list[QRectF] | None = None

    @property
    def loaded(self) -> bool:
        return self._doc is not None

    @property
    def doc(self) -> QTextDocument:
        if self._doc is None:
            self._doc = self._make()
            if self.html:
                self._doc.setHtml(self.html.rstrip())  # a trailing newline would become a space
            if self.width > 0:
                self._doc.setTextWidth(self.width)  # laid out when drawn, as it was
            self.chars = self._doc.characterCount()
        return self._doc

    def set_html(self, html: str) -> None:
        self.html = html
        self._code_rects = None
        if self._doc is not None:
            self._doc.setHtml(html.rstrip())
            self.chars = self._doc.characterCount()
        self.width = -abs(self.width)  # keep the old height as an estimate

    def lay_out(self, width: float) -> None:
        doc = self.doc
        doc.setTextWidth(width)
        self.height = doc.size().height()
        self.width = width
        self._code_rects = None

    def code_rects(self) -> list[QRectF]:
        """Where the tables of unwrapped code are (markdown.py: `white-space:pre` in a one-cell
        table), in document coordinates; they may be wider than the text."""
        if self._code_rects is None:
            doc = self.doc
            layout = doc.documentLayout()
            rects = []
            for frame in doc.rootFrame().childFrames():
                if isinstance(frame, QTextTable) and frame.rows() == frame.columns() == 1:
                    cell = frame.cellAt(0, 0)
                    if cell.firstCursorPosition().block().blockFormat().nonBreakableLines():
                        # Qt's rect for a table starts at its first cell's content: step back
                        # over the padding (these tables have no border or spacing).
                        padding = cell.format().toTableCellFormat()
                        rects.append(layout.frameBoundingRect(frame).translated(
                            -padding.leftPadding(), -padding.topPadding()))
            self._code_rects = rects
        return self._code_rects

    def release(self) -> None:
        if self._doc is not None:
            self._doc.deleteLater()
            self._doc = None
            self._code_rects = None

    def plain_text(self, span: tuple[int, int] | None = None) -> str:
        """The text of the part, or of `span` in it, without keeping a released document."""
        doc = self._doc if self._doc is not None else self._make()
        if self._doc is None:
            doc.setHtml(self.html.rstrip())
        if span is None:
            text = doc.toPlainText()
        else:
            text = text_cursor(doc, span).selection().toPlainText()
        if doc is not self._doc:
            doc.deleteLater()
        return text
