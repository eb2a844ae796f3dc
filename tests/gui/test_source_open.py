"""Open file on a reply's source (issue 39, finding 12): a source from an imported chat that
names /etc/passwd, or a script of the collection, is never handed to the system's handler (a
fake here: the handler would open or run it)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from PySide6.QtCore import QUrl
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import QWidget
from pytestqt.qtbot import QtBot

from inglenook.chat.knowledge_turn import KnowledgeTurn
from inglenook.knowledge.fts import SqliteFtsIndex
from inglenook.knowledge.indexer import Indexer
from inglenook.knowledge.retrieval import Source
from inglenook.ui.chat.passage_dialog import PassageDialog


@pytest.fixture
def handed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    opened: list[str] = []

    def open_url(url: QUrl) -> bool:
        opened.append(QUrl(url).toLocalFile())
        return True

    monkeypatch.setattr(QDesktopServices, "openUrl", open_url)
    return opened


def dialog_for(parent: QWidget, path: str, collection: str = "Docs") -> PassageDialog:
    source = Source(1, collection, path, "line 1", 1)
    return PassageDialog(KnowledgeTurn((collection,), "", (source,)), source, parent)


def test_open_file_opens_only_documents_of_the_collection_that_cannot_run(
        qtbot: QtBot, tmp_path: Path, handed: list[str]) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "notes.md").write_text("# Notes\n\nThe wren sings.\n")
    (docs / "run.sh").write_text("echo hello\n")
    index = SqliteFtsIndex()
    index.create_collection("Docs", [str(docs)])
    Indexer(index, "Docs").run()
    index.close()
    cases = [("/etc/passwd", "", "is not a document of the collection Docs"),
             (str(docs / "run.sh"), os.path.realpath(docs), "its folder is shown instead"),
             (str(docs / "notes.md"), os.path.realpath(docs / "notes.md"), "line 1")]
    parent = QWidget()
    qtbot.addWidget(parent)
    for path, opened, said in cases:
        handed.clear()
        dialog = dialog_for(parent, path)
        assert dialog.open_button.isEnabled()  # it exists: the check comes on the click
        dialog.open_button.click()
        qtbot.waitUntil(lambda d=dialog, s=said: s in d.where.text()  # type: ignore[misc]
                        and d._opening is not None and d._opening.finished)
        assert handed == ([opened] if opened else [])
        dialog.close()
