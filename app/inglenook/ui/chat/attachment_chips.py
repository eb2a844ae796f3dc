"""Attachments as chips: above the prompt box (name, token cost, ✕) and in a user's message
(name, kind, size; a click shows the text the model was given, or an image larger). An image's
chip starts with its thumbnail (ui/chat/image_parts.py).

Chips wrap onto more lines instead of widening the composer or the bubble.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import cast

from PySide6.QtCore import QPoint, QRect, QSize, Qt, Signal
from PySide6.QtGui import QMouseEvent
from PySide6.QtWidgets import (
    QBoxLayout,
    QFrame,
    QHBoxLayout,
    QLayout,
    QLayoutItem,
    QToolButton,
    QWidget,
)

from inglenook.core.attachments import IMAGE_TOKENS, Attachment
from inglenook.core.units import describe_size
from inglenook.ui.chat.image_parts import THUMBNAILS, thumbnail_label
from inglenook.ui.plain import plain_label, plain_tip

NAME_CHARS = 40  # a longer name is cut in the middle: its start and its extension both matter
# Palette roles, so the chips follow the light and dark themes until style.qss styles them.
CHIP_STYLE = """
QFrame#attachmentChip { border: 1px solid palette(mid); border-radius: 10px;
                        background: palette(alternate-base); }
QFrame#attachmentChip[pending="true"] { border-style: dashed; }
QFrame#attachmentChip QLabel { background: transparent; border: none; }
QToolButton#attachmentRemove { border: none; padding: 0 2px; background: transparent; }
QToolButton#attachmentRemove:hover { color: palette(highlight); }
"""


def short_name(name: str, limit: int = NAME_CHARS) -> str:
    if len(name) <= limit:
        return name
    keep = limit - 1
    return name[:keep - keep // 3] + "…" + name[-(keep // 3):]


class FlowLayout(QLayout):
    """Items left to right, wrapping to a new line when the width runs out."""

    def __init__(self, parent: QWidget | None = None, spacing: int = 6) -> None:
        super().__init__(parent)
        self._items: list[QLayoutItem] = []
        self._spacing = spacing
        self.setContentsMargins(0, 0, 0, 0)

    def addItem(self, item: QLayoutItem) -> None:
        self._items.append(item)

    def count(self) -> int:
        return len(self._items)

    def itemAt(self, index: int) -> QLayoutItem | None:
        return self._items[index] if 0 <= index < len(self._items) else None

    def takeAt(self, index: int) -> QLayoutItem | None:
        return self._items.pop(index) if 0 <= index < len(self._items) else None

    def expandingDirections(self) -> Qt.Orientation:
        return Qt.Orientation(0)

    def hasHeightForWidth(self) -> bool:
        return True

    def heightForWidth(self, width: int) -> int:
        return self._arrange(QRect(0, 0, width, 0), move=False)

    def setGeometry(self, rect: QRect) -> None:
        super().setGeometry(rect)
        self._arrange(rect, move=True)

    def sizeHint(self) -> QSize:
        return self.minimumSize()

    def minimumSize(self) -> QSize:
        size = QSize()
        for item in self._items:
            size = size.expandedTo(item.minimumSize())
        margins = self.contentsMargins()
        return size + QSize(margins.left() + margins.right(), margins.top() + margins.bottom())

    def _arrange(self, rect: QRect, move: bool) -> int:
        margins = self.contentsMargins()
        area = rect.adjusted(margins.left(), margins.top(), -margins.right(), -margins.bottom())
        x, y, line_height = area.x(), area.y(), 0
        for item in self._items:
            widget = item.widget()
            if widget is not None and widget.isHidden():
                continue
            hint = item.sizeHint()
            if x > area.x() and x + hint.width() > area.right() + 1:
                x, y, line_height = area.x(), y + line_height + self._spacing, 0
            if move:
                item.setGeometry(QRect(QPoint(x, y), hint))
            x += hint.width() + self._spacing
            line_height = max(line_height, hint.height())
        return y + line_height - rect.y() + margins.bottom()


class AttachmentChip(QFrame):
    """One file. Removable chips (the composer's) have ✕; chips in a message open the text.

    Signals:
        remove_requested(): ✕ was clicked.
        clicked(): the chip was clicked (chips of a sent message).
    """

    remove_requested = Signal()
    clicked = Signal()

    def __init__(self, text: str, tooltip: str, removable: bool, pending: bool = False,
                 parent: QWidget | None = None, image: bytes = b"") -> None:
        super().__init__(parent)
        self.setObjectName("attachmentChip")
        self.setProperty("pending", pending)
        self.setToolTip(plain_tip(tooltip))  # file names are outside text
        row = QHBoxLayout(self)
        row.setContentsMargins(9, 3, 4 if removable else 9, 3)
        row.setSpacing(4)
        self.thumbnail = None
        if image:  # the image file's bytes: its thumbnail, made off the GUI thread if not yet
            row.setContentsMargins(4, 4, 4 if removable else 9, 4)
            row.setSpacing(6)
            self.thumbnail = thumbnail_label(self)
            self.thumbnail.setAccessibleName(f"Thumbnail of {tooltip.splitlines()[0]}")
            THUMBNAILS.show_in(self.thumbnail, image)
            row.addWidget(self.thumbnail)
        self.label = plain_label(text, self, name="attachmentLabel")
        row.addWidget(self.label)
        self.remove_button: QToolButton | None = None
        if removable:
            self.remove_button = QToolButton(self)
            self.remove_button.setObjectName("attachmentRemove")
            self.remove_button.setText("✕")
            self.remove_button.setToolTip("Remove this file from the message")
            self.remove_button.setAccessibleName(f"Remove {tooltip.splitlines()[0]}")
            self.remove_button.setCursor(Qt.CursorShape.PointingHandCursor)
            self.remove_button.clicked.connect(self.remove_requested)
            row.addWidget(self.remove_button)
        else:
            self.setCursor(Qt.CursorShape.PointingHandCursor)

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:
        if event.button() == Qt.MouseButton.LeftButton and self.rect().contains(
                event.position().toPoint()):
            self.clicked.emit()
        super().mouseReleaseEvent(event)


def image_cost(attachment: Attachment, image_tokens: int) -> tuple[str, str]:
    """An image's cost on its chip, and why: the projector's count at its size, else the loaded
    projector's for a 512 × 512 image (`image_tokens`), else an estimate."""
    if attachment.image_tokens:
        width, height = attachment.pixels
        size = f"{width:,} × {height:,}" if width else "this"
        return (f"{attachment.image_tokens:,} tokens",
                f"as the model's projector reads an image of {size} pixels")
    if image_tokens:
        return (f"{image_tokens:,} tokens", "as the loaded model's projector reads a "
                "512 × 512 image (one that tiles large images takes more)")
    return (f"≈{IMAGE_TOKENS:,} tokens (estimate)",
            "an estimate: no model that can see images is loaded")


def chip_for_draft(attachment: Attachment, parent: QWidget | None = None,
                   image_tokens: int = 0) -> AttachmentChip:
    """The composer's chip: what the file costs of the context."""
    if attachment.kind == "image":
        tokens, why = image_cost(attachment, image_tokens)
        return AttachmentChip(f"{short_name(attachment.name, 28)}\n{tokens}",
                              f"{attachment.name}\n{attachment.describe()} · {tokens}, {why}",
                              removable=True, parent=parent, image=attachment.data)
    tokens = f"≈{attachment.tokens:,} tokens"
    return AttachmentChip(f"{short_name(attachment.name)} · {tokens}",
                          f"{attachment.name}\n{attachment.describe()} · {tokens}",
                          removable=True, parent=parent)


def chip_for_reading(name: str, parent: QWidget | None = None) -> AttachmentChip:
    return AttachmentChip(f"Reading {short_name(name)}…", f"{name}\nReading its text…",
                          removable=True, pending=True, parent=parent)


def chip_for_message(attachment: Attachment, parent: QWidget | None = None) -> AttachmentChip:
    """A sent message's chip: which file, how big; a click shows what the model read."""
    if attachment.kind == "image":
        return AttachmentChip(f"{short_name(attachment.name, 28)}\n"
                              f"{describe_size(attachment.size)}",
                              f"{attachment.describe()}\nClick to see it larger",
                              removable=False, parent=parent, image=attachment.data)
    return AttachmentChip(f"{short_name(attachment.name)} · {describe_size(attachment.size)}",
                          f"{attachment.describe()}\nClick to see the text the model was given",
                          removable=False, parent=parent)


class AttachmentStrip(QWidget):
    """A row of chips that wraps; hidden while it has none."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("attachmentStrip")
        self.setStyleSheet(CHIP_STYLE)
        self.flow = FlowLayout(self)
        self.hide()

    @property
    def chips(self) -> list[AttachmentChip]:
        found = (self.flow.itemAt(i) for i in range(self.flow.count()))
        return [item.widget() for item in found  # type: ignore[misc]
                if item is not None and isinstance(item.widget(), AttachmentChip)]

    def set_chips(self, chips: Sequence[AttachmentChip]) -> None:
        for chip in self.chips:
            self.flow.removeWidget(chip)
            chip.hide()
            chip.deleteLater()
        for chip in chips:
            chip.setParent(self)
            self.flow.addWidget(chip)
            chip.show()
        self.setVisible(bool(chips))
        self.updateGeometry()


def add_to_bubble(bubble: QWidget, attachments: Sequence[Attachment],
                  open_attachment: Callable[[Attachment], None]) -> AttachmentStrip:
    """The files of a sent message above its text. Through the bubble's layout (a QBoxLayout),
    so the bubble needs no knowledge of attachments."""
    strip = AttachmentStrip(bubble)
    chips = []
    for attachment in attachments:
        chip = chip_for_message(attachment)
        chip.clicked.connect(lambda a=attachment: open_attachment(a))
        chips.append(chip)
    strip.set_chips(chips)
    cast(QBoxLayout, bubble.layout()).insertWidget(0, strip)
    return strip
