"""Vectors in the real window, on llama.cpp: a collection given an embedding model in the
Knowledge dialog has its passages embedded by a model loaded beside the chat model (an engine
host of its own, through the window's router), and a reply finds a passage that shares no word
with the question, which only the vectors can find. The search runs off the GUI thread; an
embedding model that cannot be loaded is said on the banner while full text still answers.

The embedding model is a copy of the bundled chat model (no embedding GGUF is available here):
its vectors are poor, but every step is the real one."""

from __future__ import annotations

import shutil
from pathlib import Path

from pytestqt.qtbot import QtBot

from inglenook import paths
from inglenook.chat.knowledge_turn import recorded
from inglenook.knowledge.fts import SqliteFtsIndex
from inglenook.ui.knowledge.knowledge_dialog import KnowledgeDialog
from inglenook.ui.main_window import MainWindow
from tests.gui.conftest import chat

INDEX_TIMEOUT_MS = 120_000


def notes(tmp_path: Path) -> Path:
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "mill.md").write_text("# Mill\n\nThe barn owl nests in the old mill.\n")
    (folder / "bread.md").write_text("# Bread\n\nRye dough rests overnight before baking.\n")
    return folder


def open_dialog(qtbot: QtBot, window: MainWindow) -> KnowledgeDialog:
    window.show_knowledge()
    qtbot.waitUntil(lambda: window.findChild(KnowledgeDialog) is not None)
    dialog = window.findChild(KnowledgeDialog)
    assert dialog is not None
    return dialog


def idle(qtbot: QtBot, window: MainWindow) -> None:
    knowledge = window.knowledge
    qtbot.waitUntil(lambda: not (knowledge.running or knowledge.queue or knowledge.changing),
                    timeout=INDEX_TIMEOUT_MS)


def choose(qtbot: QtBot, dialog: KnowledgeDialog, path: str) -> None:
    combo = dialog.embed_model
    qtbot.waitUntil(lambda: combo.findData(path) >= 0, timeout=10_000)
    combo.setCurrentIndex(combo.findData(path))
    combo.activated.emit(combo.currentIndex())


def test_an_embedding_model_beside_the_chat_model_finds_what_full_text_cannot(
        qtbot: QtBot, real_window: MainWindow, bundled_model: Path, tmp_path: Path) -> None:
    window, knowledge = real_window, real_window.knowledge
    copy = paths.models_dir() / "embedder.gguf"  # in the library: the dialog offers it
    copy.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(bundled_model, copy)
    dialog = open_dialog(qtbot, window)
    name = knowledge.create("Notes")
    knowledge.add_paths(name, [str(notes(tmp_path))])
    idle(qtbot, window)
    dialog.select(name)
    qtbot.waitUntil(lambda: dialog.selected() is not None)
    choose(qtbot, dialog, str(copy))
    assert dialog.embed_model.currentText() == "embedder (a chat model)"
    idle(qtbot, window)
    index = SqliteFtsIndex()
    assert index.collection("Notes").embed_model == str(copy)
    assert index.vector_count("Notes") == index.stats("Notes").chunks == 2
    assert index.collection("Notes").embed_error == ""
    index.close()
    qtbot.waitUntil(lambda: "2 with vectors" in dialog.figures.text(), timeout=10_000)
    # Loaded beside the chat model, in a host of its own.
    loaded = {m.path for m in window.worker.client.loaded_models()}
    assert {str(bundled_model), str(copy)} <= loaded
    dialog.close()

    session = window.chats.session
    session.set_settings(session.settings.replace(knowledge=("Notes",)))
    chat(qtbot, window, "zymurgy quixotic")  # no word of any passage: only vectors find one
    given = recorded(window.chats.session.path[-1].provenance)
    assert given is not None and given.note == "" and given.notice == ""
    assert len(given.sources) >= 1 and not window.banner.isVisible()


def test_an_embedding_model_that_cannot_load_is_said_and_full_text_answers(
        qtbot: QtBot, real_window: MainWindow, tmp_path: Path) -> None:
    window = real_window
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + b"\0" * 64)
    index = SqliteFtsIndex()
    index.create_collection("Notes", [str(notes(tmp_path))], embed_model=str(broken))
    index.close()
    window.knowledge.index("Notes")
    idle(qtbot, window)
    index = SqliteFtsIndex()
    assert index.vector_count("Notes") == 0 and index.stats("Notes").chunks == 2
    assert index.collection("Notes").embed_error.startswith("Embedding failed after 0 of 2")
    index.close()
    session = window.chats.session
    session.set_settings(session.settings.replace(knowledge=("Notes",)))
    chat(qtbot, window, "Where does the barn owl nest?")
    given = recorded(window.chats.session.path[-1].provenance)
    assert given is not None and given.note.startswith("The question could not be embedded")
    assert [s.path for s in given.sources][:1] == [str(tmp_path / "notes" / "mill.md")]
    qtbot.waitUntil(window.banner.isVisible)
    assert "could not be embedded" in window.banner.text()


def test_the_model_picker_leaves_embedding_models_to_knowledge(
        qtbot: QtBot, window: MainWindow, tmp_path: Path) -> None:
    from tests.gguf_tools import write_gguf

    folder = paths.models_dir()
    folder.mkdir(parents=True, exist_ok=True)
    meta = {"general.architecture": "llama", "llama.context_length": 128}
    embedder = write_gguf(folder / "all-MiniLM-L6-v2-Q8_0.gguf", {**meta, "llama.pooling_type": 1})
    chat_model = write_gguf(folder / "tiny-chat.gguf", meta)
    picker = window.picker
    picker.refresh()
    listed = [picker.itemData(i) for i in range(picker.count())]
    assert str(chat_model) in listed and str(embedder) not in listed
    dialog = open_dialog(qtbot, window)
    qtbot.waitUntil(lambda: dialog.embed_model.findData(str(embedder)) >= 0, timeout=10_000)
    assert dialog.embed_model.itemText(dialog.embed_model.findData(str(embedder))) == \
        "all-MiniLM-L6-v2-Q8_0"
    dialog.close()


def test_a_collections_model_shown_before_the_library_is_read_is_then_found(
        qtbot: QtBot, window: MainWindow, tmp_path: Path) -> None:
    from inglenook.knowledge import collections as kc
    from tests.gguf_tools import write_gguf

    folder = paths.models_dir()
    folder.mkdir(parents=True, exist_ok=True)
    embedder = write_gguf(folder / "bge-small-en-v1.5-q8_0.gguf",
                          {"general.architecture": "bert", "bert.pooling_type": 2})
    index = SqliteFtsIndex()
    index.create_collection("Notes", [str(notes(tmp_path))], embed_model=str(embedder))
    summary = kc.summaries(index)[0]
    index.close()
    dialog = open_dialog(qtbot, window)
    qtbot.waitUntil(lambda: dialog.title.text() == "Notes", timeout=10_000)
    # The collection shown before the library's models are listed (they are read off the
    # GUI thread): its model stands in as "not found" until they arrive.
    dialog.embed_model.show_collection(summary)
    dialog.embed_model.fill(kc.embedding_choices())
    combo = dialog.embed_model
    assert combo.currentText() == "bge-small-en-v1.5-q8_0"
    assert [combo.itemData(i) for i in range(combo.count())].count(str(embedder)) == 1
    dialog.close()
