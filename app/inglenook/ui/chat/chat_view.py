"""The conversation pane: a virtual column of message bubbles that follows a streaming reply.

Costs follow what is in view. The view knows every message of the branch as a row of the
store's `Outline` (its role and sizes), but only the rows on screen and a margin around
them have a bubble: a 10,000-message chat holds a screenful of widgets and documents, opens at
its end in one frame, and gives everything back when it is left. Bubbles are made by the
controller's factory (`set_rows`), which reads the message from the store's page cache, and are
deleted once far out of view (bubble_pool.py keeps what the user changed in one).

Heights are estimated until a row's bubble has been laid out, then kept by message and width.
The view scrolls by an anchor — a row and where its top sits in the viewport — so a row above
the view that turns out taller than its estimate never moves what the user is reading; a view
at the end follows new text while the user is at the bottom (scrolling up pauses it).

Bubbles in view are made at once; the margin above and below is filled in short slices between
events, so scrolling finds them ready. The column is at most MAX_COLUMN_WIDTH wide, centred.

Keys (with the transcript or a message focused): PageUp/PageDown (also from a short draft in the
message box), Up/Down, Home/Ctrl+Home (the start), End/Ctrl+End (the latest). A "Jump to the
latest" button shows when scrolled up.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from PySide6.QtCore import QEvent, QSize, Qt, QTimer, Signal
from PySide6.QtGui import QFont, QFontMetricsF, QKeyEvent, QResizeEvent, QShowEvent
from PySide6.QtWidgets import QAbstractScrollArea, QApplication, QFrame, QScrollBar, QWidget

from inglenook.store.branch import MessageOutline, Outline
from inglenook.ui import theme
from inglenook.ui.chat.bubble import MessageBubble, format_stats
from inglenook.ui.chat.bubble_pool import BubblePool, Factory, Prepare
from inglenook.ui.chat.empty_state import EmptyState
from inglenook.ui.chat.jump_button import JumpButton
from inglenook.ui.chat.loose_messages import LooseMessages
from inglenook.ui.chat.rows import HeightCache, Metrics, RowGeometry

BOTTOM_SLACK_PX = 40
MAX_USER_WIDTH = 0.78  # user bubbles keep some room on the left, like a messenger
MAX_COLUMN_WIDTH = 820  # px: the messages' column in a wide window, centred
SIDE_MARGIN = 24
MARGIN_ABOVE = 2.0  # screens of bubbles kept ready above the view…
MARGIN_BELOW = 1.0  # …and below it
KEEP = 4.0  # screens beyond which bubbles are deleted
PREPARE = 4.0  # screens beyond the margin whose messages are read and rendered ahead
FILL_SLICE_S = 0.004  # GUI-thread time per turn of the event loop spent filling the margin
TARGET_TOP = 40  # px: where a message brought into view (a search hit) is placed


_STEPS = {  # keys that move the view by a line or a page
    Qt.Key.Key_Up: QScrollBar.SliderAction.SliderSingleStepSub,
    Qt.Key.Key_Down: QScrollBar.SliderAction.SliderSingleStepAdd,
    Qt.Key.Key_PageUp: QScrollBar.SliderAction.SliderPageStepSub,
    Qt.Key.Key_PageDown: QScrollBar.SliderAction.SliderPageStepAdd,
}

__all__ = ["ChatView", "MessageBubble", "format_stats"]


class ChatView(QAbstractScrollArea):
    """The scrolling column of bubbles.

    Signals:
        following_changed(bool): the view started or stopped following the end.
    """

    following_changed = Signal(bool)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("chatView")
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)  # Tab reaches it; keys scroll it
        self.setAccessibleName("Conversation")
        self.viewport().setObjectName("chatContent")
        self._rows = Outline()
        self._index: dict[int, int] | None = None  # key -> row, made when first needed
        self._geometry = RowGeometry()
        self._loose = LooseMessages(self)
        self._pool = BubblePool(self.viewport(), self._loose.make)
        self._live = self._pool.live  # row index -> its bubble
        self._width = 0  # the column's width the heights are for
        self._metrics: Metrics | None = None
        self._follow = True
        self._anchor = (0, 0)  # (row, its top relative to the viewport's top) when not following
        self._arranging = False
        self.empty = EmptyState(self.viewport())
        self.jump = JumpButton(self.viewport())
        self.jump.clicked.connect(self.scroll_to_bottom)
        self._fill_timer = QTimer(self, singleShot=True, interval=0)
        self._fill_timer.timeout.connect(self._fill)
        self._refit_timer = QTimer(self, singleShot=True, interval=0)
        self._refit_timer.timeout.connect(self._arrange)  # which refits the changed bubbles
        self._pool.layout_changed.connect(self._refit_timer.start)
        self.verticalScrollBar().valueChanged.connect(self._on_scrolled)
        theme.manager().changed.connect(self._theme_changed)

    # ---- rows -----------------------------------------------------------------------------

    def set_rows(self, rows: Outline, make: Factory, keep_position: bool = False,
                 prepare: Prepare | None = None) -> None:
        """Show these rows; `make(index, parent)` makes the bubble of row `index`, and
        `prepare(index)`, when given, does ahead of time what it can of that (reading and
        rendering the message) for rows soon to come into view. Bubbles of rows whose message
        is where it was stay; `keep_position` keeps the row at the top of the view where it is
        (another version of a message), else the view goes to the end."""
        old = self._rows
        self._rows = rows.copy()
        self._index = None
        self._pool.use(make, prepare, lambda key: self.index_of(key) is not None)
        for index in list(self._live):
            if index >= len(rows) or index >= len(old) or rows.ids[index] != old.ids[index]:
                self._pool.release(index, old.ids[index] if index < len(old) else None)
        self._reset_heights()
        if keep_position and not self._follow:
            row, offset = self._anchor
            self._anchor = (min(row, max(0, len(rows) - 1)), offset)
        else:
            self._set_follow(True)
        self._arrange()

    def append(self, row: MessageOutline) -> MessageBubble:
        """A new message at the end (sent, or a reply starting); the view follows it."""
        index = len(self._rows)
        self._rows.append((row.id, row.role, row.chars, row.reasoning, row.newlines,
                           row.calls_tools, row.attachments, row.attached, row.images))
        if self._index is not None:
            self._index[row.id] = index
        self._geometry.insert(index, self._estimate(index), False)
        self._set_follow(True)
        self._arrange()
        if index not in self._live:
            self._materialize(index)
        return self._live[index]

    def remove_last(self) -> None:
        if self._rows:
            index = len(self._rows) - 1
            self._pool.release(index, None)
            self._index = None
            self._rows.truncate(index)
            self._geometry.truncate(index)
            self._arrange()

    def clear(self) -> None:
        self._loose.clear()

    def add_bubble(self, role: str, text: str = "") -> MessageBubble:
        """A message shown without a store behind it (the view on its own: tests, benches)."""
        return self._loose.add(role, text)

    def makes_with(self, make: Factory) -> bool:
        return self._pool.make == make

    def changed(self, key: int, row: MessageOutline | None = None) -> None:
        """A message's content changed (a reply ended, its tool cards moved on): its height is
        measured again (or estimated again from `row` when it has no bubble)."""
        index = self.index_of(key)
        if index is None:
            return
        if row is not None:
            self._rows.set(index, row)
        self._geometry.cache.forget(key)
        bubble = self._live.get(index)
        if bubble is not None:
            self._pool.mark(bubble)
        else:
            self._geometry.set(index, self._estimate(index), False)
            self._arrange()

    def pin(self, key: int, pinned: bool = True) -> None:
        """Keep this message's bubble however far the user scrolls (a reply being written, a
        question being edited)."""
        if pinned:
            self._pool.pinned.add(key)
        else:
            self._pool.pinned.discard(key)
            self._schedule_fill()

    def set_writing(self, writing: bool) -> None:
        """A reply is being written at the end: the jump button says so."""
        self.jump.set_writing(writing)
        self._place_jump()

    # ---- what is shown --------------------------------------------------------------------

    @property
    def bubbles(self) -> list[MessageBubble]:
        """The bubbles that exist now (those in and near the view), in order."""
        return self._pool.ordered()

    @property
    def row_count(self) -> int:
        return len(self._rows)

    def keys(self) -> list[int]:
        """The message of each row, in order."""
        return list(self._rows.ids)

    def key_at(self, index: int) -> int:
        return self._rows.ids[index]

    def index_of(self, key: int) -> int | None:
        if self._index is None:
            self._index = {key: n for n, key in enumerate(self._rows.ids)}
        return self._index.get(key)

    def bubble_at(self, index: int) -> MessageBubble | None:
        """The bubble of row `index`, if it has one now."""
        return self._live.get(index)

    def bubble_of(self, key: int) -> MessageBubble | None:
        index = self.index_of(key)
        return None if index is None else self._live.get(index)

    def visible_rows(self) -> range:
        """The rows at least partly in view."""
        return self._geometry.rows_in(self.verticalScrollBar().value(),
                                      self.viewport().height())

    @property
    def following(self) -> bool:
        return self._follow

    # ---- moving ---------------------------------------------------------------------------

    def scroll_to_bottom(self) -> None:
        self._set_follow(True)
        self._arrange()

    def scroll_to_top(self) -> None:
        self.scroll_to_row(0, self._geometry.margin_top)

    def scroll_to_row(self, index: int, top: int = TARGET_TOP) -> None:
        """Put row `index` `top` pixels below the top of the view (as near as the ends allow)."""
        if not self._rows:
            return
        self._set_follow(False)
        self._anchor = (max(0, min(index, len(self._rows) - 1)), top)
        self._arrange()
        if self.verticalScrollBar().value() >= self.verticalScrollBar().maximum() \
                - BOTTOM_SLACK_PX and index == len(self._rows) - 1:
            self._set_follow(True)

    def scroll_to_message(self, message_id: int, words: Sequence[str] = ()) -> bool:
        """Bring a message into view (a search result) and stop following the end; the first
        of `words` found in it is selected, so the match stands out. False if not shown."""
        index = self.index_of(message_id)
        if index is None:
            return False
        self.scroll_to_row(index)
        self._set_follow(False)
        bubble = self._live.get(index)
        if bubble is not None and words:
            bubble.body.find_words(words)
        return True

    def page(self, direction: int) -> None:
        """A page up (-1) or down (1), as PageUp and PageDown do."""
        self.verticalScrollBar().triggerAction(_STEPS[Qt.Key.Key_PageUp if direction < 0
                                                      else Qt.Key.Key_PageDown])

    def keyPressEvent(self, event: QKeyEvent) -> None:
        key = event.key()
        if key == Qt.Key.Key_Home:
            self.scroll_to_top()
        elif key == Qt.Key.Key_End:
            self.scroll_to_bottom()
        elif key in _STEPS:
            self.verticalScrollBar().triggerAction(_STEPS[Qt.Key(key)])
        else:
            super().keyPressEvent(event)

    def sizeHint(self) -> QSize:
        return QSize(600, 400)

    # ---- events ---------------------------------------------------------------------------

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._arrange()

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        self._arrange()

    def _on_scrolled(self, value: int) -> None:
        if self._arranging:
            return
        bar = self.verticalScrollBar()
        self._set_follow(value >= bar.maximum() - BOTTOM_SLACK_PX)
        if self._rows:
            index = self._geometry.index_at(value)
            self._anchor = (index, self._geometry.top(index) - value)
        self._arrange()

    def set_zoom(self, percent: int) -> None:
        """The messages' text at `percent` of the application's font size. A rule of this
        view's style sheet: with the application's style sheet, Qt does not pass a font set
        on a widget down to its children."""
        font = QFont(QApplication.font())
        if font.pointSizeF() > 0:
            font.setPointSizeF(font.pointSizeF() * percent / 100)
            size = f"{font.pointSizeF():.2f}pt"
        else:
            font.setPixelSize(max(1, round(font.pixelSize() * percent / 100)))
            size = f"{font.pixelSize()}px"
        self.setStyleSheet("" if percent == 100 else f"#bubbleBody {{ font-size: {size}; }}")
        self.setFont(font)  # the estimates of heights use it

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.FontChange:  # every height measured is wrong now
            self._metrics = None
            self._geometry.cache = HeightCache()
            self._reset_heights()
            self._arrange()

    def _theme_changed(self, new: theme.Theme) -> None:
        for bubble in self._live.values():
            bubble.body.set_markdown_palette(new.markdown)
            if bubble.has_reasoning:
                bubble.reasoning.body.set_markdown_palette(new.markdown)

    def _set_follow(self, follow: bool) -> None:
        if follow != self._follow:
            self._follow = follow
            self.following_changed.emit(follow)

    # ---- geometry -------------------------------------------------------------------------

    def _column(self) -> tuple[int, int]:
        """(x, width) of the messages' column in the viewport."""
        width = self.viewport().width()
        column = max(60, min(width - 2 * SIDE_MARGIN, MAX_COLUMN_WIDTH))
        return max(0, (width - column) // 2), column

    def _bubble_width(self, role: str, column: int) -> int:
        return int(column * MAX_USER_WIDTH) if role == "user" else column

    def _estimate(self, index: int) -> int:
        width = self._bubble_width(self._rows.roles[index], self._width or self._column()[1])
        return self._geometry.guess(self._rows, index, width, self._font_metrics())

    def _font_metrics(self) -> Metrics:
        if self._metrics is None:
            fm = QFontMetricsF(self.font())
            self._metrics = Metrics(char_width=fm.averageCharWidth(),
                                    line_height=fm.lineSpacing() * 1.25)
        return self._metrics

    def _reset_heights(self) -> None:
        """Heights of every row at the column's width: kept, measured, or estimated."""
        self._width = self._column()[1]
        widths = {role: self._bubble_width(role, self._width) for role in set(self._rows.roles)}
        self._geometry.lay_out(self._rows, widths, self._font_metrics())
        self._pool.mark_all()

    def _value(self) -> int:
        """Where the view's top should be in the column: at the end, or by the anchor."""
        limit = max(0, self._geometry.total() - self.viewport().height())
        if self._follow:
            return limit
        row, offset = self._anchor
        if row >= len(self._rows):
            return limit
        return max(0, min(self._geometry.top(row) - offset, limit))

    def _arrange(self) -> None:
        """Make the bubbles in view, place every bubble, and size the scroll bar."""
        if self._arranging or not self.isVisible():
            return
        self._arranging = True
        try:
            self._arrange_now()
        finally:
            self._arranging = False
        self._schedule_fill()

    def _arrange_now(self) -> None:
        viewport = self.viewport()
        height = viewport.height()
        x, column = self._column()
        if column != self._width:
            self._reset_heights()
        if self._pool.has_dirty:
            self._refit()
        bar = self.verticalScrollBar()
        if not self._rows:
            self.empty.place(bar, self.viewport().width(), height)
            self.jump.hide()
            return
        self.empty.hide()
        geometry = self._geometry
        for _ in range(8):  # estimates corrected as bubbles are made can bring more in view
            value = self._value()
            first, last = geometry.index_at(value), geometry.index_at(value + height)
            missing = [i for i in range(first, last + 1) if i not in self._live]
            if not missing:
                break
            for index in missing:
                self._materialize(index)
        value = self._value()
        bar.setRange(0, max(0, geometry.total() - height))
        bar.setPageStep(max(1, height - 40))
        bar.setSingleStep(40)
        bar.setValue(value)
        if not self._follow:  # the anchor, as the ends allow it
            index = geometry.index_at(value)
            self._anchor = (index, geometry.top(index) - value)
        for index, bubble in self._live.items():
            role = self._rows.roles[index]
            width = self._bubble_width(role, column)
            left = x + column - width if role == "user" else x
            bubble.setGeometry(left, geometry.top(index) - value, width,
                               geometry.heights[index])
        self._place_jump()

    def _place_jump(self) -> None:
        bar = self.verticalScrollBar()
        show = bool(self._rows) and not self._follow and \
            bar.maximum() - bar.value() > self.viewport().height() // 2
        self.jump.place(show, *self._column(), self.viewport().height())

    # ---- bubbles --------------------------------------------------------------------------

    def _materialize(self, index: int) -> None:
        self._width = self._width or self._column()[1]
        key = self._rows.ids[index]
        width = self._bubble_width(self._rows.roles[index], self._width)
        height = self._pool.create(index, key, width, self._geometry.heights[index])
        self._measured(index, width, height)

    def _measured(self, index: int, width: int, height: int) -> None:
        self._geometry.measure(index, self._rows.ids[index], width, height)

    def _refit(self) -> None:
        def width_of(index: int) -> int:
            return self._bubble_width(self._rows.roles[index], self._width)

        for index, height in self._pool.refit(width_of):
            self._measured(index, width_of(index), height)

    def _schedule_fill(self) -> None:
        if not self._fill_timer.isActive():
            self._fill_timer.start()

    def _fill(self) -> None:
        """Make the bubbles of the margin and delete those far away, a slice at a time; with
        the margin made, read and render the messages beyond it, so the bubbles made next
        cost only their widgets."""
        if not self._rows or not self.isVisible():
            return
        deadline = time.perf_counter() + FILL_SLICE_S
        margin = self._geometry.margin(self.verticalScrollBar().value(), self.viewport().height(),
                                       MARGIN_ABOVE, MARGIN_BELOW, KEEP, PREPARE)
        first, last = margin.keep
        for index in [i for i in self._live if not first <= i <= last
                      and self._rows.ids[i] not in self._pool.pinned]:
            self._pool.release(index, self._rows.ids[index])
        made = False
        for index in margin.make:
            if index in self._live:
                continue
            if made and time.perf_counter() > deadline:
                self._fill_timer.start()
                break
            self._materialize(index)
            made = True
        else:
            ids = self._rows.ids
            if not self._pool.prepare_ahead(((i, ids[i]) for i in margin.ahead),
                                            lambda: time.perf_counter() > deadline):
                self._fill_timer.start()
        if made:
            self._arranging = True
            try:
                self._arrange_now()
            finally:
                self._arranging = False
