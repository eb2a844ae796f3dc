"""The Knowledge dialog's "Search by meaning with" row: the embedding model a collection's
passages get vectors from (full text only, or one of the library's models, read off the GUI
thread), and why its last embedding failed."""

from __future__ import annotations

import os
from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QComboBox, QLabel, QWidget

from inglenook.knowledge.collections import CollectionSummary, EmbeddingChoice
from inglenook.ui.knowledge.knowledge_controller import KnowledgeController
from inglenook.ui.plain import plain_tip
from inglenook.ui.widgets.controls import helper_label


class EmbedRow(QComboBox):
    """The choice itself; `label` and `error` (under it) are laid out by the dialog. A change
    the controller refuses goes to `say`."""

    def __init__(self, knowledge: KnowledgeController, say: Callable[[str], None],
                 parent: QWidget) -> None:
        super().__init__(parent)
        self.knowledge, self.say = knowledge, say
        self.summary: CollectionSummary | None = None
        self.setObjectName("knowledgeEmbedModel")
        self.setAccessibleName("Search by meaning with")
        self.setToolTip(
            "Full-text search always works. An embedding model from your library also finds "
            "passages that say the same thing in other words; it is loaded beside the chat "
            "model while it is used.")
        self.addItem("Full text only", "")
        self.activated.connect(lambda _i: self._choose())
        self.label = QLabel("Search by meaning with:", parent)
        self.label.setBuddy(self)
        self.error = helper_label("", parent, name="knowledgeEmbedError")
        self.error.setProperty("kind", "error")
        self.error.setWordWrap(True)
        knowledge.embedding_choices(self.fill)

    def fill(self, choices: list[EmbeddingChoice]) -> None:
        while self.count() > 1:  # "(not found)" stand-ins shown until now
            self.removeItem(1)
        for choice in choices:
            label = choice.name if choice.made_for_it else f"{choice.name} (a chat model)"
            self.addItem(label, choice.path)
            self.setItemData(self.count() - 1, plain_tip(
                choice.path if choice.made_for_it else
                f"{choice.path}\nNot an embedding model: its vectors are poor for search."),
                Qt.ItemDataRole.ToolTipRole)
        if self.summary is not None:
            self.show_collection(self.summary)

    def show_collection(self, summary: CollectionSummary | None) -> None:
        self.summary = summary
        self.setEnabled(summary is not None)
        model = summary.embed_model if summary is not None else ""
        at = self.findData(model)
        if at < 0 and model:  # not in the library (moved, or not listed yet)
            self.addItem(f"{os.path.basename(model)} (not found)", model)
            at = self.count() - 1
        self.setCurrentIndex(max(at, 0))
        self.error.setText(summary.embed_error if summary is not None else "")
        self.error.setVisible(bool(self.error.text()))

    def _choose(self) -> None:
        summary, model = self.summary, str(self.currentData() or "")
        if summary is not None and model != summary.embed_model:
            self.knowledge.set_embed_model(summary.name, model)  # off the GUI thread
