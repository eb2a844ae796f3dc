"""The side panel's "Knowledge": which collections the chat on screen searches before each
reply (ChatSettings.knowledge, saved with the chat), and Manage… for the Knowledge dialog. A
collection the chat names that is gone (deleted in the dialog) stays listed, ticked and marked,
until it is unticked: the chat's settings never change behind the user's back."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QPushButton, QVBoxLayout, QWidget

from inglenook.ui.widgets.controls import CollapsibleSection, helper_label
from inglenook.ui.widgets.narrow import WrappingCheckBox

GONE = " (not found: deleted?)"


class KnowledgeSection(CollapsibleSection):
    """Changes made with show() emit nothing.

    Signals:
        chosen_changed(object): the user ticked or unticked one: the chat's collections now.
        manage_requested(): "Manage…" was pressed.
    """

    chosen_changed = Signal(object)
    manage_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Knowledge", "knowledgeSection", parent)
        self.note = helper_label("", self.body, name="knowledge_note")
        self.boxes: list[WrappingCheckBox] = []
        self.manage_button = QPushButton("Manage…", self.body)
        self.manage_button.setObjectName("knowledge_manage_button")
        self.manage_button.setToolTip("Collections of your folders and files, and their "
                                      "indexing (Chat → Knowledge…)")
        self.manage_button.clicked.connect(self.manage_requested)
        self._layout = QVBoxLayout(self.body)
        self._layout.setContentsMargins(0, 0, 0, 0)
        self._layout.setSpacing(6)
        self._layout.addWidget(self.note)
        self._layout.addWidget(self.manage_button)
        self.show_collections([], ())

    def show_collections(self, names: Sequence[str], chosen: Sequence[str]) -> None:
        """The collections there are, ticked where the chat uses them."""
        listed = [*names, *(c for c in chosen if c not in names)]
        for box in self.boxes:
            self._layout.removeWidget(box)
            box.hide()  # until deleted, it would still be drawn over the note
            box.deleteLater()
        self.boxes = []
        for n, name in enumerate(listed):
            box = WrappingCheckBox(name if name in names else name + GONE, self.body)
            box.setObjectName("knowledge_check")
            box.setProperty("collection", name)
            box.setChecked(name in chosen)
            box.setToolTip("Search this collection before each reply in this chat")
            box.toggled.connect(self._toggled)
            self._layout.insertWidget(1 + n, box)
            self.boxes.append(box)
        self._say()

    def _say(self) -> None:
        if not self.boxes:
            text = "No collections yet. Manage… makes one from your folders and files."
        elif any(b.isChecked() for b in self.boxes):
            text = "Searched before each reply in this chat; its sources show under the reply."
        else:
            text = "Tick the collections this chat should search before each reply."
        self.note.setText(text)

    def _toggled(self) -> None:
        chosen = tuple(str(b.property("collection")) for b in self.boxes if b.isChecked())
        self._say()
        self.chosen_changed.emit(chosen)
