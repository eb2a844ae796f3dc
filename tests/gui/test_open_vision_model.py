"""Open a GGUF file… in the real window: a model chosen with its projector loads with it (and
keeps it as its own), a projector alone or one of another model is refused with the reason
before anything loads."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtWidgets import QFileDialog
from pytestqt.qtbot import QtBot

from inglenook.core.load import LoadParams
from inglenook.ui.main_window import MainWindow
from tests.gguf_tools import write_gguf
from tests.mmproj_tools import write_mmproj


def model(path: Path, n_embd: int = 576) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_gguf(path, {"general.architecture": "llama", "llama.embedding_length": n_embd,
                             "llama.block_count": 2})


def choose(monkeypatch: pytest.MonkeyPatch, *chosen: Path) -> None:
    monkeypatch.setattr(QFileDialog, "getOpenFileNames",
                        lambda *_a, **_k: ([str(p) for p in chosen], ""))


def test_a_model_opened_with_its_projector_loads_with_it(
        qtbot: QtBot, window: MainWindow, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    vlm = model(tmp_path / "models" / "vlm.gguf")
    (tmp_path / "elsewhere").mkdir()
    projector = write_mmproj(tmp_path / "elsewhere" / "mmproj-vlm-f16.gguf", 576)
    loads: list[LoadParams] = []
    real_load = window.worker.load
    monkeypatch.setattr(window.worker, "load", lambda p: (loads.append(p), real_load(p)))

    # The files' headers are read off the GUI thread: what they are is said a moment later.
    choose(monkeypatch, projector)  # alone: not a model
    window.models.open_file()
    qtbot.waitUntil(lambda: "is a vision projector, not a model" in window.banner.text())
    assert not loads
    wrong = write_mmproj(tmp_path / "mmproj-big.gguf", 4096)
    choose(monkeypatch, vlm, wrong)
    window.models.open_file()
    qtbot.waitUntil(lambda: "belongs to another model" in window.banner.text())
    assert not loads

    choose(monkeypatch, projector, vlm)  # in any order
    window.models.open_file()
    qtbot.waitUntil(lambda: len(loads) == 1)
    assert [(p.model_path, p.mmproj_path) for p in loads] == [(str(vlm), str(projector))]
    assert window.side.app.value.defaults_for(str(vlm)).own("mmproj_path") == str(projector)
    window.models.load(str(vlm))  # next time, chosen from the list: still with it
    qtbot.waitUntil(lambda: len(loads) == 2)
    assert loads[-1].mmproj_path == str(projector)
