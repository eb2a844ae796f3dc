"""The Models dialog against the fake Hub: library, import, delete, search, fit labels, and the
download queue (progress, pause, resume, cancel, errors, partials after a restart), online and
offline. Every wait is on an object that lives on the GUI thread."""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from gguf.constants import GGMLQuantizationType
from PySide6.QtCore import Qt, QThread
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from inglenook import paths
from inglenook.models import fit
from inglenook.models.catalog import load_catalog
from inglenook.models.download import RetryPolicy
from inglenook.models.download_queue import DownloadState, DownloadStatus
from inglenook.models.gguf import read_header
from inglenook.ui.models import library as models_library
from inglenook.ui.models.bridge import DownloadBridge
from inglenook.ui.models.dialog import ModelsDialog
from inglenook.ui.models.discover import OFFLINE_MESSAGE
from inglenook.ui.models.downloads import DownloadCard
from tests import fakehub
from tests.fakehub import FakeFile, FakeHub, Fault
from tests.gguf_tools import write_gguf

fake_hub = fakehub.fake_hub  # the fixture, under its own name

WAIT_MS = 20_000
FAST = RetryPolicy(base_delay_s=0.01, max_delay_s=0.05, max_retry_after_s=0.2,
                   connect_timeout_s=2.0, read_timeout_s=2.0)


def slow() -> Fault:
    """~1.6 MB/s, for the first request only (a new one each time: a Fault counts its uses)."""
    return Fault("slow", chunk=32 << 10, delay=0.02)

REPO = "org/Tiny-Chat-GGUF"
TINY = "Tiny-Chat-Q2_K.gguf"
LLAMA = {"general.architecture": "llama", "general.name": "Tiny Chat", "general.file_type": 10,
         "llama.block_count": 2, "llama.context_length": 2048, "llama.embedding_length": 64,
         "llama.attention.head_count": 2, "llama.attention.head_count_kv": 2,
         "tokenizer.chat_template": "{% for m in messages %}{{ m.content }}{% endfor %}"}


def tiny_gguf(path: Path, megabytes: float = 1.0, **metadata: object) -> Path:
    """A well-formed llama GGUF of about `megabytes` (zeros for weights)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    n = int(megabytes * (1 << 20)) // 4
    return write_gguf(path, {**LLAMA, **metadata},
                      [("token_embd.weight", (n,), GGMLQuantizationType.F32, None)])


def serve_tiny(hub: FakeHub, tmp_path: Path, *faults: Fault, name: str = TINY,
               megabytes: float = 1.0) -> FakeFile:
    content = tiny_gguf(tmp_path / "served" / name, megabytes).read_bytes()
    if REPO not in hub.repos:
        hub.add_repo(REPO, downloads=10)
    return hub.add_file(REPO, FakeFile(name, content=content, faults=faults))


def serve_download(hub: FakeHub, tmp_path: Path, *faults: Fault,
                   megabytes: float = 1.0) -> FakeFile:
    """TINY with `faults` for its download, and a smaller file whose header the fit planner
    reads (it reads the smallest), so that the planner's request does not use up a fault."""
    serve_tiny(hub, tmp_path, name="Tiny-Chat-IQ1_S.gguf", megabytes=0.1)
    return serve_tiny(hub, tmp_path, *faults, megabytes=megabytes)


@pytest.fixture
def bridge() -> Iterator[DownloadBridge]:
    b = DownloadBridge(policy=FAST)
    yield b
    b.close()


@pytest.fixture
def dialog(qtbot: QtBot, bridge: DownloadBridge) -> ModelsDialog:
    d = ModelsDialog(bridge)
    qtbot.addWidget(d)
    d.show()
    return d


class Answers:
    """Stands in for the confirmation box: records each question, answers from `replies`."""

    def __init__(self) -> None:
        self.asked: list[str] = []
        self.replies: list[bool] = []

    def __call__(self, _parent: object, _title: str, text: str, _confirm: str) -> bool:
        self.asked.append(text)
        return self.replies.pop(0)


@pytest.fixture
def answers(monkeypatch: pytest.MonkeyPatch) -> Answers:
    a = Answers()
    monkeypatch.setattr(models_library, "ask", a)
    return a


def row_texts(d: ModelsDialog) -> list[list[str]]:
    table = d.library.table
    return [[table.topLevelItem(i).text(c) for c in range(table.columnCount())]
            for i in range(table.topLevelItemCount())]


def wait_headers(qtbot: QtBot, d: ModelsDialog) -> None:
    qtbot.waitUntil(lambda: not d.library.reading, timeout=WAIT_MS)


def open_repo(qtbot: QtBot, d: ModelsDialog, query: str, repo: str) -> None:
    d.show_page("discover")
    d.discover.query.setText(query)
    qtbot.mouseClick(d.discover.search_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not d.discover.busy, timeout=WAIT_MS)
    d.discover.results.setCurrentRow(d.discover.result_ids().index(repo) + 1)  # 0: heading
    qtbot.waitUntil(lambda: d.discover.repo_panel.listing is not None, timeout=WAIT_MS)


def download_button(d: ModelsDialog, name: str):
    files = d.discover.repo_panel.files
    for i in range(files.topLevelItemCount()):
        item = files.topLevelItem(i)
        if item.data(0, Qt.ItemDataRole.UserRole) == name:
            return files.itemWidget(item, 3)
    raise AssertionError(name)


def start_download(qtbot: QtBot, d: ModelsDialog, name: str = TINY) -> DownloadCard:
    open_repo(qtbot, d, "tiny", REPO)
    qtbot.waitUntil(lambda: d.discover.repo_panel.report is not None, timeout=WAIT_MS)
    qtbot.mouseClick(download_button(d, name), Qt.MouseButton.LeftButton)
    assert d.current_page() == "downloads"
    card = d.downloads.card_for(name)
    assert card is not None
    return card


def leftovers() -> list[str]:
    return sorted(p.name for p in paths.models_dir().iterdir())


# -- library -------------------------------------------------------------------------------------
def test_library_lists_the_bundled_model_with_its_header(qtbot: QtBot, dialog: ModelsDialog,
                                                         answers: Answers) -> None:
    wait_headers(qtbot, dialog)
    name, arch, params, quant, _size, context, template, vision, source = row_texts(dialog)[0]
    assert "SmolLM2" in name and source == "Bundled"
    assert (arch, params, quant, context, template) == ("llama", "135M", "Q4_1", "8,192", "Yes")
    assert vision in ("No", "…")  # no projector beside it (being looked for)
    assert "8,192 tokens of context" in dialog.library.detail_facts.text()
    assert not dialog.library.delete_button.isEnabled()
    assert "cannot be deleted" in dialog.library.delete_button.toolTip()
    dialog.library.delete_selected()  # even when asked directly: refused, not asked
    assert answers.asked == [] and "cannot be deleted" in dialog.library.notice.text()
    assert paths.bundled_model_path() is not None


def test_use_this_model(qtbot: QtBot, dialog: ModelsDialog) -> None:
    with qtbot.waitSignal(dialog.model_chosen) as chosen:
        qtbot.mouseClick(dialog.library.use_button, Qt.MouseButton.LeftButton)
    assert chosen.args == [str(paths.bundled_model_path())]
    assert not dialog.isVisible()


def test_reveal_opens_the_models_folder(qtbot: QtBot, dialog: ModelsDialog,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[Path] = []
    monkeypatch.setattr(models_library, "open_folder", lambda folder: opened.append(folder) or True)
    qtbot.mouseClick(dialog.library.reveal_button, Qt.MouseButton.LeftButton)
    assert opened == [paths.bundled_model_path().parent]


def test_import_copies_a_file_and_it_appears(qtbot: QtBot, dialog: ModelsDialog,
                                             tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    source = tiny_gguf(tmp_path / "elsewhere" / "Imported-Q4_K_M.gguf")
    monkeypatch.setattr(models_library, "pick_gguf_file", lambda _p: str(source))
    monkeypatch.setattr(models_library, "ask_import_mode", lambda _p, _n: "copy")
    with qtbot.waitSignal(dialog.models_changed, timeout=WAIT_MS):
        qtbot.mouseClick(dialog.library.import_button, Qt.MouseButton.LeftButton)
    copied = paths.models_dir() / source.name
    assert copied.is_file() and not copied.is_symlink() and source.is_file()
    assert copied.read_bytes() == source.read_bytes()
    assert leftovers() == [source.name]  # no temporary file left behind
    wait_headers(qtbot, dialog)
    row = next(r for r in row_texts(dialog) if r[0] == "Imported-Q4_K_M")
    assert row[1] == "llama" and row[-1] == "Models folder"
    assert dialog.library.selected_entry().path == str(copied)
    assert "copied" in dialog.library.notice.text()


def test_import_in_place_links_and_delete_removes_only_the_link(
        qtbot: QtBot, dialog: ModelsDialog, tmp_path: Path, answers: Answers) -> None:
    source = tiny_gguf(tmp_path / "elsewhere" / "Linked-Q8_0.gguf")
    with qtbot.waitSignal(dialog.models_changed, timeout=WAIT_MS):
        dialog.library.import_file(str(source), "link")
    link = paths.models_dir() / source.name
    assert link.is_symlink() and link.resolve() == source.resolve()
    wait_headers(qtbot, dialog)
    assert next(r for r in row_texts(dialog) if r[0] == "Linked-Q8_0")[-1] == "Linked"
    assert dialog.library.delete_button.text() == "Remove link…"
    answers.replies.append(True)
    with qtbot.waitSignal(dialog.models_changed):
        qtbot.mouseClick(dialog.library.delete_button, Qt.MouseButton.LeftButton)
    assert "Only the link is removed" in answers.asked[0]
    assert not os.path.lexists(link) and source.is_file()


def test_import_refuses_a_file_that_is_not_gguf(qtbot: QtBot, dialog: ModelsDialog,
                                                tmp_path: Path) -> None:
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"not a gguf file at all")
    dialog.library.import_file(str(bad), "copy")
    qtbot.waitUntil(lambda: not dialog.library.importing, timeout=WAIT_MS)
    assert "Could not import" in dialog.library.notice.text()
    assert dialog.library.notice.property("kind") == "error" and leftovers() == []


def test_delete_asks_and_removes_a_downloaded_file(qtbot: QtBot, dialog: ModelsDialog,
                                                   answers: Answers) -> None:
    model = tiny_gguf(paths.models_dir() / "Downloaded-Q4_K_M.gguf")
    dialog.library.refresh()
    dialog.library.select(str(model))
    assert dialog.library.delete_button.isEnabled()
    answers.replies.extend([False, True])
    qtbot.mouseClick(dialog.library.delete_button, Qt.MouseButton.LeftButton)
    assert "Downloaded-Q4_K_M" in answers.asked[0] and "removed from disk" in answers.asked[0]
    assert model.is_file()  # "Cancel" keeps it
    with qtbot.waitSignal(dialog.models_changed):
        qtbot.mouseClick(dialog.library.delete_button, Qt.MouseButton.LeftButton)
    assert not model.exists()
    assert [r[0] for r in row_texts(dialog) if r[0] == "Downloaded-Q4_K_M"] == []


# -- discover ------------------------------------------------------------------------------------
def test_search_shows_results_from_the_hub_sorted(qtbot: QtBot, dialog: ModelsDialog,
                                                  fake_hub: FakeHub) -> None:
    fake_hub.add_repo("a/Popular-GGUF", downloads=900, likes=1)
    fake_hub.add_repo("b/Liked-GGUF", downloads=50, likes=700)
    fake_hub.add_repo("c/Middle-GGUF", downloads=300, likes=20)
    fake_hub.add_repo("d/Other-Model", downloads=999, likes=999, tags=("safetensors",))
    open_search = dialog.discover
    dialog.show_page("discover")
    open_search.query.setText("gguf")
    qtbot.mouseClick(open_search.search_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not open_search.busy, timeout=WAIT_MS)
    assert open_search.result_ids() == ["a/Popular-GGUF", "c/Middle-GGUF", "b/Liked-GGUF"]
    open_search.sort.setCurrentIndex(open_search.sort.findData("likes"))  # searches again
    qtbot.waitUntil(lambda: not open_search.busy, timeout=WAIT_MS)
    assert open_search.result_ids() == ["b/Liked-GGUF", "c/Middle-GGUF", "a/Popular-GGUF"]
    searches = [r for r in fake_hub.requests if r.path == "/api/models"]
    assert [r.query["sort"] for r in searches] == [["downloads"], ["likes"]]


def test_a_repository_lists_files_by_quant_with_fit_labels(
        qtbot: QtBot, dialog: ModelsDialog, fake_hub: FakeHub, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    served = serve_tiny(fake_hub, tmp_path)
    for name, size in (("Tiny-Chat-Q4_K_M.gguf", 12_000_000),
                       ("Tiny-Chat-Q8_0-00001-of-00002.gguf", 1_500_000),
                       ("Tiny-Chat-Q8_0-00002-of-00002.gguf", 1_500_000),
                       ("Tiny-Chat-Q5_K_M.gguf", 2_000_000),
                       ("Tiny-Chat-v2-Q5_K_M.gguf", 2_100_000)):
        fake_hub.add_file(REPO, FakeFile(name, size))
    fake_hub.add_file(REPO, FakeFile("README.md", content=b"# hi", lfs=False))
    # Free memory such that the 1 MB file fits and the 12 MB one is tight, whatever the
    # planner's fixed allowances are.
    shape = fit.shape_from_header(read_header(tmp_path / "served" / TINY))
    base = fit.plan(dataclasses.replace(shape, weights_bytes=0), 2048, "f16",
                    fit.Memory(1 << 50, 1 << 50)).total_bytes
    memory = fit.Memory(ram_free=int((base + 4_000_000) / fit.FITS_SHARE), ram_total=1 << 40)
    monkeypatch.setattr(fit, "system_memory", lambda gpu_offload=False: memory)

    open_repo(qtbot, dialog, "tiny", REPO)
    qtbot.waitUntil(lambda: dialog.discover.repo_panel.report is not None, timeout=WAIT_MS)
    rows = dialog.discover.repo_panel.file_rows()
    assert [(q, n, f) for q, n, _s, f in rows] == [  # smallest first
        ("Q2_K", TINY, "Fits"),
        ("Q5_K_M", "Tiny-Chat-Q5_K_M.gguf", "Fits"),
        ("Q5_K_M", "Tiny-Chat-v2-Q5_K_M.gguf", "Fits"),
        ("Q8_0", "Tiny-Chat-Q8_0.gguf", "Fits"),  # the split set as one model
        ("Q4_K_M", "Tiny-Chat-Q4_K_M.gguf", "Tight"),
    ]
    assert (rows[3][2], rows[4][2]) == ("3 MB", "12 MB")
    files = dialog.discover.repo_panel.files
    group = files.topLevelItem(1)
    assert group.childCount() == 2 and "Q5_K_M" in group.text(0)  # one quant, two files
    assert "(2 parts)" in files.topLevelItem(2).text(0)
    header_reads = len(fake_hub.file_requests(served.path))
    assert header_reads > 0 and fake_hub.byte_requests(served.path)[0].headers.get("range")

    # Opened again: planned again (memory changes), but the header is not fetched again.
    monkeypatch.setattr(fit, "system_memory", lambda gpu_offload=False: fit.Memory(1, 1))
    open_repo(qtbot, dialog, "tiny", REPO)
    qtbot.waitUntil(lambda: dialog.discover.repo_panel.report is not None, timeout=WAIT_MS)
    assert {f for *_, f in dialog.discover.repo_panel.file_rows()} == {"Won't fit"}
    assert len(fake_hub.file_requests(served.path)) == header_reads


def test_offline_search_says_so_and_sends_nothing(qtbot: QtBot, dialog: ModelsDialog,
                                                  fake_hub: FakeHub,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    fake_hub.add_repo("a/Popular-GGUF", downloads=900)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    discover = dialog.discover
    dialog.show_page("discover")
    discover.query.setText("popular")
    qtbot.mouseClick(discover.search_button, Qt.MouseButton.LeftButton)
    assert discover.notice.isVisible() and discover.notice.text() == OFFLINE_MESSAGE
    assert discover.result_ids() == [e.repo for e in load_catalog()]
    discover.results.setCurrentRow(1)  # a catalog entry: its recommended files, no request
    assert discover.repo_panel.file_rows()[0][1] == load_catalog()[0].recommended[0]
    assert not download_button(dialog, load_catalog()[0].recommended[0]).isEnabled()
    assert fake_hub.requests == []


def test_the_catalog_is_browsable_offline(qtbot: QtBot, dialog: ModelsDialog) -> None:
    catalog = load_catalog()
    discover = dialog.discover
    dialog.show_page("discover")
    assert discover.result_ids() == [e.repo for e in catalog]  # shown while the box is empty
    discover.results.setCurrentRow(2)
    entry = catalog[1]
    assert discover.repo_panel.repo_title.text() == entry.name
    assert entry.description in discover.repo_panel.repo_meta.text()
    assert [n for _q, n, _s, _f in discover.repo_panel.file_rows()] == list(entry.recommended)
    assert "offline" in discover.repo_panel.repo_status.text()


# -- downloads -----------------------------------------------------------------------------------
def test_a_download_shows_progress_completes_and_appears_in_the_library(
        qtbot: QtBot, dialog: ModelsDialog, fake_hub: FakeHub, tmp_path: Path) -> None:
    served = serve_download(fake_hub, tmp_path, Fault("slow", chunk=64 << 10, delay=0.03),
                        megabytes=2)
    threads: list[bool] = []
    dialog.bridge.changed.connect(
        lambda _s: threads.append(QThread.currentThread() is QApplication.instance().thread()))
    with qtbot.waitSignal(dialog.models_changed, timeout=WAIT_MS):
        card = start_download(qtbot, dialog)
        qtbot.waitUntil(lambda: 0 < card.bar.value() < 1000, timeout=WAIT_MS)
        assert " of 2.1 MB" in card.state_label.text() and card.pause_button.isVisible()
    assert card.status.state is DownloadState.DONE and card.bar.value() == 1000
    assert "Downloaded and verified" in card.state_label.text()
    assert not card.cancel_button.isVisible()
    installed = paths.models_dir() / TINY
    assert hashlib.sha256(installed.read_bytes()).hexdigest() == served.sha256
    assert str(installed) in [e.path for e in dialog.library.entries]
    wait_headers(qtbot, dialog)
    row = next(r for r in row_texts(dialog) if r[0] == "Tiny-Chat-Q2_K")
    assert (row[1], row[3], row[6]) == ("llama", "Q2_K", "Yes")
    assert download_button(dialog, TINY).text() == "Installed"
    assert threads and all(threads)  # the bridge's signals arrive on the GUI thread


def test_pause_keeps_the_partial_and_resume_completes(qtbot: QtBot, dialog: ModelsDialog,
                                                       fake_hub: FakeHub, tmp_path: Path) -> None:
    served = serve_download(fake_hub, tmp_path, slow(), megabytes=3)
    card = start_download(qtbot, dialog)
    qtbot.waitUntil(lambda: card.status.done_bytes > 0, timeout=WAIT_MS)
    qtbot.mouseClick(card.pause_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: card.status.state is DownloadState.PAUSED, timeout=WAIT_MS)
    assert leftovers() == [TINY + ".part", TINY + ".part.json"]
    assert "Paused at" in card.state_label.text()
    assert card.resume_button.isVisible() and not card.pause_button.isVisible()
    with qtbot.waitSignal(dialog.models_changed, timeout=WAIT_MS):
        qtbot.mouseClick(card.resume_button, Qt.MouseButton.LeftButton)
    assert card.status.state is DownloadState.DONE and leftovers() == [TINY]
    assert hashlib.sha256((paths.models_dir() / TINY).read_bytes()).hexdigest() == served.sha256
    assert (fake_hub.byte_requests(TINY)[-1].range_start or 0) > 0  # resumed, not restarted


def test_cancel_removes_the_partial(qtbot: QtBot, dialog: ModelsDialog, fake_hub: FakeHub,
                                    tmp_path: Path) -> None:
    serve_download(fake_hub, tmp_path, slow(), megabytes=3)
    card = start_download(qtbot, dialog)
    qtbot.waitUntil(lambda: card.status.done_bytes > 0, timeout=WAIT_MS)
    qtbot.mouseClick(card.cancel_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: card.status.state is DownloadState.CANCELLED, timeout=WAIT_MS)
    assert leftovers() == [] and "Cancelled" in card.state_label.text()
    assert not card.cancel_button.isVisible() and dialog.downloads.clear_button.isEnabled()
    dialog.downloads.clear_finished()
    qtbot.waitUntil(lambda: dialog.downloads.empty.isVisible())


def test_a_failed_download_says_why_and_can_be_tried_again(
        qtbot: QtBot, dialog: ModelsDialog, fake_hub: FakeHub, tmp_path: Path) -> None:
    serve_download(fake_hub, tmp_path, Fault("wrong_bytes"))
    card = start_download(qtbot, dialog)
    qtbot.waitUntil(lambda: card.status.state is DownloadState.FAILED, timeout=WAIT_MS)
    assert "corrupt" in card.state_label.text()
    assert card.state_label.property("kind") == "error" and leftovers() == []
    assert card.resume_button.text() == "Try again"
    with qtbot.waitSignal(dialog.models_changed, timeout=WAIT_MS):
        qtbot.mouseClick(card.resume_button, Qt.MouseButton.LeftButton)
    assert leftovers() == [TINY]


def test_interrupted_downloads_appear_paused_and_resume(qtbot: QtBot, fake_hub: FakeHub,
                                                        tmp_path: Path) -> None:
    served = serve_download(fake_hub, tmp_path, slow(), megabytes=3)
    before = DownloadBridge(policy=FAST)
    statuses: list[DownloadStatus] = []
    before.changed.connect(statuses.append)
    before.add(REPO, TINY)
    qtbot.waitUntil(lambda: any(s.done_bytes > 0 for s in statuses), timeout=WAIT_MS)
    before.close()  # the app quits: the partial is kept

    after = DownloadBridge(policy=FAST)
    try:
        d = ModelsDialog(after)
        qtbot.addWidget(d)
        d.show()
        d.show_page("downloads")
        card = d.downloads.card_for(TINY)
        assert card is not None and card.status.state is DownloadState.PAUSED
        assert card.status.done_bytes > 0 and card.resume_button.isVisible()
        with qtbot.waitSignal(d.models_changed, timeout=WAIT_MS):
            qtbot.mouseClick(card.resume_button, Qt.MouseButton.LeftButton)
        assert hashlib.sha256((paths.models_dir() / TINY).read_bytes()).hexdigest() == \
            served.sha256
    finally:
        after.close()
