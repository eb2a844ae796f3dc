"""Pieces shared by the pages of the Models dialog: a title block and a notice line."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QHBoxLayout, QLabel, QVBoxLayout, QWidget

from inglenook.ui.plain import plain_label


def page_header(parent: QWidget, title: str, subtitle: QLabel,
                button: QWidget | None = None) -> QHBoxLayout:
    """The page's title over its subtitle, with an optional action button on the right."""
    heading = QLabel(title, parent)
    heading.setObjectName("modelsPageTitle")
    subtitle.setObjectName("modelsPageSubtitle")
    subtitle.setWordWrap(True)
    text = QVBoxLayout()
    text.setSpacing(2)
    text.addWidget(heading)
    text.addWidget(subtitle)
    head = QHBoxLayout()
    head.addLayout(text, 1)
    if button is not None:
        head.addWidget(button, 0, Qt.AlignmentFlag.AlignTop)
    return head


def notice_label(parent: QWidget) -> QLabel:
    """A hidden line for messages such as "You're offline"."""
    notice = plain_label("", parent, name="modelsNotice")  # messages quote names and errors
    notice.setWordWrap(True)
    notice.hide()
    return notice
