"""The chat template in the window: which one a file without a template got and why, and the
choice in Defaults for this model."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from inglenook.core.builtin_templates import BUILTINS
from inglenook.core.load import ModelDefaults
from inglenook.core.settings import load_settings
from inglenook.ui.main_window import MainWindow
from inglenook.ui.models.defaults_dialog import CUSTOM, FILE_OWN, ModelDefaultsDialog
from tests.gui.conftest import (
    LOAD_TIMEOUT_MS,
    REPLY_TIMEOUT_MS,
    greedy_settings,
    open_window,
    start_reply,
)

PLAIN = BUILTINS["plain"].label
SLOW = 3  # Gemma's 262k vocabulary: a longer load than the bundled model's, on a busy machine


def test_the_gemma_base_file_says_its_template_and_its_reply_stops(
        qtbot: QtBot, gemma_model: Path) -> None:
    settings = greedy_settings()
    settings.sampling = settings.sampling.replace(max_tokens=300)  # a run-on would reach it
    window = open_window(qtbot, None, settings)
    try:
        with qtbot.waitSignal(window.model_ready, timeout=SLOW * LOAD_TIMEOUT_MS) as ready:
            window.models.load(str(gemma_model))
        assert ready.args[0].template_source == "detected"
        assert window.model_label.text() == f"{gemma_model.stem}  ·  {PLAIN} template"
        notice = window.status_bar.model.notice.text()
        assert notice.startswith(f"No chat template in the file: using {PLAIN}, chosen for a "
                                 "base model (its vocabulary is Gemma's)")
        assert notice in window.model_label.toolTip()
        with qtbot.waitSignal(window.reply_finished,
                              timeout=SLOW * REPLY_TIMEOUT_MS) as finished:
            start_reply(qtbot, window, "What is the capital of France?")
        assert finished.args[1].reason == "stop"
        reply = window.chat.bubbles[-1].text
        # What a 270M base model knows is not the point (its greedy words moved when the
        # pool turned flash attention on): the reply ends by itself, with no turn markers.
        assert reply.strip() and "USER:" not in reply and "<end_of_turn>" not in reply
    finally:
        window.close()


def test_the_template_chosen_in_defaults_for_this_model_is_used_and_shown(
        qtbot: QtBot, window: MainWindow, bundled_model: Path) -> None:
    window.side.edit_model_defaults(str(bundled_model))
    dialog = window.findChild(ModelDefaultsDialog)
    combo = dialog.template_choice
    assert combo.currentIndex() == 0 and combo.currentText().startswith("Automatic (recommended)")
    names = [combo.itemData(i) for i in range(combo.count())]
    assert set(BUILTINS) <= set(names) and CUSTOM in names
    assert not dialog.template.isVisibleTo(dialog)  # the Jinja box is for your own only
    assert combo.findData(FILE_OWN) >= 0  # the bundled file has a template of its own
    combo.setCurrentIndex(combo.findData("gemma"))
    dialog._save()
    assert not dialog.isVisible()
    qtbot.waitUntil(lambda: load_settings().defaults_for(str(bundled_model)).own(
        "template_name") == "gemma")
    with qtbot.waitSignal(window.model_ready, timeout=LOAD_TIMEOUT_MS) as ready:
        qtbot.mouseClick(window.banner.action_button, Qt.MouseButton.LeftButton)
    info = ready.args[0]
    assert (info.template_source, info.template_name) == ("chosen", "Gemma")
    assert window.model_label.text().endswith("  ·  Gemma template")
    assert "built-in Gemma chat template" in window.model_label.toolTip()

    window.side.edit_model_defaults(str(bundled_model))  # opens on the choice kept
    again = [d for d in window.findChildren(ModelDefaultsDialog) if d.isVisible()][-1]
    assert again.template_choice.currentData() == "gemma"
    again.template_choice.setCurrentIndex(0)  # back to Automatic
    again._save()
    qtbot.waitUntil(lambda: load_settings().defaults_for(str(bundled_model)).empty)


def test_automatic_says_what_it_chose_for_the_model_loaded(
        qtbot: QtBot, window: MainWindow, bundled_model: Path) -> None:
    window.side.edit_model_defaults(str(bundled_model))
    dialog = window.findChild(ModelDefaultsDialog)
    assert dialog.template_choice.itemText(0) == "Automatic (recommended): the file's own"
    assert dialog.template_choice.findData(FILE_OWN) >= 0  # known from the load already


def test_the_files_own_template_is_offered_once_its_header_is_read(
        qtbot: QtBot, bundled_model: Path) -> None:
    """A model not loaded: whether its file has a template is read off the GUI thread."""
    dialog = ModelDefaultsDialog(str(bundled_model), ModelDefaults(), [], gpu_offload=False)
    qtbot.addWidget(dialog)
    assert dialog.template_choice.itemText(0) == "Automatic (recommended)"
    qtbot.waitUntil(lambda: dialog.template_choice.findData(FILE_OWN) == 1)
