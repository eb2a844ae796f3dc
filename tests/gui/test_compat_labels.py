"""Models the bundled engine cannot load are labelled: in Discover before the download (from the
header read over HTTP), in Library for installed files. The engine's library is the real one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from gguf.constants import GGMLQuantizationType
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel
from pytestqt.qtbot import QtBot

from inglenook import paths
from inglenook.ui.models.bridge import DownloadBridge
from inglenook.ui.models.dialog import ModelsDialog
from tests import fakehub
from tests.fakehub import FakeFile, FakeHub
from tests.gguf_tools import write_gguf

fake_hub = fakehub.fake_hub  # the fixture, under its own name

WAIT_MS = 20_000
REPO = "future-lab/Zeta9-Chat-GGUF"


def gguf(path: Path, arch: str, pre: str = "qwen2") -> Path:
    """A small well-formed GGUF of `arch` with a BPE tokenizer using `pre`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_gguf(path, {
        "general.architecture": arch, "general.name": f"{arch} chat", "general.file_type": 15,
        f"{arch}.block_count": 2, f"{arch}.context_length": 4096,
        f"{arch}.embedding_length": 64, f"{arch}.attention.head_count": 2,
        "tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": pre,
    }, [("token_embd.weight", (16384,), GGMLQuantizationType.F32, None)])


@pytest.fixture
def dialog(qtbot: QtBot) -> Iterator[ModelsDialog]:
    bridge = DownloadBridge()
    d = ModelsDialog(bridge)
    qtbot.addWidget(d)
    d.show()
    yield d
    bridge.close()


def open_repo(qtbot: QtBot, d: ModelsDialog, query: str, repo: str) -> None:
    page = d.discover
    d.show_page("discover")
    page.query.setText(query)
    qtbot.mouseClick(page.search_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not page.busy, timeout=WAIT_MS)
    page.results.setCurrentRow(page.result_ids().index(repo) + 1)  # 0: heading
    qtbot.waitUntil(lambda: page.repo_panel.report is not None, timeout=WAIT_MS)


def test_discover_labels_files_that_wont_load_before_the_download(
        qtbot: QtBot, dialog: ModelsDialog, fake_hub: FakeHub, tmp_path: Path) -> None:
    content = gguf(tmp_path / "z.gguf", "zeta9").read_bytes()
    fake_hub.add_repo(REPO, [FakeFile("Zeta9-Chat-Q4_K_M.gguf", content=content),
                             FakeFile("Zeta9-Chat-Q8_0.gguf", 20_000_000)], downloads=5)
    open_repo(qtbot, dialog, "zeta9", REPO)
    page = dialog.discover
    assert [f for *_, f in page.repo_panel.file_rows()] == ["Won't load", "Won't load"]
    status = page.repo_panel.repo_status.text()
    assert status.startswith("Won't load with this engine (architecture zeta9). The llama.cpp "
                             "in this Inglenook")
    holder = page.repo_panel.files.itemWidget(page.repo_panel.files.topLevelItem(0), 2)
    chip = holder.findChild(QLabel)
    assert chip.property("kind") == "wont"
    assert "architecture zeta9" in holder.toolTip()
    files = page.repo_panel.files
    assert not any("recommended" in files.topLevelItem(i).text(0)  # nothing to recommend
                   for i in range(files.topLevelItemCount()))
    assert fake_hub.byte_requests("Zeta9-Chat-Q8_0.gguf") == []  # nothing but the header read


def test_discover_labels_an_unknown_tokenizer_and_leaves_known_models_alone(
        qtbot: QtBot, dialog: ModelsDialog, fake_hub: FakeHub, tmp_path: Path) -> None:
    odd = gguf(tmp_path / "odd.gguf", "qwen2", pre="zeta9-bpe").read_bytes()
    fine = gguf(tmp_path / "fine.gguf", "qwen2").read_bytes()
    fake_hub.add_repo("lab/Odd-Tokenizer-GGUF", [FakeFile("odd-Q4_K_M.gguf", content=odd)])
    fake_hub.add_repo("lab/Fine-GGUF", [FakeFile("fine-Q4_K_M.gguf", content=fine)])
    open_repo(qtbot, dialog, "odd", "lab/Odd-Tokenizer-GGUF")
    page = dialog.discover
    assert page.repo_panel.file_rows()[0][3] == "Won't load"
    status = page.repo_panel.repo_status.text()
    assert status.startswith("Tokenizer zeta9-bpe unknown to this engine.")
    open_repo(qtbot, dialog, "fine", "lab/Fine-GGUF")
    assert page.repo_panel.file_rows()[0][3] in ("Fits", "Tight", "Won't fit")
    assert page.repo_panel.repo_status.text().startswith("Memory estimates")


def test_library_notes_installed_models_that_wont_load(qtbot: QtBot) -> None:
    gguf(paths.models_dir() / "Zeta9-Chat-Q4_K_M.gguf", "zeta9")
    bridge = DownloadBridge()
    d = ModelsDialog(bridge)
    qtbot.addWidget(d)
    d.show()
    try:
        library = d.library
        qtbot.waitUntil(lambda: not library.reading, timeout=WAIT_MS)
        table = library.table
        rows = {table.topLevelItem(i).text(0): table.topLevelItem(i)
                for i in range(table.topLevelItemCount())}
        zeta = next(item for name, item in rows.items() if "Zeta9" in name)
        assert zeta.text(1) == "zeta9 · won't load"
        assert "Won't load with this engine (architecture zeta9)" in zeta.toolTip(1)
        bundled = next(item for name, item in rows.items() if "SmolLM2" in name)
        assert bundled.text(1) == "llama" and bundled.toolTip(1) == ""
        table.setCurrentItem(zeta)
        facts = library.detail_facts.text()
        assert "\nWon't load with this engine (architecture zeta9). The llama.cpp" in facts
        table.setCurrentItem(bundled)
        assert "load" not in library.detail_facts.text()
    finally:
        bridge.close()
