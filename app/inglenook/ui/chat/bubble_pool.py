"""The bubbles of the transcript that exist: those of the rows in and near the view (chat_view.py
decides which). Made through the controller's factory and laid out at their width, deleted
when far away, with what the user changed in one (Show all, an opened reasoning) kept by
message and given back when it is made again. Pinned messages keep their bubble wherever the
view is: a reply being written, a question being edited.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from PySide6.QtCore import QEvent, QObject, QSize, Signal
from PySide6.QtWidgets import QApplication, QWidget

from inglenook.ui.chat.bubble import BubbleState, MessageBubble

Factory = Callable[[int, QWidget], MessageBubble]
Prepare = Callable[[int], None]


class BubblePool(QObject):
    """Signals:
        layout_changed(): a bubble's own layout changed (text streamed in, a card, Show all):
            `refit` gives the new heights.
    """

    layout_changed = Signal()

    def __init__(self, viewport: QWidget, make: Factory) -> None:
        super().__init__(viewport)
        self._viewport = viewport
        self.live: dict[int, MessageBubble] = {}  # row index -> its bubble
        self.pinned: set[int] = set()  # keys (message ids)
        self.make: Factory = make
        self.prepare: Prepare | None = None
        self._prepared: set[int] = set()  # keys whose messages were rendered ahead
        self._states: dict[int, BubbleState] = {}  # what the user changed, by key
        self._dirty: set[MessageBubble] = set()

    def use(self, make: Factory, prepare: Prepare | None, kept: Callable[[int], bool]) -> None:
        """Bubbles from now on come from `make`; what is kept of keys not `kept` goes."""
        self.make, self.prepare = make, prepare
        self._prepared.clear()
        self._states = {key: state for key, state in self._states.items() if kept(key)}

    def __len__(self) -> int:
        return len(self.live)

    def ordered(self) -> list[MessageBubble]:
        return [self.live[index] for index in sorted(self.live)]

    # ---- making and deleting ---------------------------------------------------------------

    def create(self, index: int, key: int, width: int, guess: int) -> int:
        """Make row `index`'s bubble, lay it out at `width`; returns its height."""
        bubble = self.make(index, self._viewport)
        state = self._states.pop(key, None)
        if state is not None:
            bubble.restore_state(state)
        bubble.installEventFilter(self)
        self.live[index] = bubble
        bubble.setGeometry(0, -100_000, width, guess)  # out of sight until placed
        bubble.show()
        return self.fit(bubble, width)

    def fit(self, bubble: MessageBubble, width: int) -> int:
        """Lay the bubble out at `width`; its height. The body lays its documents out when it
        is resized, so this takes two rounds when the height was a guess."""
        height = bubble.heightForWidth(width)
        for _ in range(3):
            if bubble.size() != QSize(width, height):
                bubble.resize(width, height)
            layout = bubble.layout()
            if layout is not None:
                layout.activate()
            exact = bubble.heightForWidth(width)
            if exact == height:
                break
            height = exact
        self._dirty.discard(bubble)
        return height

    def release(self, index: int, key: int | None) -> None:
        """Delete row `index`'s bubble (`key`: its message, whose state is kept; None when the
        row itself is gone)."""
        bubble = self.live.pop(index, None)
        if bubble is None:
            return
        if key is not None:
            state = bubble.state()
            if state.differs():
                self._states[key] = state
        self._dirty.discard(bubble)
        focus = QApplication.focusWidget()
        view = self._viewport.parentWidget()
        if focus is not None and view is not None and bubble.isAncestorOf(focus):
            view.setFocus()  # keys keep scrolling the transcript
        bubble.removeEventFilter(self)
        bubble.hide()
        bubble.deleteLater()

    def mark(self, bubble: MessageBubble) -> None:
        """Its height is to be measured again."""
        self._dirty.add(bubble)
        self.layout_changed.emit()

    def refit(self, width_of: Callable[[int], int]) -> list[tuple[int, int]]:
        """(row, height) of every bubble whose layout changed, laid out again."""
        dirty, self._dirty = self._dirty, set()
        return [(index, self.fit(bubble, width_of(index)))
                for index, bubble in list(self.live.items()) if bubble in dirty]

    def mark_all(self) -> None:
        self._dirty.update(self.live.values())

    @property
    def has_dirty(self) -> bool:
        return bool(self._dirty)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.LayoutRequest and isinstance(watched, MessageBubble):
            self.mark(watched)  # after its own layout has handled the event
        return False

    # ---- ahead of time ---------------------------------------------------------------------

    def prepare_ahead(self, rows: Iterable[tuple[int, int]], out_of_time: Callable[[], bool]
                      ) -> bool:
        """Read and render ahead the messages of `rows` (index, key) that have no bubble,
        until `out_of_time()`; True when all are done."""
        if self.prepare is None:
            return True
        for index, key in rows:
            if key in self._prepared or index in self.live:
                continue
            if out_of_time():
                return False
            self._prepared.add(key)
            self.prepare(index)
        return True
