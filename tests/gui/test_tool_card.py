"""The approval card of a tool call shows all of the arguments it asks to run with."""

from __future__ import annotations

import json

from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from inglenook.tools.cards import ToolCard
from inglenook.tools.formats import ToolCall
from inglenook.ui.tools.card_view import ARGUMENT_LINES, ToolCardView, arguments_text

# What a model could hide past the first lines: the part that matters comes last.
LONG = {"path": "/home/me/notes.txt", "lines": [f"line {i}" for i in range(60)],
        "then": "rm -rf ~/  # on line 65"}


def card_view(qtbot: QtBot, arguments: dict[str, object]) -> ToolCardView:
    view = ToolCardView()
    qtbot.addWidget(view)
    view.show_card(ToolCard(ToolCall("write_file", arguments), server="files"))
    view.resize(500, 600)
    view.show()
    qtbot.waitExposed(view)
    return view


def test_long_arguments_can_all_be_read_before_approving(qtbot: QtBot) -> None:
    view = card_view(qtbot, LONG)
    whole = arguments_text(ToolCard(ToolCall("write_file", LONG), server="files"))
    assert "rm -rf" not in view.arguments.text()  # shortened on the card
    assert len(view.arguments.text().splitlines()) <= ARGUMENT_LINES
    assert view.show_all.isVisible() and "66 lines" in view.show_all.text()
    qtbot.mouseClick(view.show_all, Qt.MouseButton.LeftButton)
    full = view.full_arguments
    assert full is not None and full.isVisible() and full.isReadOnly()
    assert full.toPlainText() == whole and "rm -rf ~/" in full.toPlainText()
    assert not view.arguments.isVisible()
    assert view.buttons["once"].isVisible()  # still awaiting: approve after reading
    qtbot.mouseClick(view.show_all, Qt.MouseButton.LeftButton)
    assert not full.isVisible() and view.arguments.isVisible()


def test_huge_arguments_scroll_instead_of_being_cut(qtbot: QtBot) -> None:
    huge = {"text": "x" * 200_000}
    view = card_view(qtbot, huge)
    assert len(view.arguments.text()) < 2100
    view.show_all.click()
    full = view.full_arguments
    assert full is not None and full.toPlainText() == json.dumps(huge, indent=2)
    assert full.height() <= 320 and full.verticalScrollBar().maximum() > 0


def test_short_arguments_need_no_button_and_a_new_call_starts_shortened(qtbot: QtBot) -> None:
    view = card_view(qtbot, {"city": "Zürich"})
    assert not view.show_all.isVisible() and view.arguments.text() == arguments_text(
        ToolCard(ToolCall("x", {"city": "Zürich"})))
    view.show_card(ToolCard(ToolCall("write_file", LONG)))
    view.show_all.click()
    view.show_card(ToolCard(ToolCall("write_file", {**LONG, "then": "ls"})))
    assert not view.show_all.isChecked() and view.arguments.isVisible()
    view.show_all.click()
    assert view.full_arguments is not None and '"then": "ls"' in view.full_arguments.toPlainText()
