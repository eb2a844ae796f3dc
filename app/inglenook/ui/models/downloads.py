"""The Models dialog's Downloads page: the queue, one card per file, with progress, speed, time
left, and Pause / Resume / Cancel. Everything it shows comes from DownloadBridge.changed."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from inglenook.core import units
from inglenook.core.units import describe_size
from inglenook.models.download_queue import DownloadState, DownloadStatus
from inglenook.models.filenames import GGUF_ONLY, SPEECH_FILES, UnsafeFileName, saved_name
from inglenook.ui.models.bridge import DownloadBridge
from inglenook.ui.models.page import page_header
from inglenook.ui.plain import plain_label
from inglenook.ui.widgets.style import restyle

FINISHED = (DownloadState.DONE, DownloadState.CANCELLED)


def describe_eta(seconds: float | None) -> str:
    if seconds is None:
        return ""
    if seconds < 60:
        return f"{max(1, round(seconds))} s left"
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"{minutes} min left"
    return f"{minutes // 60} h {minutes % 60} min left"


def describe_status(s: DownloadStatus) -> str:
    """One line for a person: where the download stands, and why when it stopped."""
    done = units.amount(s.done_bytes)
    amount = f"{done} of {units.amount(s.total_bytes)}" if s.total_bytes else done
    percent = f" ({100 * s.done_bytes / s.total_bytes:.0f}%)" if s.total_bytes else ""
    if s.state is DownloadState.QUEUED:
        return "Waiting for the downloads before it…"
    if s.state is DownloadState.RUNNING:
        if s.message:  # a retry notice, or "stopping…"
            return f"{amount} · {s.message}"
        parts = [amount]
        if s.bytes_per_s > 0:
            parts.append(units.rate(s.bytes_per_s))
        if s.eta_s:
            parts.append(describe_eta(s.eta_s))
        return " · ".join(parts) if s.total_bytes else "Starting…"
    if s.state is DownloadState.PAUSED:
        return f"Paused at {amount}{percent}. The partial file is kept; resume any time."
    if s.state is DownloadState.FAILED:
        return s.message or "The download failed."
    if s.state is DownloadState.CANCELLED:
        return "Cancelled; the partial file was deleted."
    return f"Downloaded and verified · {describe_size(s.total_bytes)} · now in your Library"


def file_label(repo: str, filename: str) -> str:
    try:
        return saved_name(repo, filename, (*GGUF_ONLY, *SPEECH_FILES))
    except UnsafeFileName:
        return filename


class DownloadCard(QFrame):
    def __init__(self, bridge: DownloadBridge, status: DownloadStatus,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("downloadCard")
        self.bridge = bridge
        self.job_id = status.id
        self.status = status
        self.name = plain_label(file_label(status.repo, status.filename), self, name="downloadName")
        self.repo = plain_label(status.repo, self, name="downloadRepo")  # Hub names: text
        self.bar = QProgressBar(self)
        self.bar.setObjectName("downloadProgress")
        self.bar.setRange(0, 1000)
        self.bar.setTextVisible(False)
        self.state_label = QLabel(self)
        self.state_label.setObjectName("downloadStatus")
        self.state_label.setWordWrap(True)
        self.state_label.setTextFormat(Qt.TextFormat.PlainText)
        self.pause_button = self._button("Pause", "pauseDownloadButton",
                                         lambda: bridge.pause(self.job_id))
        self.resume_button = self._button("Resume", "resumeDownloadButton",
                                          lambda: bridge.resume(self.job_id))
        self.cancel_button = self._button("Cancel", "cancelDownloadButton",
                                          lambda: bridge.cancel(self.job_id))
        self.cancel_button.setToolTip("Stop and delete the partial file")
        top = QHBoxLayout()
        names = QVBoxLayout()
        names.setSpacing(1)
        names.addWidget(self.name)
        names.addWidget(self.repo)
        top.addLayout(names, 1)
        for button in (self.pause_button, self.resume_button, self.cancel_button):
            top.addWidget(button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(16, 12, 16, 12)
        layout.setSpacing(6)
        layout.addLayout(top)
        layout.addWidget(self.bar)
        layout.addWidget(self.state_label)
        self.update_status(status)

    def _button(self, text: str, name: str, action: object) -> QPushButton:
        button = QPushButton(text, self)
        button.setObjectName(name)
        button.clicked.connect(action)
        return button

    def update_status(self, s: DownloadStatus) -> None:
        self.status = s
        if s.state is DownloadState.DONE:
            self.bar.setValue(1000)
        elif s.total_bytes:
            self.bar.setValue(int(1000 * s.done_bytes / s.total_bytes))
        else:
            self.bar.setValue(0)
        self.bar.setProperty("state", s.state.value)
        self.state_label.setText(describe_status(s))
        restyle(self.state_label, kind="error" if s.state is DownloadState.FAILED else "")
        restyle(self.bar)
        stopping = s.message == "stopping…"
        self.pause_button.setVisible(s.state in (DownloadState.QUEUED, DownloadState.RUNNING))
        self.pause_button.setEnabled(not stopping)
        self.resume_button.setVisible(s.state in (DownloadState.PAUSED, DownloadState.FAILED))
        self.resume_button.setText("Try again" if s.state is DownloadState.FAILED else "Resume")
        self.cancel_button.setVisible(s.state not in FINISHED)
        self.cancel_button.setEnabled(not stopping)
        self.bar.setVisible(s.state is not DownloadState.CANCELLED)


class DownloadsPage(QWidget):
    """Signals:
        active_changed(int): how many downloads are queued or running now.
    """

    active_changed = Signal(int)

    def __init__(self, bridge: DownloadBridge, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("downloadsPage")
        self.bridge = bridge
        self.cards: dict[int, DownloadCard] = {}
        subtitle = QLabel("Downloads go on while this window is closed. A paused download keeps "
                          "its partial file and resumes where it stopped, even after a restart.",
                          self)
        self.clear_button = QPushButton("Clear finished", self)
        self.clear_button.setObjectName("clearDownloadsButton")
        self.clear_button.setToolTip("Remove finished and cancelled downloads from this list")
        self.clear_button.clicked.connect(self.clear_finished)
        head = page_header(self, "Downloads", subtitle, self.clear_button)

        self.empty = QLabel("No downloads yet. Find a model in Discover and press Download.",
                            self)
        self.empty.setObjectName("modelsEmpty")
        self.empty.setAlignment(Qt.AlignmentFlag.AlignCenter)
        content = QWidget()
        content.setObjectName("downloadsContent")
        self.list_layout = QVBoxLayout(content)
        self.list_layout.setContentsMargins(0, 0, 6, 0)
        self.list_layout.setSpacing(10)
        self.list_layout.addStretch(1)
        self.cards_scroll = QScrollArea(self)
        self.cards_scroll.setObjectName("downloadsScroll")
        self.cards_scroll.setWidgetResizable(True)
        self.cards_scroll.setFrameShape(QFrame.Shape.NoFrame)
        self.cards_scroll.setWidget(content)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(24, 20, 24, 20)
        layout.setSpacing(12)
        layout.addLayout(head)
        layout.addWidget(self.empty, 1)
        layout.addWidget(self.cards_scroll, 1)
        for status in bridge.statuses():
            self.show_status(status)
        bridge.changed.connect(self.show_status)
        self._update_empty()

    def show_status(self, status: DownloadStatus) -> None:
        card = self.cards.get(status.id)
        if card is None:
            card = DownloadCard(self.bridge, status, self.cards_scroll.widget())
            self.cards[status.id] = card
            self.list_layout.insertWidget(self.list_layout.count() - 1, card)
        else:
            card.update_status(status)
        self._update_empty()
        self.active_changed.emit(self.active())

    def card_for(self, filename: str) -> DownloadCard | None:
        """The newest card of a repository file (tests, and the Discover page)."""
        found = [c for c in self.cards.values() if c.status.filename == filename]
        return found[-1] if found else None

    def active(self) -> int:
        return sum(c.status.state in (DownloadState.QUEUED, DownloadState.RUNNING)
                   for c in self.cards.values())

    def clear_finished(self) -> None:
        for job_id, card in list(self.cards.items()):
            if card.status.state in FINISHED:
                del self.cards[job_id]
                card.deleteLater()
        self._update_empty()

    def _update_empty(self) -> None:
        has = bool(self.cards)
        self.empty.setVisible(not has)
        self.cards_scroll.setVisible(has)
        self.clear_button.setEnabled(any(c.status.state in FINISHED
                                         for c in self.cards.values()))
