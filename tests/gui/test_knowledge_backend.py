"""Where a collection's vectors live, chosen in the Knowledge dialog: this computer (SQLite) or
Qdrant, here in its real local mode under the test's data folder. A new collection put in Qdrant
is indexed and searched there; an indexed one moves only once the user confirms (its vectors are
made again), back and forth; a refused place is said under the row and changes nothing. Moves
and a Qdrant collection's removal run off the GUI thread. The embedder is test_vectors.py's."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtWidgets import QMessageBox
from pytestqt.qtbot import QtBot

from inglenook.knowledge import qdrant_store
from inglenook.knowledge.fts import SqliteFtsIndex
from inglenook.ui.knowledge.knowledge_controller import KnowledgeController
from inglenook.ui.knowledge.knowledge_dialog import KnowledgeDialog
from tests.gui.test_accessibility import unnamed
from tests.unit.knowledge.test_vectors import WordEmbedder, folder

TIMEOUT_MS = 20_000
MODEL = "/models/words.gguf"
DOWN = "http://127.0.0.1:1"  # nothing listens on port 1: refused at once


@pytest.fixture(autouse=True)
def clients() -> Iterator[None]:
    """Each test's local-mode folder is unlocked and written when it ends."""
    yield
    qdrant_store.close_clients()


def dialog(qtbot: QtBot) -> KnowledgeDialog:
    shown = KnowledgeDialog(KnowledgeController(embedder_for=WordEmbedder))
    qtbot.addWidget(shown)
    shown.show()
    return shown


def idle(qtbot: QtBot, d: KnowledgeDialog) -> None:
    qtbot.waitUntil(lambda: not (d.knowledge.running or d.knowledge.queue or d.knowledge.changing),
                    timeout=TIMEOUT_MS)


def indexed(qtbot: QtBot, d: KnowledgeDialog, docs: Path | None) -> str:
    """A collection named Docs with vectors of MODEL, selected (indexed when docs given)."""
    name = d.knowledge.create("Docs")
    d.select(name)
    qtbot.waitUntil(lambda: d.title.text() == name, timeout=TIMEOUT_MS)
    with qtbot.waitSignal(d.knowledge.changed, timeout=TIMEOUT_MS):
        d.knowledge.set_embed_model(name, MODEL)  # off the GUI thread
    if docs is not None:
        d.knowledge.add_paths(name, [str(docs)])
        idle(qtbot, d)
        qtbot.waitUntil(lambda: "3 with vectors" in d.figures.text(), timeout=TIMEOUT_MS)
    return name


def choose(d: KnowledgeDialog, backend: str, url: str = "") -> None:
    """As the user does: the choice, the URL typed, Apply."""
    row = d.backend
    row.choice.setCurrentIndex(row.choice.findData(backend))
    row.choice.activated.emit(row.choice.currentIndex())
    row.url.setText(url)
    row.url.textEdited.emit(url)
    row.apply_button.click()


def answer(qtbot: QtBot, d: KnowledgeDialog, button: QMessageBox.StandardButton) -> str:
    """Answer the confirmation; its text."""
    def shown() -> list[QMessageBox]:  # not the last one answered, deleted later
        return [b for b in d.findChildren(QMessageBox, "knowledgeMoveVectors") if b.isVisible()]

    qtbot.waitUntil(lambda: len(shown()) == 1)
    (box,) = shown()
    text = f"{box.text()} {box.informativeText()}"
    box.button(button).click()
    return text


def moved(qtbot: QtBot, d: KnowledgeDialog) -> None:
    qtbot.waitUntil(lambda: not d.knowledge.moving, timeout=TIMEOUT_MS)


def in_sqlite(index: SqliteFtsIndex) -> int:
    return int(index._conn.execute("SELECT count(*) FROM chunk_vectors").fetchone()[0])


def qdrant_points(index: SqliteFtsIndex) -> set[int]:
    client = qdrant_store._client("", index.qdrant_dir).client
    name = index.collection("Docs").qdrant_name
    if not client.collection_exists(name):
        return set()
    found, _ = client.scroll(name, limit=1000)
    return {int(p.payload["chunk_id"]) for p in found}


def chunk_ids(index: SqliteFtsIndex) -> set[int]:
    return {r[0] for r in index._conn.execute("SELECT id FROM chunks")}


def test_a_new_collection_in_qdrant_is_indexed_and_searched_there(
        qtbot: QtBot, tmp_path: Path) -> None:
    d = dialog(qtbot)
    name = indexed(qtbot, d, None)
    row = d.backend
    assert row.choice.currentText() == "This computer (SQLite)" and row.url.isHidden()
    assert row.note.text() == "Vectors: SQLite (this database)" and row.apply_button.isHidden()
    row.choice.setCurrentIndex(row.choice.findData("qdrant"))
    row.choice.activated.emit(row.choice.currentIndex())
    assert row.url.isVisible() and row.url.placeholderText() == \
        "Empty: local mode, in the data folder"
    assert row.note.text() == "Apply to keep its vectors in Qdrant's local mode (in the data " \
        "folder)."
    assert unnamed(d) == []
    row.apply_button.click()  # no vectors yet: nothing to ask
    assert d.findChild(QMessageBox) is None
    moved(qtbot, d)
    assert row.note.text().startswith("Vectors: Qdrant (local mode), collection inglenook-")
    assert row.note.property("kind") == "info" and row.apply_button.isHidden()
    assert d.message.text() == f"{name}: vectors are kept in Qdrant (local mode), " \
        f"collection {d.selected().qdrant_name} from now on."  # type: ignore[union-attr]
    d.add_paths([str(folder(tmp_path))])
    idle(qtbot, d)
    qtbot.waitUntil(lambda: "3 with vectors" in d.figures.text(), timeout=TIMEOUT_MS)
    index = SqliteFtsIndex(embedder=WordEmbedder())
    assert index.collection(name).backend == "qdrant" and in_sqlite(index) == 0
    assert qdrant_points(index) == chunk_ids(index)
    (hit, *_) = index.search([name], "feline", 3)  # only the vectors know it: from Qdrant
    assert hit.path.endswith("cat.md") and index.search_note == ""
    index.close()


def test_an_indexed_collection_moves_back_and_forth_once_confirmed(
        qtbot: QtBot, tmp_path: Path) -> None:
    d = dialog(qtbot)
    name = indexed(qtbot, d, folder(tmp_path))
    row = d.backend
    choose(d, "qdrant")
    text = answer(qtbot, d, QMessageBox.StandardButton.Cancel)
    assert text.startswith(f"Keep the vectors of {name} in Qdrant's local mode")
    assert "3 vectors in this computer's knowledge database (SQLite) are dropped" in text
    assert "embeds its passages again with words.gguf" in text
    assert row.choice.currentData() == "" and row.url.isHidden()  # as it was
    index = SqliteFtsIndex()
    assert index.collection(name).backend == "" and in_sqlite(index) == 3

    choose(d, "qdrant")
    answer(qtbot, d, QMessageBox.StandardButton.Yes)
    assert not row.choice.isEnabled() and row.note.text() == \
        "Trying Qdrant's local mode (in the data folder)…"
    moved(qtbot, d)
    idle(qtbot, d)  # the run that embeds them again
    qtbot.waitUntil(lambda: "3 with vectors" in d.figures.text(), timeout=TIMEOUT_MS)
    assert index.collection(name).backend == "qdrant" and in_sqlite(index) == 0
    assert qdrant_points(index) == chunk_ids(index)
    qdrant_name = index.collection(name).qdrant_name

    choose(d, "")
    text = answer(qtbot, d, QMessageBox.StandardButton.Yes)
    assert "3 vectors in Qdrant's local mode (in the data folder) are dropped" in text
    moved(qtbot, d)
    idle(qtbot, d)
    qtbot.waitUntil(lambda: "3 with vectors" in d.figures.text(), timeout=TIMEOUT_MS)
    assert index.collection(name).backend == "" and in_sqlite(index) == 3
    client = qdrant_store._client("", index.qdrant_dir).client
    assert not client.collection_exists(qdrant_name)  # what it had in Qdrant went
    assert row.note.text() == "Vectors: SQLite (this database)"
    index.close()


def test_a_refused_place_is_said_and_nothing_changes(
        qtbot: QtBot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d = dialog(qtbot)
    name = indexed(qtbot, d, folder(tmp_path))
    row = d.backend
    choose(d, "qdrant", "localhost:6333")  # told at once, before asking
    assert d.findChild(QMessageBox) is None
    assert row.note.text() == "localhost:6333 is not a Qdrant server's URL (http://host:6333)."
    assert row.note.property("kind") == "error" and row.url.text() == "localhost:6333"

    choose(d, "qdrant", DOWN)  # well-formed: tried off the GUI thread once confirmed
    answer(qtbot, d, QMessageBox.StandardButton.Yes)
    assert row.note.text() == f"Trying Qdrant at {DOWN}…"
    moved(qtbot, d)
    assert row.note.text().startswith(f"Qdrant at {DOWN} could not be used (")
    assert row.note.property("kind") == "error"
    assert row.url.text() == DOWN and row.apply_button.isEnabled()  # to be corrected
    with qtbot.waitSignal(d.knowledge.summaries_ready, timeout=TIMEOUT_MS):
        d.knowledge.read_summaries()  # the lists read again keep what is being corrected
    assert row.url.text() == DOWN and row.note.property("kind") == "error"
    index = SqliteFtsIndex()
    assert index.collection(name).backend == "" and in_sqlite(index) == 3

    monkeypatch.setattr(qdrant_store, "missing_extra", lambda: qdrant_store.NO_EXTRA)
    choose(d, "qdrant")
    assert row.note.text() == "Qdrant needs the qdrant extra: pip install 'inglenook[qdrant]'."
    assert index.collection(name).backend == "" and in_sqlite(index) == 3
    index.close()


def test_a_qdrant_collection_is_forgotten_at_once_and_its_server_told_after(
        qtbot: QtBot, tmp_path: Path) -> None:
    index = SqliteFtsIndex()
    index.create_collection("Far", [], backend="qdrant", qdrant_url=DOWN)
    index.close()
    d = dialog(qtbot)
    qtbot.waitUntil(lambda: d.title.text() == "Far", timeout=TIMEOUT_MS)
    assert d.backend.note.text().startswith(f"Vectors: Qdrant {DOWN}, collection inglenook-")
    d.delete_selected()
    qtbot.waitUntil(lambda: d.message.text() == "Forgot Far (its files are untouched).",
                    timeout=TIMEOUT_MS)
    qtbot.waitUntil(lambda: "Its vectors stay there" in d.message.text(), timeout=TIMEOUT_MS)
    assert d.message.text().startswith(f"Qdrant at {DOWN} could not be used (")
