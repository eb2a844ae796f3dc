"""Selectable plain text that wraps anywhere, for values a label would cut: a QLabel wraps only
at spaces, so a file path or a sha256 (one long "word") is cut at the edge or pushes its
dialog sideways. This wraps at spaces where it can and inside a word where it must, as tall as
its text at the width it gets; what is selected and copied is the text itself."""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QResizeEvent, QTextOption
from PySide6.QtWidgets import QFrame, QSizePolicy, QTextEdit, QWidget


class WrappedText(QTextEdit):
    def __init__(self, text: str = "", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setReadOnly(True)
        self.setAcceptRichText(False)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setWordWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
        self.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse
                                     | Qt.TextInteractionFlag.TextSelectableByKeyboard)
        self.viewport().setAutoFillBackground(False)  # reads like a label
        self.setStyleSheet("QTextEdit { background: transparent; }")
        self.document().setDocumentMargin(0)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        self.setPlainText(text)

    def text(self) -> str:
        return self.toPlainText()

    def setPlainText(self, text: str) -> None:
        super().setPlainText(text)
        self.updateGeometry()

    def hasHeightForWidth(self) -> bool:
        return True

    def heightForWidth(self, width: int) -> int:
        document = self.document().clone(self)
        document.setTextWidth(max(1, width))
        height = int(document.size().height() + 0.999)
        document.deleteLater()
        return height

    def sizeHint(self) -> QSize:
        width = max(self.width(), 120)
        return QSize(width, self.heightForWidth(width))

    def minimumSizeHint(self) -> QSize:
        return QSize(60, self.fontMetrics().height())

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        wanted = self.heightForWidth(event.size().width())
        if wanted != event.size().height():
            self.updateGeometry()  # the form lays the row out again at this height
