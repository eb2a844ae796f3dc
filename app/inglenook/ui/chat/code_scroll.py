"""Sideways scrolling of the wide code blocks in a RichTextView's documents.

Code is not wrapped (markdown.py), so its table is laid out as wide as its longest line. Each
such table wider than the view (a "band") scrolls on its own: its rows are painted a second
time, shifted by its offset and clipped to the view; clicks and selection map through the same
offset; a thin bar in the table's bottom padding shows the position and can be dragged. A
horizontal wheel or touchpad swipe, or Shift+wheel, over the block scrolls it.

A QScrollArea per block would be exact, but a message is painted documents, not widgets (see
rich_text.py), and a block's text must stay selectable with the rest of the message.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from PySide6.QtCore import QPoint, QPointF, QRectF, Qt
from PySide6.QtGui import QAbstractTextDocumentLayout, QColor, QPainter, QWheelEvent

from inglenook.ui import theme
from inglenook.ui.chat.text_part import TextPart

DOC_MARGIN = 2  # the documents' margin (the bubble pads; this keeps selections unclipped)
BAR_HEIGHT = 4  # the scroll bar, inside the code table's bottom padding
BAR_ZONE = 12  # how far above the table's bottom edge a press grabs the bar
WHEEL_STEP = 48  # pixels per wheel notch

BandKey = tuple[int, int]  # (part, which wide code table of that part)


class CodeScroller:
    """The scroll offsets of one view's wide code blocks, and what they change: painting, hit
    tests, the wheel and the bars. `width` and `update` are the view's."""

    def __init__(self, width: Callable[[], int], update: Callable[[], None]) -> None:
        self._width = width
        self._update = update
        self._offsets: dict[BandKey, float] = {}
        self._drag: tuple[BandKey, QRectF, float, float] | None = None  # band, rect, x, offset

    # --- geometry ------------------------------------------------------------------------

    def bands(self, part: TextPart) -> list[tuple[int, QRectF]]:
        """The code tables of `part` wider than the view: (which, rect in document coords)."""
        if not part.loaded or part.width <= 0:
            return []
        limit = self._right() + 0.5
        return [(n, rect) for n, rect in enumerate(part.code_rects()) if rect.right() > limit]

    def _right(self) -> float:
        """Where the text ends on the right (and a table as wide as the text)."""
        return self._width() - DOC_MARGIN

    def _view(self, rect: QRectF) -> QRectF:
        """The part of the view where a wide table is shown."""
        return QRectF(rect.left(), rect.top(), max(0.0, self._right() - rect.left()),
                      rect.height())

    def _max(self, rect: QRectF) -> float:
        return max(0.0, rect.right() - self._right())

    def _offset(self, key: BandKey, rect: QRectF) -> float:
        return min(self._offsets.get(key, 0.0), self._max(rect))

    def _band_at(self, parts: Sequence[TextPart], point: QPoint,
                 ) -> tuple[BandKey, QRectF] | None:
        """The wide code block under `point` (widget coords), with its rect in widget coords."""
        for index, part in enumerate(parts):
            if part.top <= point.y() < part.top + part.height:
                for ordinal, rect in self.bands(part):
                    if self._view(rect).translated(0, part.top).contains(QPointF(point)):
                        return (index, ordinal), rect.translated(0, part.top)
                return None
        return None

    def _track(self, rect: QRectF) -> QRectF:
        """The scroll bar's track for a band `rect`, in the same coordinates."""
        return QRectF(rect.left() + 6, rect.bottom() - 4 - BAR_HEIGHT,
                      max(0.0, self._right() - rect.left() - 12), BAR_HEIGHT)

    def _thumb(self, rect: QRectF, offset: float) -> QRectF:
        track = self._track(rect)
        shown = self._right() - rect.left()
        length = max(24.0, track.width() * shown / max(1.0, rect.width()))
        travel = max(0.0, track.width() - length)
        x = track.left() + travel * offset / max(1.0, self._max(rect))
        return QRectF(x, track.top(), length, track.height())

    def to_doc(self, index: int, part: TextPart, point: QPoint | QPointF) -> QPointF:
        """`point` (widget coords) in the coordinates of part `index`'s document."""
        local = QPointF(point.x(), point.y() - part.top)
        for ordinal, rect in self.bands(part):
            if self._view(rect).contains(local):
                local.setX(local.x() + self._offset((index, ordinal), rect))
                break
        return local

    # --- painting ------------------------------------------------------------------------

    def paint(self, painter: QPainter, index: int, part: TextPart, clip: QRectF,
              context: QAbstractTextDocumentLayout.PaintContext) -> None:
        """Draw part `index` (the painter at its top) within `clip`, in its coordinates."""
        layout = part.doc.documentLayout()
        bands = self.bands(part)
        # Everything but the wide code blocks, strip by strip between them: a wide line costs
        # a glyph per character however little of it shows, so it is drawn only once.
        for strip in _strips(clip, [rect for _ordinal, rect in bands]):
            painter.setClipRect(strip)
            context.clip = strip
            layout.draw(painter, context)
        for ordinal, rect in bands:
            view = self._view(rect) & clip
            if view.isEmpty():
                continue
            offset = self._offset((index, ordinal), rect)
            painter.setClipRect(view)
            painter.translate(-offset, 0)
            context.clip = view.translated(offset, 0)
            layout.draw(painter, context)
            painter.translate(offset, 0)
            self._paint_bar(painter, rect, offset, (index, ordinal))

    def _paint_bar(self, painter: QPainter, rect: QRectF, offset: float, key: BandKey) -> None:
        colours = theme.current().colors
        dragged = self._drag is not None and self._drag[0] == key
        painter.save()
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(QColor(colours.scroll_handle_hover if dragged
                                else colours.scroll_handle))
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.drawRoundedRect(self._thumb(rect, offset), 2, 2)
        painter.restore()

    # --- scrolling -----------------------------------------------------------------------

    def scroll(self, key: BandKey, offset: float) -> None:
        self._offsets[key] = max(0.0, offset)
        self._update()

    def offset(self, parts: Sequence[TextPart], key: BandKey) -> float:
        """How far block `key` is scrolled (0 when it fits or is not laid out)."""
        rects = dict(self.bands(parts[key[0]])) if key[0] < len(parts) else {}
        return self._offset(key, rects[key[1]]) if key[1] in rects else 0.0

    def wheel(self, parts: Sequence[TextPart], event: QWheelEvent) -> bool:
        """Scroll the block under a sideways wheel turn; False when it is not for a block."""
        band = self._band_at(parts, event.position().toPoint())
        dx = float(event.pixelDelta().x())
        if not dx:
            notches = event.angleDelta().x() or (
                event.angleDelta().y()
                if event.modifiers() & Qt.KeyboardModifier.ShiftModifier else 0)
            dx = notches / 120 * WHEEL_STEP
        if band is None or not dx or self._max(band[1]) <= 0:
            return False
        key, rect = band
        self.scroll(key, min(self._offset(key, rect) - dx, self._max(rect)))
        return True

    def on_bar(self, parts: Sequence[TextPart], point: QPoint) -> bool:
        band = self._band_at(parts, point)
        return band is not None and point.y() >= band[1].bottom() - BAR_ZONE

    def press(self, parts: Sequence[TextPart], point: QPoint) -> bool:
        """Grab the scroll bar under `point`, if one is there (a press on its track jumps)."""
        band = self._band_at(parts, point)
        if band is None or point.y() < band[1].bottom() - BAR_ZONE:
            return False
        key, rect = band
        offset = self._offset(key, rect)
        thumb = self._thumb(rect, offset)
        if not thumb.left() <= point.x() <= thumb.right():
            track = self._track(rect)
            fraction = (point.x() - track.left() - thumb.width() / 2) / max(
                1.0, track.width() - thumb.width())
            offset = min(max(0.0, fraction), 1.0) * self._max(rect)
        self._drag = (key, rect, float(point.x()), offset)
        self.scroll(key, offset)
        return True

    def drag(self, point: QPoint) -> bool:
        """Move the grabbed bar; False when none is grabbed."""
        if self._drag is None:
            return False
        key, rect, start_x, start = self._drag
        travel = max(1.0, self._track(rect).width() - self._thumb(rect, start).width())
        offset = start + (point.x() - start_x) * self._max(rect) / travel
        self.scroll(key, min(max(0.0, offset), self._max(rect)))
        return True

    def release(self) -> bool:
        """Let go of the bar; False when none was grabbed."""
        if self._drag is None:
            return False
        self._drag = None
        self._update()
        return True


def _strips(clip: QRectF, bands: list[QRectF]) -> list[QRectF]:
    """`clip` less the rows of `bands` (sorted top to bottom, not overlapping)."""
    strips = []
    top = clip.top()
    for band in bands:
        if band.top() > top:
            strips.append(QRectF(clip.left(), top, clip.width(), band.top() - top))
        top = max(top, band.bottom())
    if clip.bottom() > top:
        strips.append(QRectF(clip.left(), top, clip.width(), clip.bottom() - top))
    return [s & clip for s in strips if not (s & clip).isEmpty()]
