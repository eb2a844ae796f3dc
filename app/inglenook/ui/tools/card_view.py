"""Tool calls in a reply's bubble, one card each: which tool, with what arguments, and what
became of it. A call awaiting approval has the only buttons that can run it: Run once, Always
allow (this tool, in this chat) and Deny.

Arguments longer than a few lines are shown shortened, with "Show all arguments" under them:
the whole of them in a scrollable, selectable view, since a user must be able to read all of
what they approve (a path, a command, a message to send), not the first 2,000 characters.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import cast

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QBoxLayout,
    QFrame,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from inglenook.tools.cards import ToolCard
from inglenook.ui.plain import plain_tip
from inglenook.ui.widgets.style import restyle

ARGUMENT_LINES = 8  # more behind "Show all arguments"
ARGUMENT_CHARS = 2000
FULL_ARGUMENTS_HEIGHT = 320  # pixels of the whole arguments' view; it scrolls past that
RESULT_CHARS = 400
OUTCOME = {"ok": "Ran", "error": "Failed", "denied": "Denied", "timeout": "Timed out",
           "unavailable": "Not available"}
BUTTONS = (  # decision, label, object name, tooltip
    ("once", "Run once", "toolRunOnceButton", "Run this call now; ask again next time"),
    ("always", "Always allow", "toolAlwaysButton",
     "Run this call, and later calls of this tool in this chat, without asking"),
    ("deny", "Deny", "toolDenyButton", "Do not run it; the model is told you said no"),
)


def arguments_text(card: ToolCard) -> str:
    return json.dumps(dict(card.call.arguments), ensure_ascii=False, indent=2)


def status_text(card: ToolCard) -> str:
    if card.state == "awaiting":
        return "Run this tool? It runs only if you allow it."
    if card.state == "running":
        return "Running…"
    if card.result is None:
        return "Not run."
    outcome = OUTCOME.get(card.result.status, card.result.status)
    return outcome if card.result.ok or card.result.status == "denied" else \
        f"{outcome}: {card.result.text}"


def _shortened(text: str, lines: int, chars: int) -> str:
    kept = "\n".join(text.splitlines()[:lines])[:chars]
    return kept if kept == text else kept.rstrip() + " …"


class ToolCardView(QFrame):
    """Signals:
        decided(str): a button was pressed: "once", "always" or "deny".
    """

    decided = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("toolCard")
        self.title = QLabel(self)
        self.title.setObjectName("toolCardTitle")
        self.title.setTextFormat(Qt.TextFormat.PlainText)  # names come from the model
        self.arguments = QLabel(self)
        self.arguments.setObjectName("toolCardArguments")
        self.arguments.setTextFormat(Qt.TextFormat.PlainText)
        self.arguments.setWordWrap(True)
        self.arguments.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        # All of the arguments, when they do not fit the label: made when first asked for.
        self.full_arguments: QPlainTextEdit | None = None
        self.show_all = QPushButton(self)
        self.show_all.setObjectName("toolShowAllArguments")
        self.show_all.setFlat(True)
        self.show_all.setCheckable(True)
        self.show_all.setAccessibleName("Show all arguments")
        self.show_all.toggled.connect(self._show_all_arguments)
        self._arguments = ""
        self._label_when_closed = ""
        self.status = QLabel(self)
        self.status.setObjectName("toolCardStatus")
        self.status.setTextFormat(Qt.TextFormat.PlainText)
        self.status.setWordWrap(True)
        self.result = QLabel(self)
        self.result.setObjectName("toolCardResult")
        self.result.setTextFormat(Qt.TextFormat.PlainText)
        self.result.setWordWrap(True)
        self.result.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.buttons: dict[str, QPushButton] = {}
        row = QHBoxLayout()
        row.setContentsMargins(0, 2, 0, 0)
        for decision, label, name, tip in BUTTONS:
            button = QPushButton(label, self)
            button.setObjectName(name)
            button.setToolTip(tip)
            button.setAccessibleName(label)
            button.clicked.connect(lambda _=False, d=decision: self.decided.emit(d))
            row.addWidget(button)
            self.buttons[decision] = button
        row.addStretch(1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(10, 8, 10, 8)
        layout.setSpacing(4)
        for widget in (self.title, self.arguments, self.show_all, self.status, self.result):
            # The button as wide as its text, under the arguments it opens.
            layout.addWidget(widget, 0, Qt.AlignmentFlag.AlignLeft if widget is self.show_all
                             else Qt.AlignmentFlag(0))
        self._layout = layout
        layout.addLayout(row)

    def show_card(self, card: ToolCard) -> None:
        where = f" · {card.server}" if card.server and card.server != card.call.name else ""
        self.title.setText(f"Tool call: {card.call.name}{where}")
        args = arguments_text(card)
        short = _shortened(args, ARGUMENT_LINES, ARGUMENT_CHARS)
        self.arguments.setText(short)
        self.arguments.setToolTip(plain_tip(args[:4000]))
        self._set_arguments(args, shortened=short != args)
        self.status.setText(status_text(card))
        restyle(self, state=card.state)
        result = card.result.text if card.result is not None and card.result.ok else ""
        self.result.setText(_shortened(result, ARGUMENT_LINES, RESULT_CHARS))
        self.result.setToolTip(plain_tip(result[:4000]))
        self.result.setVisible(bool(result))
        for button in self.buttons.values():
            button.setVisible(card.state == "awaiting")

    def _set_arguments(self, args: str, shortened: bool) -> None:
        changed = args != self._arguments
        self._arguments = args
        self._label_when_closed = (f"Show all arguments ({args.count(chr(10)) + 1:,} lines, "
                                   f"{len(args):,} characters)")
        if changed and self.show_all.isChecked():
            self.show_all.setChecked(False)  # another call's arguments: shortened again
        if changed and self.full_arguments is not None:
            self.full_arguments.setPlainText(args)
        self.show_all.setVisible(shortened)
        self._show_all_arguments(self.show_all.isChecked())

    def _show_all_arguments(self, shown: bool) -> None:
        if shown and self.full_arguments is None:
            view = QPlainTextEdit(self)
            view.setObjectName("toolCardAllArguments")
            view.setAccessibleName("All arguments of the tool call")
            view.setReadOnly(True)
            view.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
            view.setMaximumHeight(FULL_ARGUMENTS_HEIGHT)
            view.setPlainText(self._arguments)
            self._layout.insertWidget(self._layout.indexOf(self.show_all), view)
            self.full_arguments = view
        if self.full_arguments is not None:
            view = self.full_arguments
            lines = self._arguments.count("\n") + 2
            view.setMinimumHeight(min(FULL_ARGUMENTS_HEIGHT,
                                      lines * view.fontMetrics().lineSpacing() + 12))
            view.setVisible(shown)
        self.arguments.setVisible(not shown and self._arguments != "{}")
        self.show_all.setText("Show fewer arguments" if shown else self._label_when_closed)


class ToolCardList(QWidget):
    """The cards of one reply, under its text.

    Signals:
        decided(int, str): the card at this index was answered (see ToolCardView.decided).
    """

    decided = Signal(int, str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("toolCards")
        self.views: list[ToolCardView] = []
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(0, 4, 0, 4)
        self._layout.setSpacing(6)

    def set_cards(self, cards: Sequence[ToolCard]) -> None:
        while len(self.views) > len(cards):
            self.views.pop().deleteLater()
        while len(self.views) < len(cards):
            view = ToolCardView(self)
            index = len(self.views)
            view.decided.connect(lambda d, i=index: self.decided.emit(i, d))
            self._layout.addWidget(view)
            self.views.append(view)
        for view, card in zip(self.views, cards, strict=True):
            view.show_card(card)
        self.setVisible(bool(cards))


def card_list(bubble: QWidget, decided: Callable[[int, str], None]) -> ToolCardList:
    """The bubble's cards, made under its text the first time (through its layout, so the
    bubble needs no knowledge of tools); `decided` gets the user's answers."""
    found = bubble.findChild(ToolCardList)
    if found is not None:
        return found
    cards = ToolCardList(bubble)
    cards.decided.connect(decided)
    layout = cast(QBoxLayout, bubble.layout())
    body = bubble.findChild(QWidget, "bubbleBody")
    layout.insertWidget(layout.indexOf(body) + 1 if body is not None else 0, cards)
    return cards
