"""Speech models in the Models dialog, against the fake Hub: Discover lists whisper models and
Piper voices under their own heading with size and fit, downloads them with the app's own Hub
downloader into the speech folder (files kept in git verified by their git id, LFS ones by
sha256), plays a voice's sample, and the Library lists them as speech models whose choice is a
setting that speech/catalog.py follows."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from inglenook import paths
from inglenook.core.settings import Settings
from inglenook.models.download import RetryPolicy
from inglenook.models.download_queue import DownloadState
from inglenook.speech import audio, catalog
from inglenook.speech.downloads import SPEECH_MODELS
from inglenook.ui.app_settings import AppSettings
from inglenook.ui.main_window import MainWindow
from inglenook.ui.models.bridge import DownloadBridge
from inglenook.ui.models.dialog import ModelsDialog
from inglenook.ui.models.discover import SPEECH_HEADING
from tests import fakehub
from tests.fakehub import FakeFile, FakeHub, Fault

fake_hub = fakehub.fake_hub  # the fixture, under its own name

WAIT_MS = 20_000
FAST = RetryPolicy(base_delay_s=0.01, max_delay_s=0.05, max_retry_after_s=0.2,
                   connect_timeout_s=2.0, read_timeout_s=2.0)
TINY = next(e for e in SPEECH_MODELS if e.name == "faster-whisper-tiny")
LESSAC = next(e for e in SPEECH_MODELS if e.name == "en_US-lessac-medium")


class FakePlayer:
    """The sound card (the one fake the house allows): keeps what it was given."""

    def __init__(self) -> None:
        self.pcm = bytearray()
        self.rates: list[int] = []
        self.closed = False

    def __call__(self, rate: int) -> FakePlayer:
        self.rates.append(rate)
        return self

    def write(self, pcm: bytes) -> None:
        self.pcm += pcm

    def close(self) -> None:
        self.closed = True

    def stop(self) -> None:
        pass


@pytest.fixture
def bridge() -> Iterator[DownloadBridge]:
    b = DownloadBridge(policy=FAST)
    yield b
    b.close()


@pytest.fixture
def settings() -> Iterator[AppSettings]:
    s = AppSettings(Settings())
    yield s
    catalog.choose("", "", "")


@pytest.fixture
def dialog(qtbot: QtBot, bridge: DownloadBridge, settings: AppSettings) -> ModelsDialog:
    d = ModelsDialog(bridge, app_settings=settings)
    qtbot.addWidget(d)
    d.show()
    return d


def serve_whisper(hub: FakeHub, *faults: Fault) -> dict[str, FakeFile]:
    hub.add_repo(TINY.repo)
    files = {"config.json": FakeFile("config.json", content=b'{"alignment_heads": []}',
                                     lfs=False, sha256_header=False, faults=faults),
             "tokenizer.json": FakeFile("tokenizer.json", content=b'{"model": {}}', lfs=False,
                                        sha256_header=False),
             "vocabulary.txt": FakeFile("vocabulary.txt", content=b"a\nb\n", lfs=False,
                                        sha256_header=False),
             "model.bin": FakeFile("model.bin", 300_000)}
    for f in files.values():
        hub.add_file(TINY.repo, f)
    return files


def choose_speech(qtbot: QtBot, d: ModelsDialog, name: str) -> None:
    d.show_page("discover")
    row = d.discover.speech_row(name)
    assert row > 0
    d.discover.results.setCurrentRow(row)
    qtbot.waitUntil(lambda: d.discover.speech_panel.isVisible(), timeout=WAIT_MS)


def test_discover_lists_speech_models_under_their_own_heading(qtbot: QtBot,
                                                              dialog: ModelsDialog) -> None:
    items = [dialog.discover.results.item(i) for i in range(dialog.discover.results.count())]
    texts = [i.text() for i in items]
    heading = texts.index(SPEECH_HEADING)
    listed = [item.data(Qt.ItemDataRole.UserRole)[1].name for item in items[heading + 1:]]
    assert listed == [e.name for e in SPEECH_MODELS]
    choose_speech(qtbot, dialog, "faster-whisper-small")
    panel = dialog.discover.speech_panel
    assert not dialog.discover.repo_panel.isVisible()
    assert "Download: 484 MB" in panel.meta.text()
    assert panel._chip is not None and panel._chip.toolTip().startswith("Needs about")
    assert not panel.sample_button.isVisible()  # a whisper model has no sample
    # The bundled ones say so rather than offering a download again.
    choose_speech(qtbot, dialog, catalog.BUNDLED_WHISPER)
    assert panel.download_button.text() == "Installed"
    assert not panel.download_button.isEnabled()


def test_a_whisper_model_downloads_into_its_folder_and_the_library_lists_it(
        qtbot: QtBot, dialog: ModelsDialog, fake_hub: FakeHub, bridge: DownloadBridge,
        settings: AppSettings) -> None:
    files = serve_whisper(fake_hub)
    choose_speech(qtbot, dialog, TINY.name)
    panel = dialog.discover.speech_panel
    assert panel.download_button.text() == "Download"
    qtbot.mouseClick(panel.download_button, Qt.MouseButton.LeftButton)
    assert dialog.current_page() == "downloads"
    qtbot.waitUntil(lambda: len(bridge.statuses()) == 4 and all(
        s.state is DownloadState.DONE for s in bridge.statuses()), timeout=WAIT_MS)
    folder = paths.speech_models_dir() / TINY.name
    for name, served in files.items():
        assert (folder / name).read_bytes() == served.content()
    assert [s.filename for s in bridge.statuses()][-1] == "model.bin"  # the folder whole last
    assert not list(paths.models_dir().glob("*"))  # nothing in the chat models' folder
    qtbot.waitUntil(lambda: TINY.name in dialog.library.speech.names(), timeout=WAIT_MS)
    assert panel.download_button.text() == "Installed"
    # The Library lists it as a speech model, and the choice of model is a setting.
    table = dialog.library.speech.table
    row = dialog.library.speech.names().index(TINY.name)
    assert table.topLevelItem(row).text(1) == "Speech to text"
    choice = dialog.library.speech.whisper_choice
    index = choice.findData(TINY.name)
    assert index > 0
    choice.setCurrentIndex(index)
    choice.activated.emit(index)
    assert settings.value.speech_model == TINY.name
    catalog.choose(settings.value.speech_model, None)
    assert catalog.whisper_folder(None) == folder
    assert catalog.whisper_folder("whisper-1") == folder  # OpenAI's name: the chosen model


def test_a_file_kept_in_git_that_arrives_corrupt_is_refused(
        qtbot: QtBot, dialog: ModelsDialog, fake_hub: FakeHub, bridge: DownloadBridge) -> None:
    serve_whisper(fake_hub, Fault("wrong_bytes", times=-1))
    choose_speech(qtbot, dialog, TINY.name)
    qtbot.mouseClick(dialog.discover.speech_panel.download_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: any(s.filename == "config.json" and s.state is DownloadState.FAILED
                                for s in bridge.statuses()), timeout=WAIT_MS)
    failed = next(s for s in bridge.statuses() if s.filename == "config.json")
    assert "arrived corrupt" in failed.message
    assert not (paths.speech_models_dir() / TINY.name / "config.json").exists()
    qtbot.waitUntil(lambda: all(s.state in (DownloadState.DONE, DownloadState.FAILED)
                                for s in bridge.statuses()), timeout=WAIT_MS)
    assert TINY.name not in [f.name for f in catalog.whisper_models()]  # not a model


def test_a_voice_sample_is_heard_and_a_voice_download_becomes_a_choice(
        qtbot: QtBot, dialog: ModelsDialog, fake_hub: FakeHub, bridge: DownloadBridge,
        settings: AppSettings) -> None:
    tone = (np.sin(np.arange(16_000) * 2 * np.pi * 440 / 16_000) * 8000).astype("<i2")
    encoder = audio.Encoder("mp3", 16_000)
    mp3 = encoder.feed(tone.tobytes()) + encoder.finish()
    fake_hub.add_repo(LESSAC.repo)
    voice = catalog.bundled_voice()
    assert voice is not None
    fake_hub.add_file(LESSAC.repo, FakeFile(LESSAC.sample, content=mp3))
    fake_hub.add_file(LESSAC.repo, FakeFile(LESSAC.files[0], content=voice.config.read_bytes(),
                                            lfs=False, sha256_header=False))
    fake_hub.add_file(LESSAC.repo, FakeFile(LESSAC.files[1], source=voice.model))
    choose_speech(qtbot, dialog, LESSAC.name)
    panel = dialog.discover.speech_panel
    player = FakePlayer()
    panel.open_player = player
    assert panel.sample_button.isVisible()
    qtbot.mouseClick(panel.sample_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: panel.sample_button.isEnabled(), timeout=WAIT_MS)
    assert player.closed and player.rates == [audio.SAMPLE_RATE]
    heard = np.frombuffer(bytes(player.pcm), "<i2")
    assert len(heard) > 12_000 and np.abs(heard).max() > 4000  # about a second of the tone
    qtbot.mouseClick(panel.download_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: len(bridge.statuses()) == 2 and all(
        s.state is DownloadState.DONE for s in bridge.statuses()), timeout=WAIT_MS)
    qtbot.waitUntil(lambda: LESSAC.name in dialog.library.speech.names(), timeout=WAIT_MS)
    choice = dialog.library.speech.voice_choice
    index = choice.findData(LESSAC.name)
    choice.setCurrentIndex(index)
    choice.activated.emit(index)
    assert settings.value.speech_voice == LESSAC.name
    catalog.choose(None, settings.value.speech_voice)
    assert catalog.voice_files("alloy").name == LESSAC.name


def test_a_sample_that_is_not_audio_says_so(qtbot: QtBot, dialog: ModelsDialog,
                                             fake_hub: FakeHub) -> None:
    fake_hub.add_repo(LESSAC.repo)
    fake_hub.add_file(LESSAC.repo, FakeFile(LESSAC.sample, content=b"<html>not audio</html>"))
    choose_speech(qtbot, dialog, LESSAC.name)
    panel = dialog.discover.speech_panel
    player = FakePlayer()
    panel.open_player = player
    qtbot.mouseClick(panel.sample_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: panel.sample_button.isEnabled(), timeout=WAIT_MS)
    assert panel.status.text().startswith("The sample could not be played")
    assert not player.pcm


def test_the_window_follows_the_speech_settings(window: MainWindow) -> None:
    """The Library's choice is a setting; the window hands it to speech/catalog.py, which
    dictation, reading aloud and OpenAI's names in the API go by."""
    try:
        window.app_settings.set("speech_voice", "en_US-lessac-medium")
        window.app_settings.set("speech_model", "faster-whisper-tiny")
        window.app_settings.set("speech_language", "fr")
        assert catalog.chosen == {"whisper": "faster-whisper-tiny",
                                  "voice": "en_US-lessac-medium", "language": "fr"}
        assert window.chats.voice.turns.language() == "fr"  # what the conversation hears
    finally:
        catalog.choose("", "", "")


def test_dictation_listens_for_the_language_chosen(qtbot: QtBot, dialog: ModelsDialog,
                                                   settings: AppSettings) -> None:
    from faster_whisper.tokenizer import _LANGUAGE_CODES

    choice = dialog.library.speech.language_choice
    offered = [choice.itemData(i) for i in range(choice.count())]
    assert offered[0] == "" and set(offered[1:]) <= set(_LANGUAGE_CODES)  # codes whisper takes
    index = choice.findData("de")
    choice.setCurrentIndex(index)
    choice.activated.emit(index)
    assert settings.value.speech_language == "de"
    catalog.choose(language=settings.value.speech_language)  # as the window does
    assert catalog.dictation_language() == "de"
