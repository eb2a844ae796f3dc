"""The Knowledge dialog's "Vectors stored in" row: this computer (SQLite, in the knowledge
database) or Qdrant, at a server's URL or, left empty, in local mode under the data folder.

A choice is applied with Apply (or Enter in the URL): moving a collection that has vectors asks
first, since they are dropped and made again. The move itself is the controller's, off the GUI
thread (Qdrant is tried first, and may be a server that takes seconds to answer); a refusal is
said under the row, with the choice left as typed to be corrected, and nothing changed.
"""

from __future__ import annotations

import os

from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMessageBox,
    QPushButton,
    QWidget,
)

from inglenook import paths
from inglenook.knowledge.collections import CollectionSummary, backend_text, where
from inglenook.knowledge.qdrant_store import API_KEY_VARIABLE, checked_backend
from inglenook.ui.knowledge.knowledge_controller import KnowledgeController
from inglenook.ui.plain import plain_box, plain_tip
from inglenook.ui.widgets.controls import helper_label
from inglenook.ui.widgets.style import restyle

SQLITE_LABEL = "This computer (SQLite)"
QDRANT_LABEL = "Qdrant"


class BackendRow(QWidget):
    """The choice and Apply; `label`, `url_label`, `url` and `note` (under it, in the
    dialog's column of fields) are laid out by the dialog."""

    def __init__(self, knowledge: KnowledgeController, parent: QWidget) -> None:
        super().__init__(parent)
        self.knowledge = knowledge
        self.summary: CollectionSummary | None = None
        self.choice = QComboBox(self)
        self.choice.setObjectName("knowledgeBackend")
        self.choice.setAccessibleName("Vectors stored in")
        self.choice.setToolTip("Where the collection's vectors (search by meaning) are kept; "
                               "its files' text and the full-text index stay on this computer")
        self.choice.addItem(SQLITE_LABEL, "")
        self.choice.addItem(QDRANT_LABEL, "qdrant")
        self.choice.activated.connect(lambda _i: self._edited())
        folder = paths.knowledge_qdrant_dir()
        self.url = QLineEdit(parent)
        self.url.setObjectName("knowledgeQdrantUrl")
        self.url.setAccessibleName("Qdrant server URL")
        self.url.setPlaceholderText("Empty: local mode, in the data folder")
        self.url.setToolTip(plain_tip(
            f"A Qdrant server, http://host:6333 (an API key is read from ${API_KEY_VARIABLE}). "
            f"Left empty, Qdrant runs in local mode in {folder}, for one program at a time."))
        self.url.setClearButtonEnabled(True)
        self.url.textEdited.connect(lambda _t: self._edited())
        self.url.returnPressed.connect(self.apply)
        self.apply_button = QPushButton("Apply", self)
        self.apply_button.setObjectName("knowledgeBackendApply")
        self.apply_button.setToolTip("Keep the collection's vectors there from now on")
        self.apply_button.clicked.connect(self.apply)
        self.label = QLabel("Vectors stored in:", parent)
        self.label.setBuddy(self.choice)
        self.url_label = QLabel("Qdrant server:", parent)
        self.url_label.setBuddy(self.url)
        self.note = helper_label("", parent, name="knowledgeBackendNote")
        self.note.setWordWrap(True)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.choice, 1)
        layout.addWidget(self.apply_button)
        knowledge.moved.connect(self._moved)
        self._error = ""  # why the last move was refused, shown until the choice changes

    # ---- showing ----------------------------------------------------------------------------
    def wanted(self) -> tuple[str, str]:
        backend = str(self.choice.currentData() or "")
        return backend, self.url.text().strip() if backend == "qdrant" else ""

    def stored(self) -> tuple[str, str]:
        s = self.summary
        return ("", "") if s is None else (s.backend, s.qdrant_url)

    def show_collection(self, summary: CollectionSummary | None) -> None:
        """Show its backend; a choice being edited for the same collection is kept (the
        collections are read again after every run)."""
        same = summary is not None and self.summary is not None \
            and summary.name == self.summary.name
        editing = same and (self.wanted() != self.stored() or bool(self._error))
        self.summary = summary
        if summary is None:
            return self._update()
        moving = self.knowledge.moving.get(summary.name)
        if moving is not None:
            self._set(*moving)
        elif not editing:
            self._error = ""
            self._set(summary.backend, summary.qdrant_url)
        self._update()

    def _set(self, backend: str, url: str) -> None:
        self.choice.setCurrentIndex(max(0, self.choice.findData(backend)))
        self.url.setText(url)

    def _edited(self) -> None:
        self._error = ""
        self._update()

    def _update(self) -> None:
        s = self.summary
        moving = s is not None and s.name in self.knowledge.moving
        backend, _url = self.wanted()
        for widget in (self.url_label, self.url):
            widget.setVisible(s is not None and backend == "qdrant")
        self.choice.setEnabled(s is not None and not moving)
        self.url.setEnabled(s is not None and not moving)
        self.apply_button.setEnabled(s is not None and not moving
                                     and self.wanted() != self.stored())
        self.apply_button.setVisible(s is not None and (moving or self.wanted() != self.stored()
                                                        or bool(self._error)))
        restyle(self.note, kind="error" if self._error else "info")
        if s is None:
            self.note.setText("")
        elif moving:
            self.note.setText(f"Trying {where(*self.knowledge.moving[s.name])}…")
        elif self._error:
            self.note.setText(self._error)
        elif self.wanted() != self.stored():
            self.note.setText(f"Apply to keep its vectors in {where(*self.wanted())}.")
        else:
            self.note.setText(f"Vectors: {backend_text(s.backend, s.qdrant_url, s.qdrant_name)}")
        self.note.setToolTip(plain_tip(str(paths.knowledge_qdrant_dir()))
                             if s is not None and s.backend == "qdrant" and not s.qdrant_url
                             else "")
        self.note.setVisible(s is not None)
        self.label.setVisible(s is not None)
        self.setVisible(s is not None)

    # ---- the user ---------------------------------------------------------------------------
    def apply(self) -> None:
        s = self.summary
        if s is None or s.name in self.knowledge.moving or self.wanted() == self.stored():
            return
        try:  # what can be told here (the URL's form, the qdrant extra) is told at once
            checked_backend(*self.wanted())
        except ValueError as exc:
            self._error = str(exc)
            return self._update()
        if not s.vectors:
            return self._move()
        model = os.path.basename(s.embed_model)
        box = plain_box(QMessageBox(
            QMessageBox.Icon.Question, "Move vectors",
            f"Keep the vectors of {s.name} in {where(*self.wanted())}?",
            QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.Cancel, self.window()))
        box.setInformativeText(
            f"Its {s.vectors:,} vectors in {where(*self.stored())} are dropped, and an indexing "
            f"run that starts now embeds its passages again with {model}. Until then, it is "
            "searched in full text only.")
        box.button(QMessageBox.StandardButton.Yes).setText("Move vectors")
        box.setObjectName("knowledgeMoveVectors")
        box.finished.connect(lambda answer: self._answered(box, answer))
        box.open()

    def _answered(self, box: QMessageBox, answer: int) -> None:
        box.deleteLater()
        if answer == QMessageBox.StandardButton.Yes:
            self._move()
        elif self.summary is not None:  # as it was
            self._set(*self.stored())
            self._update()

    def _move(self) -> None:
        s = self.summary
        if s is not None:
            self._error = ""
            self.knowledge.set_backend(s.name, *self.wanted())
            self._update()

    def _moved(self, name: str, why: str) -> None:
        if self.summary is not None and name == self.summary.name:
            self._error = why
            self._update()  # done: the collections read again show where they now are
