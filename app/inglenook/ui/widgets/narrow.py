"""Controls that get narrow without widening their panel: a check box whose label wraps and a
header button whose title ends in "…". A QCheckBox or QToolButton asks for its whole text on one
line as its minimum width, so one long label makes the side panel's content wider than the
panel, and everything to its right (number boxes, slider handles) is cut off."""

from __future__ import annotations

from PySide6.QtCore import QPoint, QRect, QSize, Qt
from PySide6.QtGui import QPaintEvent
from PySide6.QtWidgets import (
    QCheckBox,
    QSizePolicy,
    QStyle,
    QStyleOptionButton,
    QStyleOptionToolButton,
    QStylePainter,
    QToolButton,
    QWidget,
)

GAP = 6  # between the box and its label
_WRAP = int(Qt.TextFlag.TextWordWrap) | int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)


class WrappingCheckBox(QCheckBox):
    """A check box whose label wraps onto more lines when narrow; a click on the label toggles
    it as on any check box."""

    def __init__(self, text: str, parent: QWidget | None = None) -> None:
        super().__init__(text, parent)
        policy = QSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Preferred)
        policy.setHeightForWidth(True)
        self.setSizePolicy(policy)

    def _indicator(self) -> QRect:
        option = QStyleOptionButton()
        self.initStyleOption(option)
        return self.style().subElementRect(QStyle.SubElement.SE_CheckBoxIndicator, option, self)

    def _text_left(self) -> int:
        return self._indicator().right() + 1 + GAP

    def _text_height(self, width: int) -> int:
        rect = QRect(0, 0, max(1, width - self._text_left()), 100_000)
        return self.fontMetrics().boundingRect(rect, _WRAP, self.text()).height()

    def hasHeightForWidth(self) -> bool:
        return True

    def heightForWidth(self, width: int) -> int:
        return max(self._indicator().height(), self._text_height(width)) + 2

    def sizeHint(self) -> QSize:
        width = self._text_left() + self.fontMetrics().horizontalAdvance(self.text()) + 2
        return QSize(width, self.heightForWidth(width))

    def minimumSizeHint(self) -> QSize:
        longest = max((self.fontMetrics().horizontalAdvance(word)
                       for word in self.text().split()), default=0)
        return QSize(self._text_left() + longest + 2, self.heightForWidth(10_000))

    def hitButton(self, pos: QPoint) -> bool:
        return self.rect().contains(pos)

    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QStylePainter(self)
        option = QStyleOptionButton()
        self.initStyleOption(option)
        line = self.fontMetrics().height()
        box = self._indicator()
        box.moveTop(max(0, (line - box.height()) // 2) + 1)  # level with the first line
        option.rect = box
        painter.drawPrimitive(QStyle.PrimitiveElement.PE_IndicatorCheckBox, option)
        text = QRect(self._text_left(), 1, self.width() - self._text_left(), self.height() - 1)
        painter.setPen(self.palette().color(self.foregroundRole()))
        painter.drawText(text, _WRAP, self.text())
        if self.hasFocus():
            focus = QStyleOptionButton()
            focus.initFrom(self)
            focus.rect = self.fontMetrics().boundingRect(text, _WRAP, self.text()).adjusted(
                -2, 0, 2, 0)
            painter.drawPrimitive(QStyle.PrimitiveElement.PE_FrameFocusRect, focus)


class ElidingToolButton(QToolButton):
    """A tool button (a section's header) whose text ends in "…" rather than widen its row; its
    tooltip keeps the whole title."""

    def minimumSizeHint(self) -> QSize:
        hint = super().minimumSizeHint()
        return QSize(min(hint.width(), 40 + self.fontMetrics().horizontalAdvance("…" * 4)),
                     hint.height())

    def paintEvent(self, event: QPaintEvent) -> None:
        option = QStyleOptionToolButton()
        self.initStyleOption(option)
        spare = self.width() - super().sizeHint().width()
        if spare < 0:
            room = self.fontMetrics().horizontalAdvance(self.text()) + spare
            option.text = self.fontMetrics().elidedText(self.text(), Qt.TextElideMode.ElideRight,
                                                        max(0, room))
        painter = QStylePainter(self)
        painter.drawComplexControl(QStyle.ComplexControl.CC_ToolButton, option)
