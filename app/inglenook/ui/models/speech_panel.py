"""Discover's right side for a speech model (speech/downloads.py): what it is, its size and
whether it fits in memory, Download (the app's own Hub downloader, each file into the speech
folder), and for a voice a sample to hear. The sample is fetched, decoded and played on a
background thread; nothing of it is written to disk.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from PySide6.QtCore import Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QPushButton, QVBoxLayout, QWidget

from inglenook.core.units import describe_size
from inglenook.models import fit, hub
from inglenook.models.advice import FIT_TEXT
from inglenook.models.filenames import SPEECH_FILES, UnsafeFileName
from inglenook.speech import audio
from inglenook.speech import player as players
from inglenook.speech.downloads import SpeechEntry, fetch_sample
from inglenook.speech.player import Player, PlayerError
from inglenook.ui import tasks
from inglenook.ui.models.bridge import DownloadBridge
from inglenook.ui.models.repo_panel import OFFLINE_MESSAGE, chip, failure_message
from inglenook.ui.plain import plain_label

FIT_KINDS = {"fits": "fits", "tight": "tight", "won't fit": "wont"}
KINDS = {"whisper": "Speech to text (dictation, voice conversation, transcription)",
         "voice": "A voice, for reading replies aloud"}


def play_sample(entry: SpeechEntry, open_player: Callable[[int], Player]) -> None:
    """Fetch, decode and play a voice's sample (a background thread's work)."""
    data = fetch_sample(entry)
    samples = audio.decode(data, 60.0).samples
    pcm = (np.clip(samples, -1.0, 1.0) * 32767).astype("<i2").tobytes()
    player = open_player(audio.SAMPLE_RATE)
    try:
        player.write(pcm)
        player.close()
    except BaseException:
        player.stop()
        raise


class SpeechPanel(QFrame):
    """Signals:
        downloads_added(): the model's files were queued for download.
    """

    downloads_added = Signal()

    def __init__(self, bridge: DownloadBridge, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("speechPanel")
        self.bridge = bridge
        self.entry: SpeechEntry | None = None
        self.open_player: Callable[[int], Player] = players.open_player  # tests: a fake one
        self._sample: tasks.Task | None = None
        self.title = plain_label("", self, name="repoTitle")
        self.meta = plain_label("", self, name="repoMeta")
        self.meta.setWordWrap(True)
        self.status = plain_label("", self, name="repoStatus")
        self.status.setWordWrap(True)
        self.fit_row = QHBoxLayout()
        self._chip: QWidget | None = None
        self.download_button = QPushButton("Download", self)
        self.download_button.setObjectName("speechDownload")
        self.download_button.clicked.connect(self.download)
        self.sample_button = QPushButton("Play sample", self)
        self.sample_button.setObjectName("speechSample")
        self.sample_button.setToolTip("Hear a few seconds of this voice (fetched from the Hub)")
        self.sample_button.clicked.connect(self.play)
        buttons = QHBoxLayout()
        buttons.addWidget(self.download_button)
        buttons.addWidget(self.sample_button)
        buttons.addStretch(1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(18, 16, 18, 16)
        layout.setSpacing(6)
        layout.addWidget(self.title)
        layout.addWidget(self.meta)
        layout.addLayout(self.fit_row)
        layout.addLayout(buttons)
        layout.addWidget(self.status)
        layout.addStretch(1)

    def open(self, entry: SpeechEntry) -> None:
        self.entry = entry
        self.title.setText(entry.title)
        self.meta.setText(f"{entry.description}\n{KINDS[entry.kind]} · {entry.repo}\n"
                          f"Download: {describe_size(entry.size)}")
        verdict, sentence = entry.fits(fit.system_memory().ram_free)
        if self._chip is not None:
            self._chip.deleteLater()
        self._chip = chip(FIT_TEXT[verdict], FIT_KINDS[verdict], self)
        self._chip.setToolTip(sentence)
        self.fit_row.insertWidget(0, self._chip)
        self.status.setText(sentence)
        self.sample_button.setVisible(bool(entry.sample))
        self.sample_button.setEnabled(True)
        self.sample_button.setText("Play sample")
        self.refresh_installed()

    def refresh_installed(self) -> None:
        if self.entry is None:
            return
        installed = self.entry.installed()
        self.download_button.setEnabled(not installed)
        self.download_button.setText("Installed" if installed else "Download")
        self.download_button.setToolTip(
            "In Models → Library under Speech models" if installed
            else f"Download {describe_size(self.entry.size)} into "
                 f"{self.entry.dest()}")

    def download(self) -> None:
        entry = self.entry
        if entry is None:
            return
        if hub.is_offline():
            self.status.setText(OFFLINE_MESSAGE)
            return
        try:
            for path in entry.files:
                self.bridge.add(entry.repo, path, dest_dir=entry.dest(), suffixes=SPEECH_FILES)
        except UnsafeFileName as exc:
            self.status.setText(str(exc))
            return
        self.downloads_added.emit()

    def play(self) -> None:
        entry = self.entry
        if entry is None or not entry.sample:
            return
        self.sample_button.setEnabled(False)
        self.sample_button.setText("Playing…")
        self._sample = tasks.run(play_sample, entry, self.open_player,
                                 on_done=lambda _v: self._played(""),
                                 on_failed=self._sample_failed, owner=self,
                                 replaces=self._sample)

    def _sample_failed(self, exc: object) -> None:
        if isinstance(exc, (PlayerError, audio.AudioError)):
            self._played(f"The sample could not be played: {exc}")
        else:
            self._played(f"The sample could not be fetched. {failure_message(exc)}")

    def _played(self, message: str) -> None:
        self.sample_button.setEnabled(True)
        self.sample_button.setText("Play sample")
        if message:
            self.status.setText(message)
