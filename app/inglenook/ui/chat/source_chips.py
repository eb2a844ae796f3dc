"""The sources a reply was given, as chips under its answer ("[1] notes.md · lines 3–9"), each
opening the passage (passage_dialog.py). Read from the reply's knowledge record: while it is
written, the one its Reply holds; once saved, the one in its provenance.

The strip goes through the bubble's layout (just above the footer), so the bubble needs no
knowledge of sources; the chat view measures the bubble with it (its height estimate counts the
row of chips: store's outline reads how many sources a reply has).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import cast

from PySide6.QtWidgets import QBoxLayout, QWidget

from inglenook.chat.knowledge_turn import KnowledgeTurn
from inglenook.knowledge.retrieval import Source
from inglenook.ui.chat.attachment_chips import AttachmentChip, AttachmentStrip, short_name

STRIP = "sourceStrip"
SMALLER = 0.85
NAME_CHARS = 30


def chip_for_source(source: Source, parent: QWidget | None = None) -> AttachmentChip:
    name = short_name(os.path.basename(source.path) or source.path, NAME_CHARS)
    chip = AttachmentChip(f"[{source.number}] {name} · {source.location}",
                          f"{source.path}\n{source.location} · from {source.collection}\n"
                          "Click to see the passage the model was given",
                          removable=False, parent=parent)
    chip.setObjectName("sourceChip")
    font = chip.label.font()
    font.setPointSizeF(font.pointSizeF() * SMALLER)  # a reply may have ten: two to a line
    chip.label.setFont(font)
    cast(QBoxLayout, chip.layout()).setContentsMargins(7, 2, 7, 2)
    chip.setAccessibleName(f"Source {source.number}: {name}, {source.location}")
    return chip


class SourceStrip(AttachmentStrip):
    """The row of a reply's source chips; `shown`: the sources they are for."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName(STRIP)
        self.setStyleSheet(self.styleSheet().replace("attachmentChip", "sourceChip"))
        self.shown: tuple[Source, ...] = ()


def show_sources(bubble: QWidget, turn: KnowledgeTurn | None,
                 open_source: Callable[[KnowledgeTurn, Source], None]) -> None:
    """The reply's sources under its text (again: the chips are replaced when they differ)."""
    strip = bubble.findChild(SourceStrip, STRIP)
    sources = turn.sources if turn is not None else ()
    if strip is not None and strip.shown == sources:
        return  # the reply ended as it began: the same chips
    if strip is None:
        if not sources:
            return
        strip = SourceStrip(bubble)
        layout = cast(QBoxLayout, bubble.layout())
        layout.insertWidget(layout.count() - 1, strip)  # the footer is the last item
    strip.shown = sources
    chips = []
    if turn is not None:
        given = turn
        for source in sources:
            chip = chip_for_source(source)
            chip.clicked.connect(lambda s=source: open_source(given, s))
            chips.append(chip)
    strip.set_chips(chips)
