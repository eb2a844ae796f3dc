"""What a thinking model wrote before its answer, above the answer in its bubble.

While the model thinks the block is open and says "Thinking…", its text growing as it streams;
when the answer begins it folds to one line, "Thought for 12 s" (or "Reasoning" when the time
is not known: an imported reply), and a click opens it again. Stopped before the answer began,
it says so ("Stopped while thinking · 38 s"). The text is the model's own
Markdown, in a quieter style than the answer; Copy on the bubble never includes it.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QSizePolicy, QToolButton, QVBoxLayout, QWidget

from inglenook.core.provenance import format_seconds
from inglenook.ui.chat.markdown_view import MarkdownView

LIVE = "Thinking…"


def title(seconds: float | None) -> str:
    return f"Thought for {format_seconds(seconds)}" if seconds is not None else "Reasoning"


def stopped_title(seconds: float | None) -> str:
    return "Stopped while thinking" + (f" · {format_seconds(seconds)}" if seconds else "")


class ReasoningBlock(QFrame):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("reasoningBlock")
        self.live = False
        self.header = QToolButton(self)
        self.header.setObjectName("reasoningHeader")
        self.header.setAutoRaise(True)
        self.header.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.header.setCursor(Qt.CursorShape.PointingHandCursor)
        self.header.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)
        self.header.setAccessibleDescription("Show or hide what the model thought before it "
                                             "answered")
        self.header.setToolTip("What the model thought before it answered (not copied "
                               "with the reply)")
        self.header.clicked.connect(self._on_click)
        self._rule = QFrame(self)  # the text behind a rule on its left, like a quotation
        self._rule.setObjectName("reasoningText")
        self.body = MarkdownView(self._rule)
        self.body.setObjectName("reasoningBody")
        quoted = QVBoxLayout(self._rule)
        quoted.setContentsMargins(10, 0, 0, 0)
        quoted.addWidget(self.body)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 2)
        layout.setSpacing(2)
        layout.addWidget(self.header, 0, Qt.AlignmentFlag.AlignLeft)
        layout.addWidget(self._rule)
        self._title = LIVE
        self.set_open(False)

    @property
    def text(self) -> str:
        return self.body.markdown()

    @property
    def is_open(self) -> bool:
        return not self._rule.isHidden()

    def show_live(self, text: str) -> None:
        """The model is thinking: open (unless the user folded it since), with what it has
        written so far."""
        opening, self.live = not self.live, True
        self._title = LIVE
        self.body.set_markdown(text)
        self.set_open(opening or self.is_open)

    def show_done(self, text: str, seconds: float | None) -> None:
        """Thinking is over: folded to its title (opened only by the user)."""
        was_live, self.live = self.live, False
        self._title = title(seconds)
        self.body.set_markdown(text)
        self.body.flush()
        self.set_open(self.is_open and not was_live)

    def show_stopped(self, text: str, seconds: float | None) -> None:
        """Ended before any answer: the title says so, not how long it thought."""
        self.live = False
        self._title = stopped_title(seconds)
        self.body.set_markdown(text)
        self.body.flush()
        self.set_open(self.is_open)

    def set_open(self, open_: bool) -> None:
        self._rule.setVisible(open_)
        self.header.setArrowType(Qt.ArrowType.DownArrow if open_ else Qt.ArrowType.RightArrow)
        self.header.setText(self._title)
        self.header.setAccessibleName(self._title)

    def _on_click(self) -> None:
        self.set_open(not self.is_open)
