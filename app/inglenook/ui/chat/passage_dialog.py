"""One source of a reply: the passage the model was given (plain text, as recorded with the
reply), where it is (file, page or lines, collection), and Open file for the file itself: only a
document of the collection inside its folders, never something that would run
(knowledge/opening.py)."""

from __future__ import annotations

import os

from PySide6.QtCore import Qt, QUrl
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from inglenook.chat.knowledge_turn import KnowledgeTurn, given_passage
from inglenook.knowledge.fts import SqliteFtsIndex
from inglenook.knowledge.opening import Opening, opening
from inglenook.knowledge.retrieval import Source
from inglenook.ui import tasks
from inglenook.ui.plain import plain_label
from inglenook.ui.widgets.controls import helper_label


class PassageDialog(QDialog):
    def __init__(self, turn: KnowledgeTurn, source: Source,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("passageDialog")
        self.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)  # one per click on a chip
        self.setWindowTitle(f"Source [{source.number}]")
        self.resize(640, 440)
        self.source = source
        self.path_label = plain_label(source.path, self, name="passagePath")
        self.path_label.setWordWrap(True)
        exists = os.path.isfile(source.path)
        where = f"{source.location} · from the collection {source.collection}"
        self.where = helper_label(where if exists else
                                  f"{where} · the file is no longer there", self,
                                  name="passageWhere")
        self.text = QPlainTextEdit(self)  # plain text: a document's markup stays characters
        self.text.setObjectName("passageText")
        self.text.setReadOnly(True)
        self.text.setAccessibleName("The passage the model was given")
        self.text.setToolTip("The passage as this reply was given it, from the file above")
        given = given_passage(turn, source)
        self.text.setPlainText(given if given is not None else
                               "This reply's record does not hold the passage's text.")
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        buttons.button(QDialogButtonBox.StandardButton.Close).setToolTip("Close this window")
        buttons.rejected.connect(self.reject)
        self.open_button = QPushButton("Open file", self)
        self.open_button.setObjectName("passageOpenFile")
        self.open_button.setToolTip("Open the file in the app your system uses for it")
        self.open_button.setEnabled(exists)
        self.open_button.clicked.connect(self.open_file)
        self._opening: tasks.Task | None = None
        buttons.addButton(self.open_button, QDialogButtonBox.ButtonRole.ActionRole)
        layout = QVBoxLayout(self)
        layout.addWidget(self.path_label)
        layout.addWidget(self.where)
        layout.addWidget(self.text, 1)
        layout.addWidget(buttons)

    def open_file(self) -> None:
        """Only a document of the collection, inside its folders, that cannot run
        (knowledge/opening.py); checked off the GUI thread (it reads the index)."""
        collection, path = self.source.collection, self.source.path

        def check() -> Opening:
            index = SqliteFtsIndex()
            try:
                return opening(index, collection, path)
            finally:
                index.close()

        self.open_button.setEnabled(False)
        self._opening = tasks.run(check, owner=self, replaces=self._opening,
                                  name="open-source", on_done=self._open,
                                  on_failed=lambda exc: self._open(Opening("", str(exc))))

    def _open(self, decided: Opening) -> None:
        self.open_button.setEnabled(bool(decided.path))
        if decided.why:
            self.where.setText(decided.why)
        if decided.path:
            QDesktopServices.openUrl(QUrl.fromLocalFile(decided.path))
