"""The Knowledge dialog on its controller: a collection made, a folder indexed off the GUI
thread with the unreadable file listed with its reason, and Cancel mid-run leaving a
consistent index that the next run completes."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from PySide6.QtWidgets import QMessageBox
from pytestqt.qtbot import QtBot

from inglenook.knowledge import convert, indexer
from inglenook.knowledge.fts import SqliteFtsIndex
from inglenook.ui.knowledge.knowledge_controller import KnowledgeController
from inglenook.ui.knowledge.knowledge_dialog import KnowledgeDialog
from tests.gui.test_accessibility import unnamed

TIMEOUT_MS = 20_000


def notes(tmp_path: Path, count: int = 2) -> Path:
    folder = tmp_path / "notes"
    folder.mkdir()
    for n in range(count):
        (folder / f"note{n:03}.md").write_text(f"# Note {n}\n\nThe owl number {n} hoots.\n")
    (folder / "blob.txt").write_bytes(b"\x00\x01\x02" * 10)
    return folder


def dialog(qtbot: QtBot) -> KnowledgeDialog:
    shown = KnowledgeDialog(KnowledgeController())
    qtbot.addWidget(shown)
    shown.show()
    return shown


def test_a_folder_is_indexed_and_what_was_not_read_is_listed(
        qtbot: QtBot, tmp_path: Path) -> None:
    folder = notes(tmp_path)
    d = dialog(qtbot)
    qtbot.waitUntil(lambda: d.knowledge.summaries == [], timeout=TIMEOUT_MS)
    assert d.title.text() == "No collections yet"
    d.name_edit.setText("  ")
    d.new_button.click()
    assert "needs a name" in d.message.text()
    d.name_edit.setText("Notes")
    d.new_button.click()
    qtbot.waitUntil(lambda: d.title.text() == "Notes", timeout=TIMEOUT_MS)
    d.name_edit.setText("notes ")
    d.new_button.click()
    assert "already a collection" in d.message.text() and d.name_edit.text() == "notes "
    d.add_paths([str(tmp_path / "gone")])
    assert "does not exist" in d.message.text()
    with qtbot.waitSignal(d.knowledge.indexed, timeout=TIMEOUT_MS):
        d.add_paths([str(folder)])
    assert d.progress.isHidden()
    assert "2 added" in d.message.text() and "1 not indexed" in d.message.text()
    qtbot.waitUntil(lambda: d.figures.text().startswith("2 files · 2 passages · indexed "),
                    timeout=TIMEOUT_MS)
    assert [d.roots.item(i).text() for i in range(d.roots.count())] == [str(folder)]
    assert d.problems_label.text() == "Not indexed: 1 file"
    assert d.problem_list.item(0).text().startswith("blob.txt — it holds binary data")
    assert unnamed(d) == []  # every control has a name and a description
    d.roots.item(0).setSelected(True)
    with qtbot.waitSignal(d.knowledge.indexed, timeout=TIMEOUT_MS):
        d.remove_selected()
    qtbot.waitUntil(lambda: d.roots.count() == 0, timeout=TIMEOUT_MS)
    assert d.figures.text().startswith("No folders")
    d.delete_selected()
    assert d.message.text() == "Forgetting Notes…"  # off the GUI thread
    qtbot.waitUntil(lambda: "Forgot Notes" in d.message.text(), timeout=TIMEOUT_MS)
    qtbot.waitUntil(lambda: d.collections.count() == 0, timeout=TIMEOUT_MS)


def hold_third_file(monkeypatch: pytest.MonkeyPatch) -> tuple[threading.Event, threading.Event]:
    """The run is held on its third file (held) until the test lets it go (go)."""
    held, go, converted = threading.Event(), threading.Event(), []
    real = indexer.convert

    def slow_third(*args: object, **kwargs: object) -> object:
        converted.append(1)
        if len(converted) == 3:
            held.set()
            go.wait(TIMEOUT_MS / 1000)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(indexer, "convert", slow_third)
    return held, go


def test_cancel_keeps_what_was_read_and_the_next_run_goes_on(
        qtbot: QtBot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = notes(tmp_path, 8)
    held, go = hold_third_file(monkeypatch)
    d = dialog(qtbot)
    d.name_edit.setText("Notes")
    d.create_collection()
    qtbot.waitUntil(lambda: d.selected() is not None, timeout=TIMEOUT_MS)
    d.add_paths([str(folder)])
    qtbot.waitUntil(held.is_set, timeout=TIMEOUT_MS)
    qtbot.waitUntil(lambda: d.progress.maximum() == 9, timeout=TIMEOUT_MS)
    assert d.progress.isVisible() and d.cancel_button.isVisible()
    assert "Reading" in d.progress_text.text() and "of 9 files" in d.progress_text.text()
    assert not d.reindex_button.isEnabled()
    with qtbot.waitSignal(d.knowledge.indexed, timeout=TIMEOUT_MS) as ended:
        d.cancel_button.click()
        go.set()
    assert ended.args[1].cancelled and "Cancelled: 3 added" in d.message.text()
    index = SqliteFtsIndex()
    assert index.stats("Notes").documents == 3  # whole documents only
    index.close()
    qtbot.waitUntil(d.reindex_button.isEnabled, timeout=TIMEOUT_MS)  # listed again
    with qtbot.waitSignal(d.knowledge.indexed, timeout=TIMEOUT_MS) as ended:
        d.reindex_button.click()
    report = ended.args[1]
    assert (report.added, report.unchanged, report.cancelled) == (5, 3, False)
    qtbot.waitUntil(lambda: d.figures.text().startswith("8 files · 8 passages"),
                    timeout=TIMEOUT_MS)


def test_a_collection_deleted_while_indexed_goes_quietly(
        qtbot: QtBot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = notes(tmp_path, 5)
    held, go = hold_third_file(monkeypatch)
    d = dialog(qtbot)
    d.name_edit.setText("Notes")
    d.create_collection()
    qtbot.waitUntil(lambda: d.selected() is not None, timeout=TIMEOUT_MS)
    d.add_paths([str(folder)])
    qtbot.waitUntil(held.is_set, timeout=TIMEOUT_MS)
    d.delete_selected()
    go.set()
    qtbot.waitUntil(lambda: not (d.knowledge.running or d.knowledge.changing),
                    timeout=TIMEOUT_MS)
    qtbot.waitUntil(d.progress.isHidden, timeout=TIMEOUT_MS)  # the lists read after the run
    qtbot.waitUntil(lambda: d.collections.count() == 0, timeout=TIMEOUT_MS)  # read again
    assert d.message.text() == "Forgot Notes (its files are untouched)."  # the run: no news


def confirm(qtbot: QtBot, d: KnowledgeDialog, button: QMessageBox.StandardButton) -> str:
    """Answer the Rebuild question; its text."""
    def shown() -> list[QMessageBox]:  # not one answered before, deleted later
        return [b for b in d.findChildren(QMessageBox, "knowledgeRebuildConfirm")
                if b.isVisible()]

    qtbot.waitUntil(lambda: len(shown()) == 1)
    (box,) = shown()
    text = f"{box.text()} {box.informativeText()}"
    box.button(button).click()
    return text


def indexed_collection(qtbot: QtBot, d: KnowledgeDialog, folder: Path) -> None:
    d.name_edit.setText("Notes")
    d.create_collection()
    qtbot.waitUntil(lambda: d.selected() is not None, timeout=TIMEOUT_MS)
    with qtbot.waitSignal(d.knowledge.indexed, timeout=TIMEOUT_MS):
        d.add_paths([str(folder)])
    qtbot.waitUntil(d.reindex_button.isEnabled, timeout=TIMEOUT_MS)


def test_rebuild_asks_first_then_reads_every_file_again_with_progress_and_cancel(
        qtbot: QtBot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = notes(tmp_path, 5)
    d = dialog(qtbot)
    indexed_collection(qtbot, d, folder)
    assert d.rebuild_button.isVisible() and d.rebuild_button.isEnabled()
    d.rebuild_button.click()
    text = confirm(qtbot, d, QMessageBox.StandardButton.Cancel)
    assert text.startswith("Read every file of Notes again from scratch? Its 5 files are read")
    assert not d.knowledge.running and not d.knowledge.queue  # nothing asked
    held, go = hold_third_file(monkeypatch)
    d.rebuild_button.click()
    confirm(qtbot, d, QMessageBox.StandardButton.Yes)
    qtbot.waitUntil(held.is_set, timeout=TIMEOUT_MS)
    qtbot.waitUntil(lambda: "of 6 files" in d.progress_text.text(), timeout=TIMEOUT_MS)
    assert d.progress_text.text().startswith("Rebuilding Notes: Reading")
    assert d.cancel_button.isVisible() and not d.rebuild_button.isEnabled()
    with qtbot.waitSignal(d.knowledge.indexed, timeout=TIMEOUT_MS) as ended:
        d.cancel_button.click()
        go.set()
    assert ended.args[1].cancelled and ended.args[1].updated == 3
    qtbot.waitUntil(d.reindex_button.isEnabled, timeout=TIMEOUT_MS)
    with qtbot.waitSignal(d.knowledge.indexed, timeout=TIMEOUT_MS) as ended:
        d.reindex_button.click()  # the rest of the rebuild
    assert (ended.args[1].updated, ended.args[1].unchanged) == (2, 3)
    assert not d.knowledge.running_rebuild


def test_follow_links_out_is_a_choice_of_each_collection(
        qtbot: QtBot, tmp_path: Path) -> None:
    folder = notes(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "far.md").write_text("# Far\n\nA distant comet.\n")
    (folder / "out").symlink_to(outside)
    d = dialog(qtbot)
    indexed_collection(qtbot, d, folder)
    assert d.follow_box.isVisible() and not d.follow_box.isChecked()  # off by default
    qtbot.waitUntil(lambda: d.problem_list.count() == 2, timeout=TIMEOUT_MS)
    assert "out — a symbolic link out of the collection's folders" in \
        d.problem_list.item(1).text()
    with qtbot.waitSignal(d.knowledge.indexed, timeout=TIMEOUT_MS) as ended:
        d.follow_box.click()
    assert ended.args[1].added == 1
    index = SqliteFtsIndex()
    assert index.collection("Notes").follow_links
    assert index.search(["Notes"], "distant comet")[0].path == str(folder / "out" / "far.md")
    index.close()
    again = dialog(qtbot)  # kept with the collection
    qtbot.waitUntil(lambda: again.selected() is not None, timeout=TIMEOUT_MS)
    assert again.follow_box.isChecked()
    with qtbot.waitSignal(d.knowledge.indexed, timeout=TIMEOUT_MS) as ended:
        d.follow_box.click()
    assert ended.args[1].removed == 1


def test_a_file_read_in_part_is_listed_with_what_was_left(
        qtbot: QtBot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(convert, "CSV_MAX_ROWS", 2)
    folder = notes(tmp_path)
    (folder / "birds.csv").write_text("bird\nowl\nwren\nkite\n")
    d = dialog(qtbot)
    indexed_collection(qtbot, d, folder)
    assert "1 read only in part" in d.message.text()
    qtbot.waitUntil(lambda: d.problem_list.count() == 2, timeout=TIMEOUT_MS)
    assert d.problems_label.text() == "Not indexed: 1 file · Read only in part: 1 file"
    assert d.problem_list.item(0).text() == \
        "birds.csv — only the first 2 rows read (a CSV is indexed up to that)"


def test_deleting_a_collection_and_choosing_its_model_run_off_the_gui_thread(
        qtbot: QtBot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A large collection's passages, full-text rows and vectors take seconds to delete."""
    threads: list[str] = []
    for method in ("remove_collection", "set_embed_model"):
        real = getattr(SqliteFtsIndex, method)

        def spy(self: SqliteFtsIndex, *args: object, _real=real, **kwargs: object) -> object:
            threads.append(threading.current_thread().name)
            return _real(self, *args, **kwargs)

        monkeypatch.setattr(SqliteFtsIndex, method, spy)
    d = dialog(qtbot)
    name = d.knowledge.create("Notes")
    d.select(name)
    qtbot.waitUntil(lambda: d.title.text() == name, timeout=TIMEOUT_MS)
    with qtbot.waitSignal(d.knowledge.changed, timeout=TIMEOUT_MS):
        d.knowledge.set_embed_model(name, "")
    with qtbot.waitSignal(d.knowledge.deleted, timeout=TIMEOUT_MS):
        d.delete_selected()
    assert len(threads) == 2 and threading.main_thread().name not in threads


def test_enter_in_the_name_makes_one_collection_and_says_so(qtbot: QtBot) -> None:
    """Enter went to the line edit and to the dialog's default button: the second, with the
    name cleared, said "A collection needs a name." after the first had made it."""
    from PySide6.QtCore import Qt

    d = dialog(qtbot)
    qtbot.waitUntil(lambda: d.knowledge.summaries == [], timeout=TIMEOUT_MS)
    d.name_edit.setFocus()
    qtbot.keyClicks(d.name_edit, "Recipes")
    qtbot.keyClick(d.name_edit, Qt.Key.Key_Return)
    assert d.message.text() == "Made Recipes: now add the folders and files it holds."
    assert d.isVisible()
    qtbot.waitUntil(lambda: d.title.text() == "Recipes", timeout=TIMEOUT_MS)
    assert d.message.text() == "Made Recipes: now add the folders and files it holds."


def test_while_a_run_reads_or_embeds_the_figures_say_so_not_zero(
        qtbot: QtBot, tmp_path: Path) -> None:
    """A collection being indexed for the first time showed "0 files · 0 passages"."""
    from inglenook.knowledge.indexer import Progress

    d = dialog(qtbot)
    qtbot.waitUntil(lambda: d.knowledge.summaries == [], timeout=TIMEOUT_MS)
    d.name_edit.setText("Notes")
    d.new_button.click()
    qtbot.waitUntil(lambda: d.title.text() == "Notes", timeout=TIMEOUT_MS)
    release = threading.Event()
    real = indexer.Indexer._embed

    def held(self: indexer.Indexer, model: str, report: indexer.IndexReport) -> None:
        self.progress(Progress(0, 2, phase="embedding"))
        release.wait(TIMEOUT_MS / 1000)
        real(self, model, report)

    folder = notes(tmp_path)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(indexer.Indexer, "_embed", held)
        d.add_paths([str(folder)])
        qtbot.waitUntil(lambda: "Making vectors" in d.figures.text(), timeout=TIMEOUT_MS)
        assert "0 files" not in d.collections.item(0).text()
        assert "indexing…" in d.collections.item(0).text()
        release.set()
        qtbot.waitUntil(lambda: d.figures.text().startswith("2 files · 2 passages"),
                        timeout=TIMEOUT_MS)
    assert d.collections.item(0).text() == "Notes\n2 files · 2 passages"
