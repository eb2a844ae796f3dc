"""What an empty chat shows: a heading, the model's state, a few prompts to start with, and on
the first run a short welcome (which models there are, where files live, privacy)."""

from __future__ import annotations

import html

from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import (
    QGridLayout,
    QLabel,
    QPushButton,
    QScrollBar,
    QVBoxLayout,
    QWidget,
)

from inglenook.ui.plain import plain_label

STARTERS = (  # (what the button says, the prompt it puts in the message box)
    ("Explain how rainbows form", "Explain how a rainbow forms, in three short paragraphs."),
    ("Write an invitation", "Write a friendly note inviting my neighbours to a garden party."),
    ("Palindromes in Python",  # short: a narrow chat column shows it whole
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
        self._layout = layout = QVBoxLayout(self)
        layout.setContentsMargins(24, 90, 24, 40)
        layout.setSpacing(10)
        title = QLabel("What shall we talk about?", self)
        title.setObjectName("emptyTitle")
        title.setAlignment(Qt.AlignmentFlag.AlignCenter)
        title.setWordWrap(True)  # two lines rather than cut in a narrow window
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
        self._grid = QGridLayout(starters)
        self._grid.setSpacing(8)
        self.starter_buttons: list[QPushButton] = []
        for label, prompt in STARTERS:
            button = QPushButton(label, starters)
            button.setObjectName("starterButton")
            button.setToolTip(f"Put this in the message box: {prompt}")
            button.clicked.connect(lambda _=False, p=prompt: self.starter_chosen.emit(p))
            self.starter_buttons.append(button)
        self._columns = 0
        self._arrange(2)
        layout.addWidget(title)
        layout.addWidget(self.label)
        layout.addSpacing(8)
        layout.addWidget(self.welcome)
        layout.addWidget(starters)

    def _arrange(self, columns: int) -> None:
        """The starters in two columns, or one when two would be wider than the chat."""
        if columns == self._columns:
            return
        self._columns = columns
        for button in self.starter_buttons:
            self._grid.removeWidget(button)
        for n, button in enumerate(self.starter_buttons):
            self._grid.addWidget(button, n // columns, n % columns)

    def minimumSizeHint(self) -> QSize:
        hint = super().minimumSizeHint()  # one column, at the narrowest
        widest = max(b.minimumSizeHint().width() for b in self.starter_buttons)
        margins = self._layout.contentsMargins()
        return QSize(widest + margins.left() + margins.right(), hint.height())

    def resizeEvent(self, event: QResizeEvent) -> None:
        margins = self._layout.contentsMargins()
        room = event.size().width() - margins.left() - margins.right()
        pairs = zip(self.starter_buttons[::2], self.starter_buttons[1::2], strict=False)
        two = max(a.sizeHint().width() + b.sizeHint().width() for a, b in pairs)
        self._arrange(2 if room >= two + self._grid.spacing() else 1)
        super().resizeEvent(event)

    def show_welcome(self, data_folder: str) -> None:
        self.welcome_text.setText(WELCOME.format(data=html.escape(data_folder)))
        self.welcome.show()

    def _dismiss(self) -> None:
        self.welcome.hide()
        self.welcome_dismissed.emit()

    def place(self, bar: QScrollBar, width: int, height: int) -> None:
        """Fill a viewport `width` x `height` whose scroll bar is `bar` (it scrolls when the
        welcome and the starters are taller)."""
        hint = max(self.heightForWidth(width), self.sizeHint().height())
        bar.setRange(0, max(0, hint - height))
        bar.setPageStep(max(1, height))
        self.setGeometry(0, -bar.value(), width, max(height, hint))
        self.show()
