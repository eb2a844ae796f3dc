"""What an empty chat shows: a heading, the model's state, a few prompts to start with, and on
the first run a short welcome (which models there are, where files live, privacy)."""

from __future__ import annotations

import html

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QGridLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from inglenook.ui.plain import plain_label

STARTERS = (  # (what the button says, the prompt it puts in the message box)
    ("Explain how rainbows form", "Explain how a rainbow forms, in three short paragraphs."),
    ("Write an invitation", "Write a friendly note inviting my neighbours to a garden party."),
    ("Check for palindromes in Python",
     "Write a Python function that checks whether a string is a palindrome."),
    ("Plan three days in Lisbon", "Plan a relaxed three-day trip to Lisbon."),
)
WELCOME = (
    "<b>Welcome to Inglenook.</b> Everything runs on this computer: your chats, and the model "
    "that answers them. The small model that comes with Inglenook is there to try things out; "
    "for better answers, pick a bigger one under <b>Models</b> (it downloads once, then works "
    "offline). Nothing leaves this computer unless you turn it on: downloads, remote engines, "
    "tool servers and the API server (Help → About says what each sends). Your conversations "
    "are kept in:<br>{data}")


class EmptyState(QWidget):
    """Signals:
    starter_chosen(str): a suggested prompt was picked (it goes into the message box).
    welcome_dismissed(): "Got it" on the first-run welcome.
    """

    starter_chosen = Signal(str)
    welcome_dismissed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("emptyState")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(40, 90, 40, 40)
        layout.setSpacing(10)
        title = QLabel("What shall we talk about?", self)
        title.setObjectName("emptyTitle")
        title.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.label = plain_label("", self, name="emptyLabel")  # it names the model
        self.label.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.label.setWordWrap(True)
        self.welcome = QWidget(self)
        self.welcome.setObjectName("welcome")
        welcome_layout = QVBoxLayout(self.welcome)
        self.welcome_text = QLabel(self.welcome)
        self.welcome_text.setObjectName("welcomeText")
        self.welcome_text.setWordWrap(True)
        self.welcome_text.setTextFormat(Qt.TextFormat.RichText)
        got_it = QPushButton("Got it", self.welcome)
        got_it.setObjectName("welcomeDismissButton")
        got_it.setToolTip("Hide this welcome for good")
        got_it.clicked.connect(self._dismiss)
        welcome_layout.addWidget(self.welcome_text)
        welcome_layout.addWidget(got_it, 0, Qt.AlignmentFlag.AlignRight)
        self.welcome.hide()
        starters = QWidget(self)
        grid = QGridLayout(starters)
        grid.setSpacing(8)
        self.starter_buttons: list[QPushButton] = []
        for n, (label, prompt) in enumerate(STARTERS):
            button = QPushButton(label, starters)
            button.setObjectName("starterButton")
            button.setToolTip(f"Put this in the message box: {prompt}")
            button.clicked.connect(lambda _=False, p=prompt: self.starter_chosen.emit(p))
            grid.addWidget(button, n // 2, n % 2)
            self.starter_buttons.append(button)
        layout.addWidget(title)
        layout.addWidget(self.label)
        layout.addSpacing(8)
        layout.addWidget(self.welcome)
        layout.addWidget(starters)

    def show_welcome(self, data_folder: str) -> None:
        self.welcome_text.setText(WELCOME.format(data=html.escape(data_folder)))
        self.welcome.show()

    def _dismiss(self) -> None:
        self.welcome.hide()
        self.welcome_dismissed.emit()
