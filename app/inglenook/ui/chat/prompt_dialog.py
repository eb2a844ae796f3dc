"""The exact prompt a reply was (or would be) made from, token by token: the chat template's
control tokens marked, so the user can see what the model is sent and that their text stayed
text (see core/template.py: message text never becomes control tokens)."""

from __future__ import annotations

import html

from PySide6.QtCore import QMimeData, Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QLabel,
    QPushButton,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from inglenook.engine.protocol import PromptView
from inglenook.ui import theme

# Between the characters of a control token: a line never breaks inside <|im_start|> (Qt's
# rich text ignores white-space: nowrap on a span). Taken out again when text is copied.
WORD_JOINER = "\u2060"


def prompt_html(view: PromptView) -> str:
    """The prompt as HTML: control tokens highlighted and kept whole on a line, everything else
    escaped as text."""
    c = theme.current().colors
    control = f"color:{c.accent_strong};background:{c.accent_soft};font-weight:600"
    parts = []
    for token in view.tokens:
        piece = WORD_JOINER.join(token.piece) if token.special and "\n" not in token.piece \
            else token.piece
        text = html.escape(piece).replace("\n", "↵<br>")
        parts.append(f'<span style="{control}">{text}</span>' if token.special else text)
    return f'<pre style="white-space:pre-wrap">{"".join(parts)}</pre>'


def summary(view: PromptView) -> str:
    images = view.image_positions  # highlighted too, but not the template's
    special = sum(t.special for t in view.tokens) - images
    text = (f"{len(view.tokens):,} tokens of a {view.n_ctx:,}-token context; {special:,} are "
            "control tokens from the chat template (highlighted)")
    text += f", {images:,} are image positions." if images else "."
    if view.dropped_messages:
        text += f" {view.dropped_messages} oldest messages are left out to fit the context."
    if view.defused:
        text += (" This template reshapes message text, so control strings typed in a message "
                 "were defused.")
    return text


class PromptText(QTextBrowser):
    def createMimeDataFromSelection(self) -> QMimeData:
        data = QMimeData()
        data.setText(self.textCursor().selection().toPlainText().replace(WORD_JOINER, ""))
        return data


class PromptDialog(QDialog):
    def __init__(self, view: PromptView, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("promptDialog")
        self.setWindowTitle("What the model is sent")
        self.resize(720, 560)
        self.view = view
        self.summary = QLabel(summary(view), self)
        self.summary.setObjectName("promptSummary")
        self.summary.setWordWrap(True)
        self.text = PromptText(self)
        self.text.setObjectName("promptText")
        self.text.setOpenLinks(False)
        self.text.setHtml(prompt_html(view))
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        copy = QPushButton("Copy prompt", self)
        copy.clicked.connect(lambda: QGuiApplication.clipboard().setText(view.prompt))
        buttons.addButton(copy, QDialogButtonBox.ButtonRole.ActionRole)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(self.summary)
        layout.addWidget(self.text, 1)
        layout.addWidget(buttons)
        self.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
