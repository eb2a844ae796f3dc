"""The Library's speech models: the installed whisper models and Piper voices (the bundled ones
and those downloaded from Discover), and which of them the app uses: the choices list only
what is installed, and are kept in the settings (speech_model, speech_voice), which
speech/catalog.py follows.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QComboBox,
    QFormLayout,
    QFrame,
    QHeaderView,
    QLabel,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from inglenook.core.units import describe_size
from inglenook.speech import catalog
from inglenook.ui.app_settings import AppSettings

COLUMNS = ("Speech model", "Kind", "Size")
FIRST = "The first installed"
# The languages offered here (whisper's codes; it knows about a hundred, which the command
# line and the API take: listing them all would import faster-whisper on the GUI thread).
LANGUAGE_NAMES = {"en": "English", "de": "German", "fr": "French", "es": "Spanish",
                  "it": "Italian", "pt": "Portuguese", "nl": "Dutch", "pl": "Polish",
                  "ru": "Russian", "uk": "Ukrainian", "tr": "Turkish", "ar": "Arabic",
                  "hi": "Hindi", "zh": "Chinese", "ja": "Japanese", "ko": "Korean",
                  "sv": "Swedish", "da": "Danish", "no": "Norwegian", "fi": "Finnish",
                  "cs": "Czech", "el": "Greek", "he": "Hebrew", "id": "Indonesian",
                  "vi": "Vietnamese"}


def _size(path: Path) -> int:
    try:
        if path.is_dir():
            return sum(f.stat().st_size for f in path.iterdir() if f.is_file())
        return path.stat().st_size
    except OSError:
        return 0


class SpeechLibrary(QFrame):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("speechLibrary")
        self.settings: AppSettings | None = None
        title = QLabel("Speech models", self)
        title.setObjectName("speechLibraryTitle")
        self.table = QTreeWidget(self)
        self.table.setObjectName("speechTable")
        self.table.setHeaderLabels(COLUMNS)
        self.table.setRootIsDecorated(False)
        self.table.setUniformRowHeights(True)
        self.table.setMaximumHeight(120)
        header = self.table.header()
        header.setStretchLastSection(False)
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        for column in (1, 2):
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.ResizeToContents)
        self.whisper_choice = QComboBox(self)
        self.whisper_choice.setObjectName("speechModelChoice")
        self.whisper_choice.setAccessibleName("Speech to text model")
        self.whisper_choice.setToolTip("Which whisper model writes down what you say")
        self.voice_choice = QComboBox(self)
        self.voice_choice.setObjectName("speechVoiceChoice")
        self.voice_choice.setAccessibleName("Voice")
        self.voice_choice.setToolTip("Which voice reads replies aloud")
        self.language_choice = QComboBox(self)
        self.language_choice.setObjectName("speechLanguageChoice")
        self.language_choice.setAccessibleName("Dictation language")
        self.language_choice.setToolTip("The language you dictate in; detected, unless chosen")
        self.language_choice.addItem("Detected", "")
        for code, language in sorted(LANGUAGE_NAMES.items(), key=lambda item: item[1]):
            self.language_choice.addItem(language, code)
        self.whisper_choice.activated.connect(lambda _i: self._chosen("speech_model"))
        self.voice_choice.activated.connect(lambda _i: self._chosen("speech_voice"))
        self.language_choice.activated.connect(lambda _i: self._chosen("speech_language"))
        form = QFormLayout()
        form.setContentsMargins(0, 0, 0, 0)
        form.addRow("Dictation uses", self.whisper_choice)
        form.addRow("Dictation language", self.language_choice)
        form.addRow("Replies are read by", self.voice_choice)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(4)
        layout.addWidget(title)
        layout.addWidget(self.table)
        layout.addLayout(form)

    def bind(self, settings: AppSettings | None) -> None:
        self.settings = settings
        self.refresh()

    def names(self) -> list[str]:
        """The speech models listed (tests)."""
        items = (self.table.topLevelItem(i) for i in range(self.table.topLevelItemCount()))
        return [item.text(0) for item in items if item is not None]

    def refresh(self) -> None:
        self.table.clear()
        whisper = [(f.name, _size(f)) for f in catalog.whisper_models()]
        if (catalog.BUNDLED_WHISPER not in {name for name, _ in whisper}
                and catalog.bundled_whisper_parts() is not None):
            whisper.insert(0, (catalog.BUNDLED_WHISPER, 145 << 20))  # joined when first used
        voices = [(v.name, _size(v.model)) for v in catalog.voices()]
        for name, size in whisper:
            QTreeWidgetItem(self.table, [name, "Speech to text", describe_size(size)])
        for name, size in voices:
            QTreeWidgetItem(self.table, [name, "Voice", describe_size(size)])
        value = self.settings.value if self.settings is not None else None
        self._fill(self.whisper_choice, [n for n, _ in whisper],
                   value.speech_model if value else catalog.chosen["whisper"])
        self._fill(self.voice_choice, [n for n, _ in voices],
                   value.speech_voice if value else catalog.chosen["voice"])
        language = value.speech_language if value else catalog.chosen["language"]
        self.language_choice.setCurrentIndex(max(0, self.language_choice.findData(language)))

    @staticmethod
    def _fill(box: QComboBox, names: list[str], current: str) -> None:
        box.clear()
        box.addItem(FIRST if names else "None installed", "")
        for name in names:
            box.addItem(name, name)
        index = box.findData(current, Qt.ItemDataRole.UserRole)
        box.setCurrentIndex(max(0, index))
        box.setEnabled(bool(names))

    def _chosen(self, name: str) -> None:
        box, key = {"speech_model": (self.whisper_choice, "whisper"),
                    "speech_voice": (self.voice_choice, "voice"),
                    "speech_language": (self.language_choice, "language")}[name]
        value = str(box.currentData() or "")
        if self.settings is not None:
            self.settings.set(name, value)
        else:
            catalog.choose(**{key: value})
