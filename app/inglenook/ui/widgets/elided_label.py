"""A one-line label that shows a shorter form of its text, or ends in "…", when narrow."""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QPainter, QPaintEvent
from PySide6.QtWidgets import QLabel, QSizePolicy, QWidget


class ElidedLabel(QLabel):
    """Plain text on one line that never wraps or widens its row. Narrower than its text, it
    shows the longest of its shorter forms that fits (`set_forms`), else cuts the shortest with
    "…"; text() stays the full text."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._forms: tuple[str, ...] = ()
        self.setTextFormat(Qt.TextFormat.PlainText)
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)

    def set_forms(self, *forms: str) -> None:
        """The text and shorter forms of it, longest first."""
        self._forms = forms
        self.setText(forms[0] if forms else "")

    def minimumSizeHint(self) -> QSize:
        return QSize(0, super().minimumSizeHint().height())

    def shown_text(self) -> str:
        """The text as painted at the current width."""
        width = self.contentsRect().width()
        metrics = self.fontMetrics()
        forms = self._forms if self._forms and self._forms[0] == self.text() else (self.text(),)
        for form in forms:
            if metrics.horizontalAdvance(form) <= width:
                return form
        return metrics.elidedText(forms[-1], Qt.TextElideMode.ElideRight, width)

    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QPainter(self)
        self.style().drawItemText(painter, self.contentsRect(), int(self.alignment()),
                                  self.palette(), self.isEnabled(), self.shown_text(),
                                  self.foregroundRole())
        painter.end()
