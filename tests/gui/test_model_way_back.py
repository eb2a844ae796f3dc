"""After Unload there is a way back, and the loaded model is marked: the picker says no model is
loaded, the composer offers "Load <model>" (a button, and Enter loads it and sends), the loaded
model has a ● in the picker and the Library, a file opened from elsewhere shows its size and
type, Library names are cut at their end, and an embedding model is marked and not offered to
chat with (fake engine)."""

from __future__ import annotations

import os
from pathlib import Path

from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from inglenook import paths
from inglenook.ui.main_window import MainWindow
from inglenook.ui.models.library import COLUMNS, NAME_ROOM
from inglenook.ui.models.picker import LOADED_MARK
from tests.gui.conftest import LOAD_TIMEOUT_MS, wait_reply


def unload(qtbot: QtBot, window: MainWindow) -> None:
    with qtbot.waitSignal(window.models.unloaded, timeout=LOAD_TIMEOUT_MS):
        window.worker.unload()


def test_after_unload_the_composer_offers_to_load_the_model_again(
        qtbot: QtBot, window: MainWindow) -> None:
    name = Path(window.models.path).stem
    assert window.picker.currentText().startswith(LOADED_MARK)
    unload(qtbot, window)
    assert window.picker.currentIndex() == -1  # not the model that is gone
    assert window.picker.placeholderText() == "No model loaded"
    composer = window.composer
    assert composer.no_model.isVisible()
    assert composer.no_model_label.text() == f"No model loaded — Load {name} to chat."
    assert composer.load_button.text() == "Load" and name in composer.load_button.toolTip()
    with qtbot.waitSignal(window.model_ready, timeout=LOAD_TIMEOUT_MS):
        qtbot.mouseClick(composer.load_button, Qt.MouseButton.LeftButton)
    assert not composer.no_model.isVisible()
    assert window.picker.currentText().startswith(f"{LOADED_MARK} {name}")


def test_enter_with_the_model_unloaded_loads_it_and_sends(
        qtbot: QtBot, window: MainWindow) -> None:
    unload(qtbot, window)
    assert window.composer.button.isEnabled()  # Send is not grey: it loads first
    window.composer.edit.setPlainText("Are you back?")
    with qtbot.waitSignal(window.model_ready, timeout=LOAD_TIMEOUT_MS):
        qtbot.keyClick(window.composer.edit, Qt.Key.Key_Return)
    wait_reply(qtbot, window)
    assert window.chats.session.path[0].content == "Are you back?"
    assert window.composer.edit.toPlainText() == ""


def test_the_library_marks_the_loaded_model_and_the_embedding_model(
        qtbot: QtBot, window: MainWindow, minilm_model: Path) -> None:
    paths.models_dir().mkdir(parents=True, exist_ok=True)
    os.symlink(minilm_model, paths.models_dir() / "all-minilm-l6-v2-embedding.gguf")
    window.models.show_dialog()
    library = window.models._dialog.library  # type: ignore[union-attr]
    items = [library.table.topLevelItem(i) for i in range(library.table.topLevelItemCount())]
    names = {item.data(0, Qt.ItemDataRole.UserRole): item.text(0) for item in items}
    loaded = window.models.model.path
    assert names[loaded].startswith(f"{LOADED_MARK} ")
    embedding = str(paths.models_dir() / "all-minilm-l6-v2-embedding.gguf")
    assert names[embedding].endswith("Embedding") and LOADED_MARK not in names[embedding]
    assert library.table.textElideMode() == Qt.TextElideMode.ElideRight
    window.models._dialog.resize(640, 560)  # type: ignore[union-attr]
    library.fit_columns()
    assert library.table.header().sectionSize(0) >= NAME_ROOM  # Source gave way, not the name
    assert library.table.header().isSectionHidden(COLUMNS.index("Source"))
    library.select(loaded)
    assert library.use_button.text() == "Loaded" and not library.use_button.isEnabled()
    library.select(embedding)
    assert not library.use_button.isEnabled()
    assert "does not chat" in library.use_button.toolTip()
    window.picker.refresh()
    assert window.picker.findData(embedding) < 0  # not offered as a chat model
    unload(qtbot, window)
    assert not any(library.table.topLevelItem(i).text(0).startswith(LOADED_MARK)
                   for i in range(library.table.topLevelItemCount()))
    window.models._dialog.close()  # type: ignore[union-attr]


def test_a_file_opened_from_elsewhere_shows_its_size_and_type(
        qtbot: QtBot, window: MainWindow, gemma_model: Path) -> None:
    with qtbot.waitSignal(window.model_ready, timeout=LOAD_TIMEOUT_MS):
        window.models.open_paths([str(gemma_model)])
    text = window.picker.currentText()
    assert text.startswith(f"{LOADED_MARK} {gemma_model.stem}")
    assert " MB" in text and "Q4_K_M" in text.upper()
