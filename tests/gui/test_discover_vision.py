"""Discover and vision repositories, against the fake Hub: the search marks them, the files list
shows models only, the fit counts the projector, and a download brings the projector along,
named after its repository, where loading finds it beside the model."""

from __future__ import annotations

import hashlib
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel
from pytestqt.qtbot import QtBot

from inglenook import paths
from inglenook.core.load import LoadParams
from inglenook.models.library import installed_models
from inglenook.models.projector import COMPUTE_BYTES, with_projector
from inglenook.ui.models.dialog import ModelsDialog
from tests import fakehub
from tests.fakehub import FakeFile, FakeHub
from tests.gui import test_models_dialog as models_dialog
from tests.gui.test_models_dialog import REPO, TINY, WAIT_MS, download_button, open_repo, tiny_gguf
from tests.mmproj_tools import write_mmproj

fake_hub, bridge, dialog = fakehub.fake_hub, models_dialog.bridge, models_dialog.dialog  # fixtures

PROJECTOR = "mmproj-model-f16.gguf"  # the generic name most vision repositories use


def serve_vision_repo(hub: FakeHub, tmp_path: Path) -> tuple[FakeFile, FakeFile]:
    hub.add_repo(REPO, downloads=10, tags=("gguf", "image-text-to-text"))
    model = hub.add_file(REPO, FakeFile(TINY, content=tiny_gguf(tmp_path / TINY).read_bytes()))
    projector = hub.add_file(REPO, FakeFile(
        PROJECTOR, content=write_mmproj(tmp_path / PROJECTOR, 64).read_bytes()))
    hub.add_file(REPO, FakeFile("mmproj-model-Q8_0.gguf", content=write_mmproj(
        tmp_path / "q8.gguf", 64).read_bytes()))
    return model, projector


def result_text(d: ModelsDialog, row: int) -> str:
    label = d.discover.results.itemWidget(d.discover.results.item(row))
    assert isinstance(label, QLabel)
    return label.text()


def test_a_vision_repository_downloads_its_projector_with_the_model(
        qtbot: QtBot, dialog: ModelsDialog, fake_hub: FakeHub, tmp_path: Path) -> None:
    model, projector = serve_vision_repo(fake_hub, tmp_path)
    fake_hub.add_repo("org/Text-Only-GGUF", downloads=5)
    open_repo(qtbot, dialog, "gguf", REPO)
    assert "reads images" in result_text(dialog, 1)  # row 0 is the heading
    assert "reads images" not in result_text(dialog, 2)
    panel = dialog.discover.repo_panel
    qtbot.waitUntil(lambda: panel.report is not None, timeout=WAIT_MS)
    assert [name for _q, name, _s, _f in panel.file_rows()] == [TINY]  # projectors are no model
    assert f"includes its projector {PROJECTOR}" in panel.repo_status.text()
    assert panel.report is not None
    assert panel.report.shape.projector_bytes == projector.size + COMPUTE_BYTES

    with qtbot.waitSignal(dialog.models_changed, timeout=WAIT_MS):
        qtbot.mouseClick(download_button(dialog, TINY), Qt.MouseButton.LeftButton)
    saved = paths.models_dir() / f"Tiny-Chat-{PROJECTOR}"  # two repositories' never collide
    qtbot.waitUntil(saved.is_file, timeout=WAIT_MS)
    assert hashlib.sha256(saved.read_bytes()).hexdigest() == projector.sha256
    installed = paths.models_dir() / TINY
    assert hashlib.sha256(installed.read_bytes()).hexdigest() == model.sha256
    assert with_projector(LoadParams(str(installed))).mmproj_path == str(saved)
    assert [e.path for e in installed_models() if "mmproj" in e.path] == []
    open_repo(qtbot, dialog, "gguf", REPO)
    assert download_button(dialog, TINY).text() == "Installed"  # model and projector are there
