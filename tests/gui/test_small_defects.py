"""The small defects of issue 35, point 8: each a user's minute lost (fake engine)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDoubleSpinBox, QFileDialog, QInputDialog, QPlainTextEdit
from pytestqt.qtbot import QtBot

from inglenook.engine.protocol import PromptToken, PromptView
from inglenook.ui import theme
from inglenook.ui.chat.bubble import READING, WAITING
from inglenook.ui.chat.prompt_dialog import WORD_JOINER, PromptDialog
from inglenook.ui.history.dialogs import file_stem
from inglenook.ui.main_window import MainWindow
from inglenook.ui.models.quantize_dialog import QuantizeDialog
from inglenook.ui.window.help import ShortcutsDialog
from tests.gui.conftest import REPLY_TIMEOUT_MS, Script, chat, start_reply, wait_reply

SLOW = {"match": "story", "text": " ".join(f"w{i}" for i in range(40)), "token_ms": 40}


def test_a_plain_model_reads_its_prompt_it_does_not_think(
        qtbot: QtBot, window: MainWindow, script: Script) -> None:
    script.write(default={"text": "Slow first word", "token_ms": 400})
    start_reply(qtbot, window, "Hello")
    bubble = window.chat.bubbles[-1]
    qtbot.waitUntil(lambda: window.chats.session.reply is not None
                    and window.chats.session.reply.phase == "streaming",
                    timeout=REPLY_TIMEOUT_MS)
    assert window.status_bar.reply.text.text() == READING and bubble.notice.text() == READING
    wait_reply(qtbot, window)
    assert window.status_bar.reply.text.text() == "" and not bubble.notice.isVisible()


def test_a_reply_waiting_its_turn_says_so_and_a_cancelled_one_never_started(
        qtbot: QtBot, window: MainWindow, script: Script) -> None:
    script.write([SLOW])
    start_reply(qtbot, window, "A long story.")
    qtbot.mouseClick(window.new_chat_button, Qt.MouseButton.LeftButton)
    start_reply(qtbot, window, "Name a colour.")
    qtbot.waitUntil(window.queue_notice.isVisible, timeout=REPLY_TIMEOUT_MS)
    reply = window.chat.bubbles[-1]
    assert reply.notice.text() == WAITING
    # not "Reading the prompt…" under "Waiting for its turn…"
    assert window.status_bar.reply.text.text() == ""
    with qtbot.waitSignal(window.reply_finished, timeout=REPLY_TIMEOUT_MS):
        qtbot.mouseClick(window.queue_notice.stop_own_button, Qt.MouseButton.LeftButton)
    assert reply.notice.text() == "Cancelled before it started: taken out of the queue."


def test_the_view_menu_marks_the_panels_shown(qtbot: QtBot, window: MainWindow) -> None:
    view = next(a.menu() for a in window.menuBar().actions() if a.text() == "&View")
    sidebar = window.command_actions["toggleSidebar"]
    panel = window.command_actions["toggleSidePanel"]
    window.panel_button.setChecked(True)
    view.aboutToShow.emit()
    assert sidebar.isCheckable() and sidebar.isChecked() and panel.isChecked()
    panel.trigger()
    sidebar.trigger()
    view.aboutToShow.emit()
    assert window.side_panel.isHidden() and window.sidebar.isHidden()
    assert not panel.isChecked() and not sidebar.isChecked()
    sidebar.trigger()
    view.aboutToShow.emit()
    assert sidebar.isChecked() and not window.sidebar.isHidden()


def test_the_shortcut_sheet_shows_every_key_whole(qtbot: QtBot, window: MainWindow) -> None:
    window.show_shortcuts()
    dialog = window.findChild(ShortcutsDialog)
    qtbot.waitExposed(dialog)
    table = dialog.table
    header = table.horizontalHeader()
    assert header.sectionSize(2) >= table.sizeHintForColumn(2)  # the Keys column not cut
    assert header.sectionViewportPosition(2) + header.sectionSize(2) <= \
        table.viewport().width()
    dialog.close()


def test_saving_a_preset_under_a_built_in_name_offers_a_name_of_ones_own(
        qtbot: QtBot, window: MainWindow, monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[tuple[str, str]] = []
    answers = iter(["balanced", "Balanced (mine)"])

    def get_text(_parent: object, _title: str, label: str, text: str = "") -> tuple[str, bool]:
        asked.append((label, text))
        return next(answers), True

    monkeypatch.setattr(QInputDialog, "getText", staticmethod(get_text))
    bar = window.preset_bar
    assert window.side.apply_preset_named("Balanced")
    window.panel.findChild(QDoubleSpinBox, "temperature_spin").setValue(0.3)
    qtbot.mouseClick(bar.save_button, Qt.MouseButton.LeftButton)
    assert asked[0] == ("Name:", "")  # the values are Custom now
    assert "built-in" in asked[1][0] and asked[1][1] == "Balanced (mine)"
    assert bar.combo.currentData() == "Balanced (mine)"
    balanced = next(p for p in window.store.presets() if p.name == "Balanced")
    assert balanced.builtin and balanced.sampling.temperature != 0.3  # left as it was


def test_export_suggests_the_titles_words_and_says_where_it_saved(
        qtbot: QtBot, window: MainWindow, monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    chat(qtbot, window, "What is 2+2?")
    target = tmp_path / "sum.md"
    suggested: list[str] = []

    def ask(_parent: object, _title: str, where: str, _filters: str) -> tuple[str, str]:
        suggested.append(Path(where).name)
        return str(target), "Markdown (*.md)"

    monkeypatch.setattr(QFileDialog, "getSaveFileName", staticmethod(ask))
    window.history.export_conversation()
    assert suggested == ["What is 2+2.md"]
    assert target.is_file() and window.banner.label.text() == f"Exported to {target}."
    assert file_stem('a/b\\c: "d" <e>|f*?') == "a b c d e f"
    assert file_stem("?!") == "!" and file_stem("???") == "Conversation"
    assert len(file_stem("word " * 40)) <= 80 and not file_stem("word " * 40).endswith(" ")


def test_show_prompt_never_breaks_a_line_inside_a_control_token(qtbot: QtBot) -> None:
    tokens: list[PromptToken] = []
    for i in range(40):
        tokens += [PromptToken(1, "<|im_start|>", True),
                   PromptToken(2, f"user word{'s' * (i % 7)} and more{'!' * (i % 5)} ", False),
                   PromptToken(3, "<|im_end|>", True)]
    view = PromptView(1, "".join(t.piece for t in tokens), tuple(tokens), 2048)
    dialog = PromptDialog(view)
    qtbot.addWidget(dialog)
    dialog.resize(260, 400)
    dialog.show()
    qtbot.waitExposed(dialog)
    document = dialog.text.document()
    document.size()  # laid out
    lines, block = [], document.begin()
    while block.isValid():
        layout = block.layout()
        for n in range(layout.lineCount()):
            line = layout.lineAt(n)
            lines.append(block.text()[line.textStart():line.textStart() + line.textLength()]
                         .replace(WORD_JOINER, ""))
        block = block.next()
    assert len(lines) > 20  # wrapped many times
    assert [line for line in lines if line.count("<|") != line.count("|>")] == []
    dialog.text.selectAll()
    copied = dialog.text.createMimeDataFromSelection().text()
    assert WORD_JOINER not in copied and "<|im_start|>user words" in copied


def test_smaller_copy_opens_on_a_type_it_will_make(qtbot: QtBot, bundled_model: Path) -> None:
    dialog = QuantizeDialog(str(bundled_model))  # Q4_K_M would not make this one smaller
    qtbot.addWidget(dialog)
    assert dialog.type.currentText() != "Q4_K_M"
    assert dialog.start_button.isEnabled() and "The copy will be" in dialog.note.text()


def test_the_models_dialog_fits_a_small_window(qtbot: QtBot, window: MainWindow) -> None:
    window.resize(700, 600)
    window.models.show_dialog()
    dialog = window.models._dialog
    assert dialog is not None
    assert dialog.width() <= 700 and dialog.height() <= 600
    dialog.close()


def test_the_schema_box_lays_out_a_valid_schema_when_left(qtbot: QtBot,
                                                          window: MainWindow) -> None:
    section = window.panel.reply_format_section
    window.panel_button.setChecked(True)
    section.set_expanded(True)
    section.json_check.setChecked(True)
    window.activateWindow()
    qtbot.waitUntil(window.isActiveWindow)
    edit = section.schema_edit
    edit.setFocus()
    qtbot.waitUntil(edit.hasFocus)
    edit.setPlainText('{"type":"object","properties":{"name":{"type":"string"}}}')
    window.composer.edit.setFocus()
    qtbot.waitUntil(lambda: not edit.hasFocus())
    schema = {"type": "object", "properties": {"name": {"type": "string"}}}
    assert edit.toPlainText() == json.dumps(schema, indent=2)
    assert window.chats.session.settings.reply_schema == edit.toPlainText()
    assert edit.lineWrapMode() == QPlainTextEdit.LineWrapMode.NoWrap  # indents stay readable
    edit.setFocus()
    qtbot.waitUntil(edit.hasFocus)
    edit.setPlainText('{"type": "object",')  # not JSON (yet): left as typed
    window.composer.edit.setFocus()
    qtbot.waitUntil(lambda: not edit.hasFocus())
    assert edit.toPlainText() == '{"type": "object",'


def test_the_clear_button_of_search_fields_is_drawn_in_the_themes_ink(qapp: object) -> None:
    """Fusion's own clear icon is dark on the dark theme's dark fields."""
    for used in (theme.LIGHT, theme.DARK):
        sheet = theme.stylesheet(used)
        found = re.search(r"QLineEdit \{ lineedit-clear-button-icon: url\(([^)]+)\); \}", sheet)
        assert found is not None
        assert used.colors.icon in Path(found[1]).read_text(encoding="utf-8")
