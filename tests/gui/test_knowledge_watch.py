"""Watched collections in the real window: a file added to a collection's folder is indexed
with nobody asking, "Watch for changes" turned off stops it, and a collection whose files
changed while the app was closed is indexed again when the app starts."""

from __future__ import annotations

from pathlib import Path

from pytestqt.qtbot import QtBot

from inglenook.knowledge.fts import SqliteFtsIndex
from inglenook.knowledge.indexer import Indexer, IndexReport
from inglenook.ui.knowledge.knowledge_controller import KnowledgeController
from inglenook.ui.knowledge.knowledge_dialog import KnowledgeDialog
from inglenook.ui.main_window import MainWindow
from tests.gui.test_knowledge_vectors import idle, notes, open_dialog

TIMEOUT_MS = 20_000


def test_a_file_added_to_a_watched_folder_is_indexed_by_itself(
        qtbot: QtBot, window: MainWindow, tmp_path: Path) -> None:
    knowledge = window.knowledge
    dialog = open_dialog(qtbot, window)
    folder = notes(tmp_path)
    name = knowledge.create("Notes")
    dialog.select(name)
    knowledge.add_paths(name, [str(folder)])
    idle(qtbot, window)
    assert knowledge.watcher is not None
    qtbot.waitUntil(lambda: knowledge.watcher is not None and knowledge.watcher.settled()
                    and knowledge.watcher.names() == ["Notes"], timeout=TIMEOUT_MS)
    assert dialog.watch_box.isChecked() and dialog.watch_box.isEnabled()
    with qtbot.waitSignal(knowledge.indexed, timeout=TIMEOUT_MS) as ran:
        (folder / "kiln.md").write_text("# Kiln\n\nThe kiln fires the clay at dawn.\n")
    name, report = ran.args
    assert name == "Notes" and isinstance(report, IndexReport)
    assert (report.added, report.unchanged) == (1, 2)
    qtbot.waitUntil(lambda: dialog.figures.text().startswith("3 files"), timeout=TIMEOUT_MS)

    dialog.watch_box.click()  # off: no longer watched, and said so
    qtbot.waitUntil(lambda: knowledge.watcher is not None
                    and knowledge.watcher.names() == [], timeout=TIMEOUT_MS)
    assert not dialog.watch_box.isChecked()
    index = SqliteFtsIndex()
    assert index.collection("Notes").watch is False
    index.close()
    dialog.watch_box.click()  # on again: a run for what changed meanwhile
    with qtbot.waitSignal(knowledge.indexed, timeout=TIMEOUT_MS):
        pass
    qtbot.waitUntil(lambda: dialog.watch_note.text() == "Indexed again when its files change.",
                    timeout=TIMEOUT_MS)
    dialog.close()


def test_what_changed_while_closed_is_indexed_at_start(qtbot: QtBot, tmp_path: Path) -> None:
    folder = notes(tmp_path)
    index = SqliteFtsIndex()
    index.create_collection("Notes", [str(folder)])
    index.create_collection("Still", [str(folder)])
    index.set_watch("Still", False)
    assert Indexer(index, "Notes").run().added == 2
    assert Indexer(index, "Still").run().added == 2
    index.close()
    (folder / "mill.md").unlink()  # while the app is closed

    knowledge = KnowledgeController()
    try:
        with qtbot.waitSignal(knowledge.indexed, timeout=TIMEOUT_MS) as ran:
            knowledge.start_watching()
        name, report = ran.args
        assert name == "Notes" and report.removed == 1
        qtbot.waitUntil(lambda: not knowledge.running and not knowledge.queue)
        index = SqliteFtsIndex()
        assert index.stats("Still").documents == 2  # not watched: left until asked
        index.close()
        dialog = KnowledgeDialog(knowledge)
        qtbot.addWidget(dialog)
        dialog.select("Still")
        qtbot.waitUntil(lambda: dialog.title.text() == "Still")
        assert not dialog.watch_box.isChecked() and dialog.watch_note.isHidden()
    finally:
        knowledge.close()
