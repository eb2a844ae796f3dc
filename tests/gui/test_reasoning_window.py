"""Reasoning in the window, on the fake engine with real reasoning templates: the block above the
answer live while the model thinks, then folded to "Thought for N s"; Copy copies the answer
only; every format real templates use; the thinking switch shown only for a template that reads
it, and reaching the request."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication
from pytestqt.qtbot import QtBot

from inglenook import paths
from inglenook.core.load import ModelDefaults
from inglenook.ui.chat.reasoning_block import ReasoningBlock
from inglenook.ui.main_window import MainWindow
from tests.gui.conftest import Script, chat, fake_worker, greedy_settings, open_window
from tests.templates import DEEPSEEK_R1, GPT_OSS, MAGISTRAL, QWEN3

THOUGHT = re.compile(r"^Thought for \d+(\.\d)? s$")


def window_with(qtbot: QtBot, script: Script, tmp_path: Path,
                template: str | None) -> MainWindow:
    """The window on the fake engine, the bundled model loaded with this chat template."""
    settings = greedy_settings()
    if template is not None:
        settings.set_defaults(str(paths.bundled_model_path()),
                              ModelDefaults(chat_template=template))
    return open_window(qtbot, fake_worker(script, tmp_path / "engine.log"), settings)


@pytest.fixture
def qwen(qtbot: QtBot, script: Script, tmp_path: Path) -> Iterator[MainWindow]:
    win = window_with(qtbot, script, tmp_path, QWEN3)
    yield win
    win.close()


def test_the_block_is_live_while_the_model_thinks_then_folds(
        qtbot: QtBot, qwen: MainWindow, script: Script) -> None:
    thoughts = [f"step {n}. " for n in range(12)]
    script.write(default={"pieces": ["<think>\n", *thoughts, "</think>\n\n", "It is 4."],
                          "token_ms": 120})
    qwen.composer.edit.setPlainText("2+2?")
    qtbot.keyClick(qwen.composer.edit, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: qwen.chat.bubbles[-1].findChild(ReasoningBlock) is not None,
                    timeout=20_000)
    block = qwen.chat.bubbles[-1].findChild(ReasoningBlock)
    qtbot.waitUntil(lambda: "step 2." in block.text, timeout=20_000)
    assert block.live and block.is_open and block.header.text() == "Thinking…"
    assert qwen.chat.bubbles[-1].text == ""  # no answer yet
    qtbot.mouseClick(block.header, Qt.MouseButton.LeftButton)  # folded while it thinks…
    shown = block.text
    qtbot.waitUntil(lambda: block.text != shown, timeout=20_000)
    assert block.live and not block.is_open  # …stays folded as more comes
    qtbot.mouseClick(block.header, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: qwen.chats.session.reply is None, timeout=20_000)
    bubble = qwen.chat.bubbles[-1]
    assert not block.live and not block.is_open
    assert THOUGHT.match(block.header.text()), block.header.text()
    assert block.text == "".join(thoughts).strip()
    assert bubble.text == "It is 4."
    qtbot.mouseClick(block.header, Qt.MouseButton.LeftButton)
    assert block.is_open  # the user can read it again
    stored = qwen.chats.session.path[-1]
    assert (stored.reasoning, stored.content) == (block.text, "It is 4.")
    assert stored.provenance.thinking_s is not None and stored.provenance.thinking_s > 0


def test_copy_copies_the_answer_only(qtbot: QtBot, qwen: MainWindow, script: Script) -> None:
    script.write(default={"pieces": ["<think>Secret musing.</think>", "Paris."]})
    chat(qtbot, qwen, "Capital of France?")
    bubble = qwen.chat.bubbles[-1]
    qtbot.mouseClick(bubble.copy_button, Qt.MouseButton.LeftButton)
    assert QGuiApplication.clipboard().text() == "Paris."
    qwen.chats.copy_last_reply()
    assert QGuiApplication.clipboard().text() == "Paris."


@pytest.mark.parametrize(("template", "pieces"), [
    (QWEN3, ["<think>\nCount the r", "s.\n</th", "ink>\n\nThree."]),
    (DEEPSEEK_R1, ["Count the r", "s.\n</think>", "\n\nThree."]),  # the prompt opened it
    (MAGISTRAL, ["[THINK]Count the r", "s.[/THI", "NK]Three."]),
    (GPT_OSS, ["<|channel|>analysis<|message|>Count the r", "s.<|end|><|start|>assistant",
               "<|channel|>final<|message|>Three."]),
], ids=["think", "opened-think", "bracket", "gpt-oss-channels"])
def test_every_reasoning_format_is_split_by_its_template(
        qtbot: QtBot, script: Script, tmp_path: Path, template: str,
        pieces: list[str]) -> None:
    script.write(default={"pieces": pieces})
    win = window_with(qtbot, script, tmp_path, template)
    chat(qtbot, win, "How many r's in strawberry?")
    bubble = win.chat.bubbles[-1]
    assert (bubble.reasoning.text, bubble.text) == ("Count the rs.", "Three.")
    assert THOUGHT.match(bubble.reasoning.header.text())
    conv = win.chats.conv_id
    win.chats.new_chat()
    win.chats.open(conv)
    reopened = win.chat.bubbles[-1]
    assert (reopened.reasoning.text, reopened.text) == ("Count the rs.", "Three.")
    assert not reopened.reasoning.is_open and THOUGHT.match(reopened.reasoning.header.text())
    win.close()


def test_the_thinking_switch_is_offered_by_a_template_that_reads_it_and_reaches_it(
        qtbot: QtBot, qwen: MainWindow, script: Script) -> None:
    section = qwen.panel.reply_section
    qwen.panel_button.setChecked(True)
    assert section.thinking_check.isVisibleTo(qwen.panel) and section.thinking_check.isChecked()
    assert not section.effort_combo.isVisibleTo(qwen.panel)  # Qwen3 has no effort
    script.write(default={"text": "thinking={thinking}"})
    section.thinking_check.setChecked(False)
    chat(qtbot, qwen, "Quick: 2+2?")
    assert qwen.chats.last_request.enable_thinking is False
    assert qwen.chat.bubbles[-1].text == "thinking=False"  # what the engine was sent
    assert qwen.chats.session.settings.thinking is False  # kept with the chat
    assert qwen.chats.session.path[-1].provenance.enable_thinking is False


def test_models_without_the_switch_do_not_show_it(qtbot: QtBot, window: MainWindow,
                                                  script: Script) -> None:
    window.panel_button.setChecked(True)
    section = window.panel.reply_section
    assert not section.thinking_check.isVisibleTo(window.panel)
    assert not section.effort_combo.isVisibleTo(window.panel)
    chat(qtbot, window, "Hello")
    assert window.chats.last_request.enable_thinking is None


def test_gpt_oss_offers_the_reasoning_effort(qtbot: QtBot, script: Script,
                                             tmp_path: Path) -> None:
    win = window_with(qtbot, script, tmp_path, GPT_OSS)
    win.panel_button.setChecked(True)
    combo = win.panel.reply_section.effort_combo
    assert combo.isVisibleTo(win.panel)
    assert not win.panel.reply_section.thinking_check.isVisibleTo(win.panel)
    combo.setCurrentIndex(combo.findData("high"))
    chat(qtbot, win, "Think hard.")
    assert win.chats.last_request.reasoning_effort == "high"
    win.close()
