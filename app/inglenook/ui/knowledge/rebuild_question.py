"""Asked before a collection is rebuilt (every file read again from scratch, its vectors made
again): it may take long, and a Re-index, which reads only what changed, is usually what is
wanted."""

from __future__ import annotations

import os
from collections.abc import Callable

from PySide6.QtWidgets import QMessageBox, QWidget

from inglenook.knowledge.collections import CollectionSummary
from inglenook.ui.knowledge.unread_list import files
from inglenook.ui.plain import plain_box


def ask_rebuild(parent: QWidget, summary: CollectionSummary, rebuild: Callable[[], None]) -> None:
    """Open the question (window-modal, not blocking); `rebuild` is called on Rebuild."""
    box = plain_box(QMessageBox(QMessageBox.Icon.Question, "Rebuild collection",
                                f"Read every file of {summary.name} again from scratch?",
                                QMessageBox.StandardButton.Yes
                                | QMessageBox.StandardButton.Cancel, parent))
    vectors = (f", and their vectors made again with {os.path.basename(summary.embed_model)}"
               if summary.embed_model else "")
    box.setInformativeText(
        f"Its {files(summary.documents)} are read again and their passages replaced{vectors}; "
        "a Re-index reads only what changed. Search goes on meanwhile. Cancel keeps what was "
        "rebuilt, and the next run finishes it.")
    box.button(QMessageBox.StandardButton.Yes).setText("Rebuild")
    box.setObjectName("knowledgeRebuildConfirm")

    def answered(answer: int) -> None:
        box.deleteLater()
        if answer == QMessageBox.StandardButton.Yes:
            rebuild()

    box.finished.connect(answered)
    box.open()
