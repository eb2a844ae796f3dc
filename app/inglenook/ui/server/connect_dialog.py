"""Connect an app…: for each app that can use the API, what to paste and where
(server/connect.py writes the text; `inglenook connect` prints the same)."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtGui import QFontDatabase, QGuiApplication
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QHBoxLayout,
    QListWidget,
    QPlainTextEdit,
    QPushButton,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from inglenook.server.connect import Guide
from inglenook.ui.plain import plain_label
from inglenook.ui.widgets.window_size import fit_in_window


class ConnectDialog(QDialog):
    """Signals:
    start_requested(): turn the API server on (with the options it is set to).
    """

    start_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("connectDialog")
        self.setWindowTitle("Connect an app")
        self.guides: list[Guide] = []
        self.running = False
        self.intro = plain_label("", self, name="connectIntro")
        self.intro.setWordWrap(True)
        # What these settings need, one click away (else: Models → Local API server).
        self.start_button = QPushButton("Turn the server on", self)
        self.start_button.setObjectName("connectStart")
        self.start_button.setToolTip("Start the local API server with the options it is set "
                                     "to (Models → Local API server changes them)")
        self.start_button.clicked.connect(self.start_requested)
        self.start_button.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Fixed)
        self.apps = QListWidget(self)
        self.apps.setObjectName("connectApps")
        self.apps.setAccessibleName("Apps")
        self.apps.setMaximumWidth(180)  # the text beside it is what gets read
        self.where = plain_label("", self, name="connectWhere")  # holds the model's name
        self.where.setWordWrap(True)
        self.note = plain_label("", self, name="connectNote")
        self.note.setWordWrap(True)
        self.text = QPlainTextEdit(self)
        self.text.setObjectName("connectText")
        self.text.setReadOnly(True)
        self.text.setAccessibleName("Settings to paste")
        self.text.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.text.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.copy = QPushButton("Copy", self)
        self.copy.setObjectName("connectCopy")
        self.copy.setToolTip("Copy these settings to the clipboard")
        self.copy.clicked.connect(self._copy)
        self.copy.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Fixed)
        right = QVBoxLayout()
        right.addWidget(self.where)
        right.addWidget(self.text, 1)
        under = QHBoxLayout()
        under.addWidget(self.note, 1)
        under.addWidget(self.copy)
        right.addLayout(under)
        row = QHBoxLayout()
        row.addWidget(self.apps)
        row.addLayout(right, 1)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        buttons.button(QDialogButtonBox.StandardButton.Close).setToolTip("Close this window")
        buttons.rejected.connect(self.reject)
        top = QHBoxLayout()
        top.addWidget(self.intro, 1)
        top.addWidget(self.start_button)
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addLayout(row, 1)
        layout.addWidget(buttons)
        self.apps.currentRowChanged.connect(self._show)
        fit_in_window(self, 820, 480)

    def set_guides(self, guides: list[Guide], running: bool, url: str,
                   problem: str = "") -> None:
        """The guides for the server as it is (or will be, when it is off); `problem`: why it
        did not start."""
        self.intro.setText(
            (f"The API server is on at {url}." if running else
             f"The API server is off; these settings are for {url}.")
            + " Paste into the app what is shown for it."
            + (f"\n{problem}" if problem and not running else ""))
        self.start_button.setVisible(not running)
        row = max(0, self.apps.currentRow())
        self.guides, self.running = guides, running
        self.apps.blockSignals(True)
        self.apps.clear()
        self.apps.addItems([g.app for g in guides])
        self.apps.blockSignals(False)
        self.apps.setCurrentRow(min(row, len(guides) - 1))
        self._show(self.apps.currentRow())

    def _show(self, row: int) -> None:
        guide = self.guides[row] if 0 <= row < len(self.guides) else None
        self.where.setText(f"Where: {guide.where}" if guide else "")
        self.text.setPlainText(guide.text if guide else "")
        note = " ".join(n for n in (guide.unserved, guide.works, guide.note) if n) \
            if guide else ""
        self.note.setText(note)
        self.note.setVisible(bool(note))
        self.copy.setEnabled(guide is not None)

    def _copy(self) -> None:
        QGuiApplication.clipboard().setText(self.text.toPlainText())
