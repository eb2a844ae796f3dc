"""The window's Tab order, both ways: the top bar, the sidebar (New chat, the chat list), the
chat column (banner, find bar, the conversation and its messages' buttons, the queue notice,
the composer), then the side panel (presets, the settings), and round again.

Qt's own chain follows the order widgets were made in: the sidebar, made last, came after the
side panel, and the buttons of messages drawn later landed at the very end. So the window asks
this module at each Tab (MainWindow.focusNextPrevChild): the stops are Qt's tab stops as they
stand, sorted by part of the window, and within the conversation by where they are on screen
(its bubbles are made and reused as it scrolls).

Text boxes other than the message box move focus on Tab (`tab_moves_focus`): a Tab typed into
the system prompt or the JSON schema box was a tab character that also turned the preset to
Custom."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QPoint, Qt
from PySide6.QtWidgets import QApplication, QPlainTextEdit, QScrollArea, QTextEdit, QWidget

TAB = Qt.FocusPolicy.TabFocus


def tab_moves_focus(root: QWidget, keep: Sequence[QWidget] = ()) -> None:
    """Every multi-line text box under `root` but those in `keep` passes Tab on."""
    for edit in root.findChildren(QPlainTextEdit) + root.findChildren(QTextEdit):
        if edit not in keep:
            edit.setTabChangesFocus(True)


def is_stop(widget: QWidget, window: QWidget) -> bool:
    """Whether Tab may land on `widget`, as Qt decides it."""
    return (widget.focusPolicy() & TAB) == TAB and widget.isVisible() \
        and widget.isEnabled() and widget.focusProxy() is None and widget.window() is window


def chain(window: QWidget) -> list[QWidget]:
    """Qt's focus chain of `window`, in its order."""
    found: list[QWidget] = []
    widget = window.nextInFocusChain()
    while widget is not None and widget is not window and len(found) < 100_000:  # a ring
        found.append(widget)
        widget = widget.nextInFocusChain()
    return found


def stops(window: QWidget, parts: Sequence[tuple[QWidget, bool]]) -> list[QWidget]:
    """The tab stops of `window` in Tab's order. `parts`: (part of the window, whether its stops
    go by their place on screen), in order; stops in no part come last."""
    def key(item: tuple[int, QWidget]) -> tuple[int, int, int, int]:
        index, widget = item
        for rank, (part, by_place) in enumerate(parts):
            if part is widget or part.isAncestorOf(widget):
                if by_place:
                    at = widget.mapTo(part, QPoint(0, 0))
                    return rank, at.y(), at.x(), index
                return rank, 0, 0, index
        return len(parts), 0, 0, index

    found = [(i, w) for i, w in enumerate(chain(window)) if is_stop(w, window)]
    return [w for _i, w in sorted(found, key=key)]


def step(window: QWidget, parts: Sequence[tuple[QWidget, bool]], forward: bool) -> bool:
    """Move the focus to the next (or previous) stop; False when there is none."""
    order = stops(window, parts)
    if not order:
        return False
    current = QApplication.focusWidget()
    at = _place(current, order, window) if current is not None else None
    if at is None:
        target = order[0] if forward else order[-1]
    else:
        target = order[(at + (1 if forward else -1)) % len(order)]
    reason = Qt.FocusReason.TabFocusReason if forward else Qt.FocusReason.BacktabFocusReason
    target.setFocus(reason)
    parent = target.parentWidget()
    while parent is not None:  # a stop in a scrolled panel comes into view
        if isinstance(parent, QScrollArea):
            parent.ensureWidgetVisible(target)
        parent = parent.parentWidget()
    return True


def _place(current: QWidget, order: list[QWidget], window: QWidget) -> int | None:
    """Where `current` stands in `order`: itself, the stop it is inside of (a spin box's
    editor), or the stop before the next one in Qt's chain."""
    widget: QWidget | None = current
    while widget is not None and widget is not window:
        if widget in order:
            return order.index(widget)
        widget = widget.parentWidget()
    links = chain(window)
    if current not in links:
        return None
    start = links.index(current)
    for widget in links[start + 1:] + links[:start]:
        if widget in order:
            return (order.index(widget) - 1) % len(order)
    return None
