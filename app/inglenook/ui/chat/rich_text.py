"""A light widget that paints a stack of QTextDocuments and lets the user select and click.

Why not QTextBrowser for each chat message: a QTextBrowser is a scroll area with a viewport, two
scroll bars and a text control, ~110 KB per message under the app's style sheet, and its
height-for-width needs the document laid out at every width a layout asks about. This is one
plain widget that paints its documents and does what a message needs: select text (drag,
double-click a word, Shift+click, Ctrl+A), copy it (Ctrl+C, context menu, X11 primary
selection), and click links (`anchorClicked`; the subclass decides what a link does).

Layout is the expensive part, so a document is only ever laid out at the widget's own width.
Layouts also ask for heights at widths the widget never gets (while computing size hints);
those get an estimate scaled from the real layout. When the widget is resized, it lays out at
the new width and asks its layout for another pass with the exact height. A long message is a
stack of parts: after a width change, the parts in view are laid out at once and the others
keep an estimated height until later turns of the event loop (`SLICE_S` of work per turn).

Its documents (text_part.py) never load resources: the stock QTextDocument reads local files.

Code is not wrapped: each code block wider than the view scrolls sideways on its own
(code_scroll.py).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from PySide6.QtCore import QEvent, QPoint, QRect, QRectF, QSize, Qt, QTimer, QUrl, Signal
from PySide6.QtGui import (
    QAbstractTextDocumentLayout,
    QContextMenuEvent,
    QFontMetricsF,
    QGuiApplication,
    QKeyEvent,
    QKeySequence,
    QMouseEvent,
    QPainter,
    QPaintEvent,
    QPalette,
    QResizeEvent,
    QTextCharFormat,
    QTextCursor,
    QTextDocument,
    QWheelEvent,
)
from PySide6.QtWidgets import QApplication, QMenu, QSizePolicy, QWidget

from inglenook.ui.chat.code_scroll import DOC_MARGIN, BandKey, CodeScroller
from inglenook.ui.chat.markdown import ZWSP
from inglenook.ui.chat.text_part import InertDocument, TextPart, inert_resource, text_cursor
from inglenook.ui.chat.text_selection import Position, Selection, link_rect

SLICE_S = 0.03  # GUI-thread layout work per turn of the event loop for a long message
SYNC_PARTS = 3  # up to this many parts are always laid out at once
KEEP_PARTS = 8  # a message with more parts releases the documents of those far out of view



class RichTextView(QWidget):
    """Paints its documents one under the other; its height follows its width.

    Signals:
        anchorClicked(QUrl): a link was clicked (pressed and released on the same link).
    """

    anchorClicked = Signal(QUrl)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._parts: list[TextPart] = [self._new_part("")]
        self._note: TextPart | None = None  # a last document outside the text (not copied)
        self._sized = False  # a layout has given the widget its width
        self._exact: int | None = None  # the height at the widget's width, once known
        self._relayout: QTimer | None = None
        self._release: QTimer | None = None
        self._selection = Selection()
        self._press: tuple[QPoint, str] | None = None
        self._dragging = False
        self._code = CodeScroller(self.width, self.update)
        self.setMouseTracking(True)  # pointing-hand cursor over links
        self.setFocusPolicy(Qt.FocusPolicy.ClickFocus)  # Ctrl+C after selecting
        self.setCursor(Qt.CursorShape.IBeamCursor)
        policy = QSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        policy.setHeightForWidth(True)
        self.setSizePolicy(policy)

    # --- documents -----------------------------------------------------------------------

    def document(self) -> QTextDocument:
        """The first (usually the only) document."""
        return self._parts[0].doc

    def setHtml(self, html: str) -> None:
        """Show `html` in one document."""
        self._set_parts([html])

    def toHtml(self) -> str:
        return "".join(part.doc.toHtml() for part in self._parts)

    def toPlainText(self) -> str:
        return "\n".join(part.plain_text() for part in self._parts).replace(ZWSP, "")

    def loadResource(self, type: int, name: QUrl) -> Any:
        return inert_resource(type)

    def _new_doc(self) -> QTextDocument:
        doc = InertDocument(self)
        doc.setUndoRedoEnabled(False)
        doc.setDocumentMargin(DOC_MARGIN)
        doc.setDefaultFont(self.font())
        return doc

    def _new_part(self, html: str) -> TextPart:
        part = TextPart(self._new_doc, html)
        part.doc  # noqa: B018 - made now: a new part is shown next
        return part

    def _set_part(self, index: int, html: str) -> None:
        """Put `html` in part `index` (a new part just past the end)."""
        if index == len(self._parts):
            self._parts.append(self._new_part(html))
        elif self._parts[index].html != html:
            self._parts[index].set_html(html)
        else:
            return
        self._selection.clamp(self._parts)
        self._changed()

    def _set_parts(self, htmls: list[str]) -> None:
        """Show these documents; keeps a selection the user is making while text streams."""
        for index, html in enumerate(htmls):
            self._set_part(index, html)
        self._drop_parts(max(1, len(htmls)))

    def _drop_parts(self, keep: int) -> None:
        if len(self._parts) > keep:
            for part in self._parts[keep:]:
                part.release()
            del self._parts[keep:]
            self._selection.clamp(self._parts)
            self._changed()

    def _set_note(self, html: str | None) -> None:
        if html is None:
            if self._note is not None:
                self._note.release()
                self._note = None
                self._changed()
            return
        if self._note is None:
            self._note = self._new_part("")
        self._note.set_html(html)
        self._changed()

    def _changed(self) -> None:
        self._exact = None
        self.updateGeometry()
        self.update()

    # --- layout --------------------------------------------------------------------------

    def _stack(self) -> list[TextPart]:
        return self._parts + ([self._note] if self._note is not None else [])

    def _layout(self, width: int, deadline: float | None = None) -> int:
        """Lay the parts out at `width` and stack them; returns the total height.

        With many parts, past `deadline` only the parts in view are laid out; the others keep
        an estimate and are laid out in later turns of the event loop."""
        text_width = float(max(1, width))
        parts = self._stack()
        if deadline is None and len(parts) > SYNC_PARTS:
            deadline = time.perf_counter() + SLICE_S
        visible = self.visibleRegion().boundingRect()
        top = 0.0
        pending = False
        for part in parts:
            if part.width != text_width:
                in_view = visible.intersects(
                    QRect(0, int(top), int(text_width), int(max(part.height, 1))))
                if in_view or deadline is None or (
                        part.loaded and time.perf_counter() < deadline):
                    part.lay_out(text_width)
                else:  # a released part stays so until it is painted
                    part.height = self._estimate(part, text_width)
                    part.width = -text_width
                    pending = pending or part.loaded
            part.top = round(top)
            top += part.height
        if pending:
            if self._relayout is None:
                self._relayout = QTimer(self)
                self._relayout.setSingleShot(True)
                self._relayout.timeout.connect(self._continue_layout)
            self._relayout.start(0)
        return int(top + 0.999)

    def _continue_layout(self) -> None:
        if self._sized and any(p.width != self.width() for p in self._stack()):
            self._layout(self.width(), time.perf_counter() + SLICE_S)
            self._changed()

    def _release_far(self) -> None:
        """Release the documents of parts far out of view (their layout is most of a long
        message's memory); painting or clicking makes them again."""
        if len(self._parts) <= KEEP_PARTS:
            return
        visible = self.visibleRegion().boundingRect()
        margin = 2 * max(visible.height(), 600)
        top = 0
        for part in self._parts:
            part.top, top = top, top + round(part.height)  # parts may have arrived since
            if part.loaded and (visible.isEmpty() or part.top > visible.bottom() + margin
                                or part.top + part.height < visible.top() - margin):
                part.release()

    def _estimate(self, part: TextPart, width: float) -> float:
        if part.width and part.height:  # scaled from its last layout: text re-wraps
            return max(part.height * abs(part.width) / width, 1.0)
        metrics = QFontMetricsF(self.font())
        doc = part.doc
        lines = doc.blockCount() + part.chars * metrics.averageCharWidth() / width
        return lines * metrics.lineSpacing() + 2 * doc.documentMargin()

    def hasHeightForWidth(self) -> bool:
        return True

    def heightForWidth(self, width: int) -> int:
        if self._sized and width == self.width():
            if self._exact is None:
                self._exact = self._layout(width)
            return self._exact
        # A width this widget does not have (yet): an estimate; resizeEvent makes it exact.
        return int(sum(self._estimate(p, float(max(1, width))) if p.width != width else p.height
                       for p in self._stack()) + 0.999)

    def sizeHint(self) -> QSize:
        width = self.width() if self._sized else 400
        return QSize(width, self.heightForWidth(width))

    def minimumSizeHint(self) -> QSize:
        return QSize(60, 0)

    def resizeEvent(self, event: QResizeEvent) -> None:
        if event.oldSize().width() != event.size().width() or not self._sized:
            self._sized = True
            self._exact = self._layout(event.size().width())
            if self._exact != event.size().height():
                self.updateGeometry()  # another layout pass, with the exact height

    def changeEvent(self, event: QEvent) -> None:
        if event.type() == QEvent.Type.FontChange:
            for part in self._stack():
                if part.loaded:
                    part.doc.setDefaultFont(self.font())
                part.width = -abs(part.width)
            self._changed()
        super().changeEvent(event)

    # --- painting ------------------------------------------------------------------------

    def paintEvent(self, event: QPaintEvent) -> None:
        width = float(max(1, self.width()))
        exposed = event.rect()
        painter = QPainter(self)
        palette = QPalette(self.palette())
        palette.setColor(QPalette.ColorRole.Text, self.palette().color(self.foregroundRole()))
        highlight = QTextCharFormat()
        highlight.setBackground(palette.color(QPalette.ColorRole.Highlight))
        highlight.setForeground(palette.color(QPalette.ColorRole.HighlightedText))
        restack = False
        for index, part in enumerate(self._stack()):
            if part.top > exposed.bottom() or part.top + part.height < exposed.top():
                continue
            if part.width != width:  # scrolled into view before its turn: lay it out now
                part.lay_out(width)
                restack = True
            context = QAbstractTextDocumentLayout.PaintContext()
            context.palette = palette
            clip = QRectF(exposed.translated(0, -part.top))
            span = self._selection.span(index, self._parts)
            if span is not None:
                selection = QAbstractTextDocumentLayout.Selection()
                selection.cursor = text_cursor(part.doc, span)
                selection.format = highlight
                context.selections = [selection]
            painter.save()
            painter.translate(0, part.top)
            self._code.paint(painter, index, part, clip, context)
            painter.restore()
        painter.end()
        if restack:
            self._exact = None
            self.updateGeometry()
        if len(self._parts) > KEEP_PARTS:
            if self._release is None:
                self._release = QTimer(self)
                self._release.setSingleShot(True)
                self._release.setInterval(500)
                self._release.timeout.connect(self._release_far)
            self._release.start()  # once scrolling has settled

    # --- wide code blocks ----------------------------------------------------------------

    def scroll_code(self, key: BandKey, offset: float) -> None:
        """Scroll wide code block `key` (part, which) to `offset` pixels from its start."""
        self._code.scroll(key, offset)

    def code_offset(self, key: BandKey) -> float:
        """How far wide code block `key` is scrolled (0 when it fits or is not laid out)."""
        return self._code.offset(self._parts, key)

    def wheelEvent(self, event: QWheelEvent) -> None:
        if self._code.wheel(self._parts, event):
            event.accept()
        else:
            event.ignore()  # the chat scrolls

    # --- selection -----------------------------------------------------------------------

    def has_selection(self) -> bool:
        return self._selection.active

    def selected_text(self) -> str:
        return self._selection.text(self._parts)

    def select(self, anchor: int, position: int, part: int = 0) -> None:
        """Select from `anchor` to `position` (character positions in one part)."""
        self._selection.set((part, anchor), (part, position))
        self._selection.clamp(self._parts)
        self.update()

    def find_words(self, words: Sequence[str]) -> bool:
        """Select the first place any of `words` occurs (case and accents as typed are
        ignored the way QTextDocument.find does); False when none does."""
        for index, part in enumerate(self._parts):
            for word in words:
                found = part.doc.find(word) if word else None
                if found is not None and not found.isNull():
                    self.select(found.selectionStart(), found.selectionEnd(), index)
                    return True
        return False

    def select_all(self) -> None:
        self._selection.everything(self._parts)
        self.update()

    def copy(self) -> None:
        if self.has_selection():
            QGuiApplication.clipboard().setText(self.selected_text())

    def _hit(self, point: QPoint) -> Position:
        index = 0
        for i, part in enumerate(self._parts):
            if point.y() >= part.top:
                index = i
        part = self._parts[index]
        local = self._code.to_doc(index, part, point)
        return index, max(0, part.doc.documentLayout().hitTest(local, Qt.HitTestAccuracy.FuzzyHit))

    def anchor_at(self, point: QPoint) -> str:
        """The link under `point`, in widget coordinates ("" if none)."""
        for index, part in enumerate(self._stack()):
            if part.top <= point.y() < part.top + part.height:
                return part.doc.documentLayout().anchorAt(self._code.to_doc(index, part, point))
        return ""

    def anchor_rect(self, href: str) -> QRectF:
        """Where the first link to `href` is drawn, in widget coordinates (empty if none)."""
        return link_rect(self._stack(), href)

    # --- mouse and keyboard --------------------------------------------------------------

    def mousePressEvent(self, event: QMouseEvent) -> None:
        if event.button() != Qt.MouseButton.LeftButton:
            event.ignore()
            return
        point = event.position().toPoint()
        if self._code.press(self._parts, point):
            return
        hit = self._hit(point)
        self._press = (point, self.anchor_at(point))
        self._dragging = False
        if event.modifiers() & Qt.KeyboardModifier.ShiftModifier and \
                self._selection.anchor is not None:
            self._selection.cursor = hit
        else:
            self._selection.set(hit, hit)
        self.update()

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        point = event.position().toPoint()
        if self._code.drag(point):
            return
        if self._press is not None and event.buttons() & Qt.MouseButton.LeftButton:
            distance = (point - self._press[0]).manhattanLength()
            if self._dragging or distance >= QApplication.startDragDistance():
                self._dragging = True
                self._selection.cursor = self._hit(point)
                self.update()
            return
        self.setCursor(Qt.CursorShape.ArrowCursor if self._code.on_bar(self._parts, point)
                       else Qt.CursorShape.PointingHandCursor if self.anchor_at(point)
                       else Qt.CursorShape.IBeamCursor)

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:
        if event.button() == Qt.MouseButton.LeftButton and self._code.release():
            return
        if event.button() != Qt.MouseButton.LeftButton or self._press is None:
            event.ignore()
            return
        pressed_on = self._press[1]
        self._press = None
        if self._dragging:
            clipboard = QGuiApplication.clipboard()
            if clipboard.supportsSelection() and self.has_selection():
                clipboard.setText(self.selected_text(), clipboard.Mode.Selection)
        elif pressed_on and self.anchor_at(event.position().toPoint()) == pressed_on:
            self.anchorClicked.emit(QUrl(pressed_on))

    def mouseDoubleClickEvent(self, event: QMouseEvent) -> None:
        if event.button() != Qt.MouseButton.LeftButton:
            event.ignore()
            return
        index, pos = self._hit(event.position().toPoint())
        cursor = QTextCursor(self._parts[index].doc)
        cursor.setPosition(pos)
        cursor.select(QTextCursor.SelectionType.WordUnderCursor)
        self._selection.set((index, cursor.anchor()), (index, cursor.position()))
        self._press = None
        self.update()

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if event.matches(QKeySequence.StandardKey.Copy):
            self.copy()
        elif event.matches(QKeySequence.StandardKey.SelectAll):
            self.select_all()
        else:
            super().keyPressEvent(event)

    def contextMenuEvent(self, event: QContextMenuEvent) -> None:
        menu = QMenu(self)
        menu.addAction("Copy", self.copy).setEnabled(self.has_selection())
        menu.addAction("Select all", self.select_all)
        self._extend_menu(menu, self.anchor_at(event.pos()))
        menu.exec(event.globalPos())
        menu.deleteLater()

    def _extend_menu(self, menu: QMenu, href: str) -> None:
        """Add actions for the link under the mouse (`href` may be empty)."""

