"""One message of the conversation: its author, its Markdown and a footer of figures and actions.

Memory: a chat shows dozens of messages and every widget costs 15-20 KB under the app's style
sheet, so a bubble creates only what it shows. At rest that is its frame, the Markdown view, the
author (replies) and the actions always on view (Edit or Details/Regenerate, Copy, Delete). The
others — Stop, ‹ n/m ›, the figures, the notice, the reasoning above the answer — are made the
first time they are needed or asked for; the attributes (`stop_button`, `notice`, …) create them
on access, in the state the bubble is in, so callers never see the difference.

The figures under a reply are one short line (tokens · tok/s); the tooltip and Details have
the rest.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar, cast

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QGuiApplication, QResizeEvent
from PySide6.QtWidgets import (
    QBoxLayout,
    QFrame,
    QHBoxLayout,
    QLabel,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from inglenook.core.replies import Finish, Stats
from inglenook.ui.chat.markdown_view import COPIED_MS, MarkdownView
from inglenook.ui.chat.reasoning_block import ReasoningBlock
from inglenook.ui.widgets.elided_label import ElidedLabel
from inglenook.ui.widgets.style import restyle

W = TypeVar("W", bound=QWidget)
# A reply's notice before its first word: reading the prompt (what every model does first),
# or waiting for another chat's reply to finish.
READING = "Reading the prompt…"
WAITING = "Waiting for its turn…"

# The footer, left to right; "stretch" is the spacer between the figures and the actions.
FOOTER = ("previous", "siblings", "next", "stats", "stretch",
          "stop", "continue", "edit", "details", "regenerate", "speak", "copy", "delete")
BUTTONS = {  # name: (label, tooltip)
    "previous": ("‹", "Previous version"),
    "next": ("›", "Next version"),
    "stop": ("Stop", "Stop this reply (Esc)"),
    "continue": ("Continue", "Go on from where this reply stopped (a new version)"),
    "edit": ("Edit", "Ask this again differently (a new branch)"),
    "details": ("Details", "Model, settings, seed and timings"),
    "regenerate": ("Regenerate", "Write this reply again"),
    "speak": ("Read aloud", "Read this reply aloud (Esc stops)"),
    "copy": ("Copy", "Copy this message as Markdown"),
    "delete": ("Delete", "Delete this message and everything after it"),
}
# Shorter labels where a narrow bubble's footer has no room for the full ones (the tooltip and
# the accessible name keep the full one).
SHORT = {"regenerate": "Retry", "details": "Info", "continue": "Go on", "speak": "Read"}
# The most a reply's footer shows at rest (the last reply, stopped early, with versions);
# the labels are chosen for it in every reply, so that they agree.
WIDEST_FOOTER = ("previous", "next", "continue", "edit", "details", "regenerate", "speak",
                 "copy", "delete")
AT_REST = {"user": ("edit", "copy", "delete"),
           "assistant": ("edit", "details", "regenerate", "speak", "copy", "delete")}
EDIT_REPLY = "Rewrite this reply (a new version; what follows builds on it)"
STOP_READING = "Stop reading"


def compact_stats(stats: Stats) -> tuple[str, ...]:
    """The figures shown under a reply, longest form first: tokens and speed, and a warning
    when messages were left out of the context; then shorter forms for a narrow bubble."""
    tokens = f"{stats.generated_tokens:,} tokens"
    rate = stats.decode_tok_s
    speed = "" if rate <= 0 else f"{rate:.1f} tok/s" if rate < 100 else f"{rate:,.0f} tok/s"
    both = " · ".join(p for p in (tokens, speed) if p)
    forms = [both]
    if stats.dropped_messages:
        forms.insert(0, f"{both} · {stats.dropped_messages} earlier messages left out")
    if speed:
        forms.append(speed)
    return tuple(forms)


def format_stats(stats: Stats) -> str:
    """All the figures, on one line (the tooltip of the compact line)."""
    parts = [f"{stats.generated_tokens} tokens"]
    if stats.decode_tok_s > 0:
        parts.append(f"{stats.decode_tok_s:.1f} tok/s")
    parts.append(f"TTFT {stats.ttft_s * 1000:.0f} ms")
    if stats.cached_tokens:
        parts.append(f"{stats.cached_tokens} of {stats.prompt_tokens} prompt tokens cached")
    if stats.dropped_messages:
        parts.append(f"{stats.dropped_messages} oldest messages left out to fit the context")
    return "  ·  ".join(parts)


@dataclass(frozen=True)
class BubbleState:
    """What the user changed in a bubble, kept while it is out of view (chat_view.py deletes
    far bubbles and makes them again)."""

    shown_all: bool = False  # "Show all" of a long message
    reasoning_open: bool = False  # the folded reasoning, opened

    def differs(self) -> bool:
        return self.shown_all or self.reasoning_open


class _Lazy(Generic[W]):
    """A bubble widget made on first access."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, bubble: MessageBubble, owner: type | None = None) -> W:
        return cast(W, bubble._widget(self.name))


class MessageBubble(QFrame):
    """One message. Assistant bubbles have a footer with figures and actions.

    Signals:
        copy_requested(): Copy was clicked (the text is copied here; the signal is for tests).
        regenerate_requested(): Regenerate was clicked.
        stop_requested(): Stop was clicked while this reply streams.
        edit_requested(): Edit was clicked.
        continue_requested(): Continue was clicked (a reply cut or stopped).
        details_requested(): Details was clicked (how a reply was made).
        delete_requested(): Delete was clicked (this message and all after it).
        sibling_requested(int): ‹ or › was clicked: -1 or +1.
        speak_requested(): Read aloud (or Stop reading) was clicked (replies).
    """

    copy_requested = Signal()
    regenerate_requested = Signal()
    stop_requested = Signal()
    edit_requested = Signal()
    continue_requested = Signal()
    details_requested = Signal()
    delete_requested = Signal()
    sibling_requested = Signal(int)
    speak_requested = Signal()

    copy_button: _Lazy[QToolButton] = _Lazy("copy")
    regenerate_button: _Lazy[QToolButton] = _Lazy("regenerate")
    stop_button: _Lazy[QToolButton] = _Lazy("stop")
    edit_button: _Lazy[QToolButton] = _Lazy("edit")
    continue_button: _Lazy[QToolButton] = _Lazy("continue")
    details_button: _Lazy[QToolButton] = _Lazy("details")
    delete_button: _Lazy[QToolButton] = _Lazy("delete")
    speak_button: _Lazy[QToolButton] = _Lazy("speak")
    previous_button: _Lazy[QToolButton] = _Lazy("previous")
    next_button: _Lazy[QToolButton] = _Lazy("next")
    sibling_label: _Lazy[QLabel] = _Lazy("siblings")
    stats_label: _Lazy[ElidedLabel] = _Lazy("stats")
    notice: _Lazy[QLabel] = _Lazy("notice")
    reasoning: _Lazy[ReasoningBlock] = _Lazy("reasoning")

    def __init__(self, role: str, text: str = "", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.role = role
        self.text = text
        self.message_id: int | None = None
        self._widgets: dict[str, QWidget] = {}
        self._streaming = False
        self._continuable = False
        self._speaking = False  # Read aloud shows Stop reading
        self._siblings = (1, 1)
        self._notice_kind = ""
        self.setObjectName("userBubble" if role == "user" else "assistantBubble")
        # Not Maximum: the hint is computed at a width the bubble may not get, and would cap it.
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Preferred)
        self._column = QVBoxLayout(self)
        self._column.setContentsMargins(14, 10, 14, 8)
        self._column.setSpacing(4)
        if role == "assistant":
            self.author = QLabel("Assistant", self)
            self.author.setObjectName("bubbleAuthor")
            self.author.setTextFormat(Qt.TextFormat.PlainText)  # model names are outside text
            self._column.addWidget(self.author)
        self.body = MarkdownView(self)
        self.body.setObjectName("bubbleBody")
        self._column.addWidget(self.body)
        self._footer = QHBoxLayout()
        self._footer.setContentsMargins(0, 2, 0, 0)
        self._footer.setSpacing(2)  # the buttons pad themselves; room for the figures
        self._footer.addStretch(0)
        self._column.addLayout(self._footer)
        for name in AT_REST.get(role, ()):
            self._widget(name)
        self.set_text(text)

    # --- widgets made on demand ------------------------------------------------------------

    def _widget(self, name: str) -> QWidget:
        widget = self._widgets.get(name)
        if widget is None:
            widget = self._widgets[name] = self._make(name)
            self._sync(name)
        return widget

    def _make(self, name: str) -> QWidget:
        if name == "reasoning":
            block = ReasoningBlock(self)
            self._column.insertWidget(self._column.indexOf(self.body), block)
            return block
        if name == "notice":
            notice = QLabel(self)
            notice.setObjectName("bubbleNotice")
            notice.setTextFormat(Qt.TextFormat.PlainText)  # errors quote outside text
            notice.setWordWrap(True)
            notice.hide()
            self._column.insertWidget(self._column.indexOf(self.body) + 1, notice)
            return notice
        widget: QWidget
        if name in BUTTONS:
            label, tip = BUTTONS[name]
            widget = button = QToolButton(self)
            button.setText(label)
            button.setToolTip(EDIT_REPLY if name == "edit" and self.role == "assistant" else tip)
            button.setAccessibleName(tip if name in ("previous", "next") else label)
            button.setObjectName(f"bubble{name.capitalize()}Button")
            button.setCursor(Qt.CursorShape.PointingHandCursor)
            button.setAutoRaise(True)
            button.clicked.connect(self._action(name))
        elif name == "siblings":
            widget = QLabel(self)
            widget.setObjectName("bubbleSiblings")
        else:  # stats: cut short rather than widen the bubble or wrap in a narrow column
            widget = stats = ElidedLabel(self)
            stats.setObjectName("bubbleStats")
            stats.hide()
        slot = FOOTER.index(name)
        index = sum(1 for other in FOOTER[:slot] if other == "stretch" or other in self._widgets)
        cast(QBoxLayout, self._footer).insertWidget(index, widget, 1 if name == "stats" else 0)
        return widget

    def _action(self, name: str) -> Callable[[], None]:
        return {
            "previous": lambda: self.sibling_requested.emit(-1),
            "next": lambda: self.sibling_requested.emit(1),
            "stop": self.stop_requested.emit,
            "edit": self.edit_requested.emit,
            "continue": self.continue_requested.emit,
            "details": self.details_requested.emit,
            "regenerate": self.regenerate_requested.emit,
            "copy": self._copy,
            "speak": self.speak_requested.emit,
            "delete": self.delete_requested.emit,
        }[name]

    def _sync(self, name: str) -> None:
        """Bring one widget, if it exists, in line with the bubble's state."""
        widget = self._widgets.get(name)
        if widget is None:
            return
        index, count = self._siblings
        if name in ("previous", "siblings", "next"):
            widget.setVisible(count > 1)
            widget.setEnabled(name == "siblings" or (index > 1 if name == "previous"
                                                      else index < count))
            if name == "siblings":
                cast(QLabel, widget).setText(f"{index}/{count}")
        elif name == "stop":
            widget.setVisible(self._streaming)
        elif name == "continue":
            widget.setVisible(self._continuable and not self._streaming)
        elif name in ("copy", "delete", "regenerate", "edit", "speak"):
            # Put away while the reply streams (Stop and Details stay): seven buttons did not
            # fit a 700-wide window's bubble, and none of these can act on it yet.
            widget.setEnabled(not self._streaming)
            widget.setVisible(not self._streaming and (
                self.role == "assistant" or name not in ("regenerate", "speak")))
        elif name == "details":
            widget.setVisible(self.role == "assistant")

    def heightForWidth(self, width: int) -> int:
        # With its Markdown hidden (edited in place) nothing in the layout has a height for
        # a width, and Qt answers -1: the view would give the bubble no height at all.
        height = super().heightForWidth(width)
        return height if height >= 0 else self.sizeHint().height()

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._fit_footer()

    def _fit_footer(self) -> None:
        """Short labels when the full ones of the widest reply footer would not fit beside
        each other: measured on that footer, not on this bubble's buttons, so that every reply
        of a chat says the same (the last one's Regenerate once made it say Retry and Info
        where the others said Details)."""
        buttons = {n: w for n, w in self._widgets.items() if n in SHORT}
        if self.role != "assistant" or not buttons:
            return
        probe = cast(QToolButton, self._widgets["copy"])
        metrics = probe.fontMetrics()
        padding = probe.sizeHint().width() - metrics.horizontalAdvance(probe.text()) + 2
        room = self.width() - 28 - 80  # the frame's margins; some room for the figures
        needed = sum(metrics.horizontalAdvance(self._label(name)) + padding
                     for name in WIDEST_FOOTER) + metrics.horizontalAdvance("2/2") + 2
        short = needed > room
        for name, button in buttons.items():
            cast(QToolButton, button).setText(self._label(name, short))

    def _label(self, name: str, short: bool = False) -> str:
        if name == "speak" and self._speaking:
            return "Stop" if short else STOP_READING
        return SHORT[name] if short else BUTTONS[name][0]

    # --- state -----------------------------------------------------------------------------

    @property
    def has_reasoning(self) -> bool:
        return "reasoning" in self._widgets

    def state(self) -> BubbleState:
        block = self._widgets.get("reasoning")
        reasoning_open = isinstance(block, ReasoningBlock) and block.is_open and not block.live
        return BubbleState(self.body.expanded, reasoning_open)

    def restore_state(self, state: BubbleState) -> None:
        if state.shown_all:
            self.body.show_all()
        if state.reasoning_open and self.has_reasoning:
            self.reasoning.set_open(True)

    def set_siblings(self, index: int, count: int) -> None:
        """Show ‹ index/count › when this message has other versions."""
        self._siblings = (index, count)
        for name in ("previous", "siblings", "next"):
            if count > 1:
                self._widget(name)
            self._sync(name)
        self._fit_footer()

    def set_text(self, text: str) -> None:
        self.text = text
        self.body.set_markdown(text)
        self.body.setVisible(bool(text))
        if text and self._notice_kind == "waiting":
            self.set_notice("")

    def set_reasoning(self, text: str, live: bool = False,
                      seconds: float | None = None) -> None:
        """What the model thought before its answer: open and growing while `live`, else
        folded to "Thought for N s". Never part of `text` (what Copy copies)."""
        if not text and "reasoning" not in self._widgets:
            return
        block = self.reasoning
        block.setVisible(bool(text))
        if live:
            block.show_live(text)
        else:
            block.show_done(text, seconds)
        if text and self._notice_kind == "waiting":
            self.set_notice("")

    def append_text(self, delta: str) -> None:
        self.set_text(self.text + delta)

    def set_streaming(self, streaming: bool) -> None:
        if streaming and not self.text:
            self.set_notice(READING, "waiting")
        self._streaming = streaming
        self.body.live = streaming
        if streaming:
            self._widget("stop")
        else:
            self.body.flush()  # the last throttled update of a long reply
            if "reasoning" in self._widgets:
                self.reasoning.body.flush()
        for name in ("stop", "continue", "copy", "delete", "regenerate", "edit", "speak"):
            self._sync(name)
        self._fit_footer()

    def set_continuable(self, continuable: bool) -> None:
        """Offer Continue (a reply cut or stopped, the last of its chat)."""
        self._continuable = continuable
        if continuable:
            self._widget("continue")
        self._sync("continue")
        self._fit_footer()

    def set_stats(self, stats: Stats) -> None:
        self.stats_label.set_forms(*compact_stats(stats))
        self.stats_label.setToolTip(format_stats(stats) + "\n(Details has every figure.)")
        self.stats_label.show()

    def set_notice(self, text: str, kind: str = "info") -> None:
        self._notice_kind = kind if text else ""
        if not text and "notice" not in self._widgets:
            return
        notice = self.notice
        notice.setText(text)
        restyle(notice, kind=kind)
        notice.setVisible(bool(text))

    @property
    def waiting(self) -> bool:
        """The notice says the reply is on its way (READING, WAITING)."""
        return self._notice_kind == "waiting"

    def set_finish(self, finish: Finish) -> None:
        if self._notice_kind == "waiting":
            self.set_notice("")
        if finish.reason == "cancelled":
            self.set_notice(finish.message or "Stopped.", "info")
        elif finish.reason == "length":
            self.set_notice("The reply reached its length limit.", "info")
        elif finish.reason == "error":
            self.set_notice(finish.message, "error")

    def set_speaking(self, speaking: bool) -> None:
        """Read aloud becomes Stop reading while this reply is being read."""
        self._speaking = speaking
        button = self.speak_button
        button.setText(self._label("speak"))
        button.setAccessibleName(button.text())
        self._fit_footer()

    def _copy(self) -> None:
        QGuiApplication.clipboard().setText(self.text)
        button = self.copy_button
        button.setText("Copied")
        QTimer.singleShot(COPIED_MS, button, lambda: button.setText(BUTTONS["copy"][0]))
        self.copy_requested.emit()
