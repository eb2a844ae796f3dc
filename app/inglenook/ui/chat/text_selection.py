"""The selection over a message's stack of documents, and where a link is drawn in it.

A position is (part, character position in that part's document); the selection runs from
where it started (the anchor) to where it ends (the cursor), across parts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from PySide6.QtCore import QRectF

from inglenook.ui.chat.markdown import ZWSP
from inglenook.ui.chat.text_part import TextPart

Position = tuple[int, int]


class Selection:
    def __init__(self) -> None:
        self.anchor: Position | None = None
        self.cursor: Position = (0, 0)

    def set(self, anchor: Position | None, cursor: Position) -> None:
        self.anchor, self.cursor = anchor, cursor

    @property
    def active(self) -> bool:
        return self.anchor is not None and self.anchor != self.cursor

    def span(self, index: int, parts: Sequence[TextPart]) -> tuple[int, int] | None:
        """What is selected of part `index` (start, end), or None."""
        if self.anchor is None or self.anchor == self.cursor or index >= len(parts):
            return None
        start, end = sorted((self.anchor, self.cursor))
        if not start[0] <= index <= end[0]:
            return None
        last = parts[index].chars - 1
        begin = start[1] if index == start[0] else 0
        stop = end[1] if index == end[0] else last
        return (min(begin, last), min(stop, last)) if begin != stop else None

    def text(self, parts: Sequence[TextPart]) -> str:
        """The selection as plain text, without the zero-width breaks the renderer adds."""
        pieces = []
        for index, part in enumerate(parts):
            span = self.span(index, parts)
            if span is not None:
                pieces.append(part.plain_text(span))
        return "\n".join(pieces).replace(ZWSP, "")

    def everything(self, parts: Sequence[TextPart]) -> None:
        last = len(parts) - 1
        self.set((0, 0), (last, parts[last].chars - 1))

    def clamp(self, parts: Sequence[TextPart]) -> None:
        """Keep both ends inside the parts (after the text changed)."""
        def clamp(pos: Position) -> Position:
            part = min(pos[0], len(parts) - 1)
            return part, min(pos[1], parts[part].chars - 1)

        if self.anchor is not None:
            self.anchor = clamp(self.anchor)
        self.cursor = clamp(self.cursor)


def _x(cursor_to_x: object) -> float:
    # QTextLine.cursorToX returns (x, position) in PySide6; its stubs say object.
    return cast(tuple[float, int], cursor_to_x)[0]


def link_rect(parts: Sequence[TextPart], href: str) -> QRectF:
    """Where the first link to `href` is drawn, in the widget's coordinates (empty if none)."""
    for part in parts:
        block = part.doc.begin()
        while block.isValid():
            it = block.begin()
            while not it.atEnd():
                fragment = it.fragment()
                if fragment.charFormat().anchorHref() == href:
                    offset = fragment.position() - block.position()
                    line = block.layout().lineForTextPosition(offset)
                    origin = part.doc.documentLayout().blockBoundingRect(block).topLeft()
                    start = _x(line.cursorToX(offset))
                    end = _x(line.cursorToX(offset + fragment.length()))
                    return QRectF(origin.x() + start, origin.y() + line.y() + part.top,
                                  end - start, line.height())
                it += 1
            block = block.next()
    return QRectF()
