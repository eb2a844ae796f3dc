"""Model actions keep the window answering: what reads model files (GGUF headers, the
projector beside a model) runs off the GUI thread (ui/tasks.py). The window froze 2.3 s after a
253 MB file was chosen with Ctrl+O: its 262k-string vocabulary was read twice on the GUI thread.
Checked by thread identity, never by time (bench/model_actions_stall.py measures the stalls)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from inglenook.models import gguf, projector
from inglenook.ui.main_window import MainWindow
from inglenook.ui.models import library as library_module
from inglenook.ui.models import picker as picker_module
from inglenook.ui.models.quantize_dialog import QuantizeDialog
from tests.gui.conftest import LOAD_TIMEOUT_MS


@pytest.fixture
def header_threads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[threading.Thread]]:
    """The thread of every GGUF header read (read_header's parse, whoever imported it)."""
    threads: list[threading.Thread] = []
    parse = gguf._parse

    def recorded(*args: object, **kwargs: object) -> object:
        threads.append(threading.current_thread())
        return parse(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(gguf, "_parse", recorded)
    yield threads


def test_opening_a_model_file_reads_its_header_off_the_gui_thread(
        qtbot: QtBot, window: MainWindow, gemma_model: Path,
        header_threads: list[threading.Thread]) -> None:
    with qtbot.waitSignal(window.model_ready, timeout=LOAD_TIMEOUT_MS):
        window.models.open_paths([str(gemma_model)])
    assert window.models.model is not None and window.models.model.path == str(gemma_model)
    assert header_threads  # which file is a model, and the projector beside it
    assert threading.main_thread() not in header_threads


def test_loading_from_the_picker_looks_for_a_projector_off_the_gui_thread(
        qtbot: QtBot, window: MainWindow, header_threads: list[threading.Thread],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(projector, "_FOUND", {})  # not known yet: the folder is looked at
    with qtbot.waitSignal(window.model_ready, timeout=LOAD_TIMEOUT_MS):
        window.models.reload()
    assert header_threads and threading.main_thread() not in header_threads


def test_a_finished_smaller_copy_is_listed_off_the_gui_thread(
        qtbot: QtBot, window: MainWindow, monkeypatch: pytest.MonkeyPatch) -> None:
    """The window froze ~150 ms when a Smaller copy finished: the Library and then the picker
    each listed the models folder (globs, a stat per file) on the GUI thread."""
    window.models.show_dialog()
    dialog = window.models._dialog
    assert dialog is not None
    library = dialog.library
    listed: list[threading.Thread] = []
    listing = library_module.installed_models

    def recorded(*args: object, **kwargs: object) -> object:
        listed.append(threading.current_thread())
        return listing(*args, **kwargs)  # type: ignore[arg-type]

    for module in (library_module, picker_module):
        monkeypatch.setattr(module, "installed_models", recorded)
    quantize = QuantizeDialog(window.models.path, library)
    quantize.type.setCurrentText("Q4_0")
    quantize.made.connect(library._quantized)
    with qtbot.waitSignal(library.models_changed, timeout=120_000):
        quantize.start()
    copy = next(e.path for e in library.entries if e.path.endswith("Q4_0.gguf"))
    assert library.selected_entry() is not None and library.selected_entry().path == copy
    assert window.models.picker.findData(copy) >= 0  # the picker shows it too
    assert listed and threading.main_thread() not in listed
    dialog.hide()
