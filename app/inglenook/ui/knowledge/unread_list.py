"""The Knowledge dialog's list of a collection's files that were not read, each with the reason,
and of those read only in part (a cap reached), each with what was left: those first, since they
are few and a list of thousands of files not read would hide them.
"""

from __future__ import annotations

import os

from PySide6.QtWidgets import QLabel, QListWidget, QListWidgetItem, QWidget

from inglenook.knowledge.collections import CollectionSummary
from inglenook.ui.plain import plain_tip

SHOWN = 1000  # a list of 50,000 unread files would stall the dialog; the CLI has all


def files(count: int) -> str:
    return f"{count:,} {'file' if count == 1 else 'files'}"


class UnreadList(QListWidget):
    """The list; `label` (its heading, with the counts) is laid out by the dialog."""

    def __init__(self, parent: QWidget) -> None:
        super().__init__(parent)
        self.setObjectName("knowledgeProblems")
        self.setAccessibleName("Files not indexed, and why")
        self.setToolTip("Files of the last run that were not read, and why, and files read "
                        "only in part")
        self.setUniformItemSizes(True)  # a long list lays out at once
        self.label = QLabel(parent)
        self.label.setObjectName("knowledgeProblemsLabel")

    def show_collection(self, summary: CollectionSummary | None) -> None:
        self.clear()
        problems = summary.problems if summary is not None else ()
        partial = summary.partial if summary is not None else ()
        self.label.setText(" · ".join(
            [f"Not indexed: {files(len(problems))}"] * bool(problems)
            + [f"Read only in part: {files(len(partial))}"] * bool(partial)))
        for path, reason in [*partial, *problems][:SHOWN]:
            item = QListWidgetItem(f"{os.path.basename(path) or path} — {reason}")
            item.setToolTip(plain_tip(f"{path}\n{reason}"))
            self.addItem(item)
        if len(problems) + len(partial) > SHOWN:
            self.addItem(f"… and {len(problems) + len(partial) - SHOWN:,} more "
                         "(inglenook knowledge list shows them all)")
        self.label.setVisible(bool(problems or partial))
        self.setVisible(bool(problems or partial))
