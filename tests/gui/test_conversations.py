"""Conversations in the window: the sidebar, switching, branches, search, delete with undo,
and replies that survive a restart."""

from __future__ import annotations

import hashlib
import json

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDoubleSpinBox, QFileDialog, QInputDialog, QMessageBox
from pytestqt.qtbot import QtBot

from inglenook.store import Store
from inglenook.ui.chat.details import DetailsDialog
from inglenook.ui.chat.inline_edit import InlineEdit
from inglenook.ui.chat.prompt_dialog import PromptDialog
from inglenook.ui.history.search_dialog import SearchDialog
from inglenook.ui.main_window import MainWindow
from tests.gui.conftest import start_reply, wait_reply


def chat(qtbot: QtBot, win: MainWindow, text: str) -> None:
    start_reply(qtbot, win, text)
    wait_reply(qtbot, win)


def sidebar_titles(win: MainWindow) -> list[str]:
    items = [win.sidebar.list.item(i) for i in range(win.sidebar.list.count())]
    return [it.text() for it in items if it.data(Qt.ItemDataRole.UserRole) is not None]


def test_conversations_are_listed_and_reopened(qtbot: QtBot, window: MainWindow) -> None:
    chat(qtbot, window, "What is the capital of France?")
    first = window.chats.session.conv_id
    qtbot.mouseClick(window.new_chat_button, Qt.MouseButton.LeftButton)
    chat(qtbot, window, "Name a colour.")
    assert sidebar_titles(window) == ["Name a colour.", "What is the capital of France?"]
    window.chats.open(first)
    assert window.chat.bubbles[0].text == "What is the capital of France?"
    assert [m.role for m in window.chats.session.turns()] == ["user", "assistant"]


def test_regenerate_makes_a_branch_you_can_page_through(qtbot: QtBot, window: MainWindow) -> None:
    chat(qtbot, window, "Name a colour.")
    first = window.chat.bubbles[-1].text
    with qtbot.waitSignal(window.reply_started, timeout=60_000):
        qtbot.mouseClick(window.chat.bubbles[-1].regenerate_button, Qt.MouseButton.LeftButton)
    wait_reply(qtbot, window)
    reply = window.chat.bubbles[-1]
    assert reply.sibling_label.isVisible() and reply.sibling_label.text() == "2/2"
    qtbot.mouseClick(reply.previous_button, Qt.MouseButton.LeftButton)
    reply = window.chat.bubbles[-1]
    assert reply.sibling_label.text() == "1/2" and reply.text == first
    # the branch on screen is what the model sees
    assert window.chats.session.turns()[-1].content == first


def test_search_opens_the_conversation_at_the_match(qtbot: QtBot, window: MainWindow) -> None:
    window.resize(1000, 600)
    for n in range(8):  # the match ends up far from the top and from the bottom
        chat(qtbot, window, f"A long question number {n}. " * 6)
    chat(qtbot, window, "Tell me about the zeppelin.")
    for n in range(8):
        chat(qtbot, window, f"Another long question number {n}. " * 6)
    target = window.chats.session.conv_id
    qtbot.mouseClick(window.new_chat_button, Qt.MouseButton.LeftButton)
    chat(qtbot, window, "Name a colour.")
    window.history.search()
    dialog = window.findChild(SearchDialog)
    dialog.query.setText("zeppelin")
    dialog.run_query()
    assert dialog.results.count() >= 1
    _, hit_id = dialog.results.item(0).data(Qt.ItemDataRole.UserRole)
    dialog._choose(dialog.results.item(0))
    assert window.chats.session.conv_id == target
    hit = window.chat.bubble_of(hit_id)
    assert hit is not None and "zeppelin" in hit.text
    assert window.chat.index_of(hit_id) in (16, 17)
    assert hit.body.selected_text().lower() == "zeppelin"  # the match stands out

    def in_view(bubble) -> bool:
        top = bubble.mapTo(window.chat.viewport(), bubble.rect().topLeft()).y()
        return 0 <= top < window.chat.viewport().height()

    # Laid out (the column is taller than the view), the match shown, not the end of the chat.
    last = window.chat.row_count - 1
    qtbot.waitUntil(lambda: window.chat.verticalScrollBar().maximum() > 1000 and in_view(hit)
                    and last not in window.chat.visible_rows(), timeout=10_000)


def test_delete_offers_undo(qtbot: QtBot, window: MainWindow) -> None:
    chat(qtbot, window, "Remember this.")
    conv = window.chats.session.conv_id
    window.history.delete(conv)
    assert sidebar_titles(window) == [] and not window.chat.bubbles
    assert window.banner.action_button.isVisible()
    qtbot.mouseClick(window.banner.action_button, Qt.MouseButton.LeftButton)
    assert sidebar_titles(window) == ["Remember this."]
    assert window.chats.session.conv_id == conv and window.chat.bubbles[0].text == "Remember this."


def test_replies_survive_a_restart(qtbot: QtBot, window: MainWindow) -> None:
    chat(qtbot, window, "What is the capital of France?")
    reply = window.chat.bubbles[-1].text
    window.close()
    store = Store()
    try:
        (conv,) = store.conversations()
        path = store.active_path(conv.id)
        assert [m.content for m in path] == ["What is the capital of France?", reply]
        assert path[-1].status == "complete"
        prov = path[-1].provenance
        assert prov.model.file.endswith(".gguf") and prov.sampling.temperature == 0
        assert prov.stats.generated_tokens > 0 and prov.seed == 7 and prov.finish == "stop"
    finally:
        store.close()


def test_editing_a_question_in_place_makes_a_branch(qtbot: QtBot, window: MainWindow) -> None:
    chat(qtbot, window, "Name a colour.")
    qtbot.mouseClick(window.chat.bubbles[0].edit_button, Qt.MouseButton.LeftButton)
    editor = window.chat.bubbles[0].findChild(InlineEdit)
    assert editor is not None and editor.editor.toPlainText() == "Name a colour."
    # In view, with room for it (the bubble's text hidden, Qt had no height for it: 0 px).
    qtbot.waitUntil(lambda: editor.isVisible() and window.chat.bubbles[0].height()
                    > editor.height() > 40, timeout=5_000)
    qtbot.keyClick(editor.editor, Qt.Key.Key_Escape)  # cancel: nothing changes
    qtbot.waitUntil(lambda: window.chat.bubbles[0].findChild(InlineEdit) is None, timeout=5_000)
    assert window.chat.bubbles[0].body.isVisibleTo(window.chat.bubbles[0])
    qtbot.mouseClick(window.chat.bubbles[0].edit_button, Qt.MouseButton.LeftButton)
    editor = window.chat.bubbles[0].findChild(InlineEdit)
    editor.editor.setPlainText("Name a fruit.")
    with qtbot.waitSignal(window.reply_started, timeout=60_000):
        qtbot.keyClick(editor.editor, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    wait_reply(qtbot, window)
    question, reply = window.chat.bubbles
    assert question.text == "Name a fruit." and question.sibling_label.text() == "2/2"
    assert reply.text and window.chats.session.turns()[0].content == "Name a fruit."
    qtbot.mouseClick(question.previous_button, Qt.MouseButton.LeftButton)
    assert [b.text for b in window.chat.bubbles][:1] == ["Name a colour."]
    assert len(window.chat.bubbles) == 2  # the original question with its own reply


def test_presets_fill_the_panel_and_stay_with_the_chat(
        qtbot: QtBot, window: MainWindow, monkeypatch: pytest.MonkeyPatch) -> None:
    bar = window.preset_bar
    names = [bar.combo.itemData(i) for i in range(bar.combo.count())]
    assert names[:4] == ["Balanced", "Precise", "Creative", "Code"]
    bar.combo.setCurrentIndex(names.index("Creative"))
    bar.combo.activated.emit(bar.combo.currentIndex())
    assert window.panel.sampling().temperature == 1.0
    assert "imaginative" in window.panel.system_prompt()
    chat(qtbot, window, "Tell me a tale.")
    assert window.chats.last_request.sampling.temperature == 1.0
    creative_chat = window.chats.session.conv_id
    assert window.store.conversation(creative_chat).preset == "Creative"

    monkeypatch.setattr(QInputDialog, "getText",
                        staticmethod(lambda *args, **kwargs: ("Mine", True)))
    window.panel.findChild(QDoubleSpinBox, "temperature_spin").setValue(0.4)
    assert bar.combo.currentData() is None  # edited values are no longer the preset
    qtbot.mouseClick(bar.save_button, Qt.MouseButton.LeftButton)
    assert bar.combo.currentData() == "Mine" and bar.delete_button.isEnabled()

    qtbot.mouseClick(window.new_chat_button, Qt.MouseButton.LeftButton)
    bar.combo.setCurrentIndex(names.index("Precise"))
    bar.combo.activated.emit(bar.combo.currentIndex())
    assert window.panel.sampling().temperature == 0.2
    window.chats.open(creative_chat)  # reopening brings its own settings back
    assert window.panel.sampling().temperature == 0.4 and bar.combo.currentData() == "Mine"


def test_export_and_import_through_the_window(
        qtbot: QtBot, window: MainWindow, monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    chat(qtbot, window, "Remember the word teapot.")
    original = [(m.role, m.content) for m in window.chats.session.path]
    target = tmp_path / "chat.json"
    monkeypatch.setattr(QFileDialog, "getSaveFileName",
                        staticmethod(lambda *a, **k: (str(target), "Inglenook JSON (*.json)")))
    window.history.export_conversation()
    assert json.loads(target.read_text())["title"] == "Remember the word teapot."
    markdown = tmp_path / "chat.md"
    monkeypatch.setattr(QFileDialog, "getSaveFileName",
                        staticmethod(lambda *a, **k: (str(markdown), "Markdown (*.md)")))
    window.history.export_conversation()
    assert "teapot" in markdown.read_text()
    monkeypatch.setattr(QFileDialog, "getOpenFileName",
                        staticmethod(lambda *a, **k: (str(target), "")))
    before = window.chats.session.conv_id
    window.history.import_conversations()
    qtbot.waitUntil(lambda: not window.history.importing, timeout=30_000)
    assert window.chats.session.conv_id != before
    assert [(m.role, m.content) for m in window.chats.session.path] == original
    assert len(sidebar_titles(window)) == 2


def test_details_show_how_a_reply_was_made(qtbot: QtBot, window: MainWindow) -> None:
    chat(qtbot, window, "Hi")
    window.chats.actions.show_details(window.chat.bubbles[-1])
    dialog = window.findChild(DetailsDialog)
    assert dialog.values["Outcome"].text() == "Complete"
    assert dialog.values["Seed"].text() == "7"
    assert dialog.values["File"].text().endswith(".gguf")
    assert "generated" in dialog.values["Tokens"].text()
    assert "tok/s" in dialog.values["Speed"].text()
    n_batch = window.models.model.n_batch
    assert dialog.values["Threads"].text() == \
        f"1 for the reply, {window.models.model.n_threads_batch} for the prompt (batch {n_batch})"
    details = json.loads(dialog.as_json())  # the record as stored, for bug reports
    assert details["status"] == "complete" and details["seed"] == 7
    assert details["stats"]["generated_tokens"] > 0
    qtbot.mouseClick(dialog.prompt_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: window.findChild(PromptDialog) is not None, timeout=30_000)
    prompt = window.findChild(PromptDialog)
    assert "<|im_start|>" in prompt.view.prompt and "user\nHi" in prompt.view.prompt
    assert "control tokens" in prompt.summary.text()
    prompt.close()
    dialog.close()


def test_delete_from_here_removes_the_rest_of_the_branch(
        qtbot: QtBot, window: MainWindow, monkeypatch: pytest.MonkeyPatch) -> None:
    chat(qtbot, window, "First question.")
    chat(qtbot, window, "Second question.")
    monkeypatch.setattr(QMessageBox, "question",
                        staticmethod(lambda *a, **k: QMessageBox.StandardButton.Yes))
    qtbot.mouseClick(window.chat.bubbles[2].delete_button, Qt.MouseButton.LeftButton)
    assert [b.text for b in window.chat.bubbles][:1] == ["First question."]
    assert len(window.chat.bubbles) == 2 and len(window.chats.session.path) == 2


def test_reply_provenance_names_the_model_file_and_its_sha256(
        qtbot: QtBot, window: MainWindow, bundled_model) -> None:
    qtbot.waitUntil(lambda: bool(window.models.sha256), timeout=60_000)
    chat(qtbot, window, "Hi")
    model = window.chats.session.path[-1].provenance.model
    assert model.sha256 == hashlib.sha256(bundled_model.read_bytes()).hexdigest()
    assert model.quantization == "Q4_1"


def test_default_settings_are_shown_as_the_balanced_preset(window: MainWindow) -> None:
    window.side.apply_preset(next(p for p in window.store.presets() if p.name == "Balanced"))
    window.side.refresh_presets()
    assert window.preset_bar.combo.currentData() == "Balanced"
