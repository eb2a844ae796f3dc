"""Memory you can see, on the fake engine: the status bar shows what the engine process holds
once a model is loaded (its parts in the tooltip), Models › Loaded models lists each model's
weights, KV cells, compute buffers and saved states, and the figures are read off the GUI
thread (the fake host answers round figures: tests/helpers/fake_host.py)."""

from __future__ import annotations

import threading

from PySide6.QtWidgets import QLabel
from pytestqt.qtbot import QtBot

from inglenook.engine import protocol as p
from inglenook.ui.main_window import MainWindow
from inglenook.ui.models.memory_view import engine_text, parts_text
from tests.gui.conftest import REPLY_TIMEOUT_MS, start_reply


def test_the_status_bar_and_loaded_models_show_the_engines_memory(
        qtbot: QtBot, window: MainWindow) -> None:
    asked_on: list[threading.Thread] = []
    router = window.worker.client
    real = router.memory_reports

    def recording() -> dict[str, p.MemoryReport]:
        asked_on.append(threading.current_thread())
        return real()

    router.memory_reports = recording  # type: ignore[method-assign]
    start_reply(qtbot, window, "Hello")
    qtbot.waitUntil(lambda: window.chats.session.reply is None, timeout=REPLY_TIMEOUT_MS)
    label = window.memory_label
    qtbot.waitUntil(lambda: label.isVisible() and label.text() == "Engine 315 MB",
                    timeout=REPLY_TIMEOUT_MS)
    assert "weights 105 MB · KV 8 MB used of 67 MB · compute buffers 34 MB" in label.toolTip()
    window.command_actions["loadedModels"].trigger()
    dialog = window.loaded._dialog
    assert dialog is not None

    def parts_shown() -> bool:
        return any("KV 8 MB used of 67 MB" in w.text() and "engine 315 MB" in w.text()
                   for w in dialog.rows.findChildren(QLabel))

    qtbot.waitUntil(parts_shown, timeout=REPLY_TIMEOUT_MS)
    dialog.close()
    assert asked_on and threading.main_thread() not in asked_on


def test_memory_texts() -> None:
    report = p.MemoryReport(92_000_000, 720_000_000, 12_000_000, 167_000_000, 5_000_000,
                            40_000_000, 893_000_000)
    assert engine_text(report) == "Engine 893 MB"
    assert parts_text(report) == ("weights 92 MB · KV 12 MB used of 720 MB · compute buffers "
                                  "167 MB · saved chats 5 MB in RAM, 40 MB on disk")
    assert engine_text(p.MemoryReport(rss_bytes=50_000_000)) == ""  # no model: nothing shown
