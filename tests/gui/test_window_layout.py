"""The window's columns at common sizes (issue 16's rough edges): the side panel's content is
never wider than its viewport (number boxes, slider handles and labels stay in view), the queue
notice does not widen the chat column, and at 700×600 with the panel open the bubbles are not
cut under it."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QPoint
from PySide6.QtWidgets import QAbstractSpinBox, QScrollArea, QSlider, QWidget
from pytestqt.qtbot import QtBot

from inglenook.ui.main_window import MainWindow
from inglenook.ui.window.layout import CHAT_MIN, SIDE_PANEL_MIN
from tests.gui.conftest import chat


def panel_scroll(win: MainWindow) -> QScrollArea:
    scroll = win.panel.findChild(QScrollArea, "samplingPanelScroll")
    assert scroll is not None
    return scroll


def cut_in_panel(win: MainWindow) -> list[str]:
    """Controls of the side panel that reach past the right edge of what it shows."""
    scroll = panel_scroll(win)
    right = scroll.viewport().width()
    cut = []
    if scroll.widget().width() > right:
        cut.append(f"content {scroll.widget().width()} > viewport {right}")
    for widget in scroll.widget().findChildren(QWidget):
        if not widget.isVisibleTo(scroll.widget()) or not isinstance(
                widget, QAbstractSpinBox | QSlider):
            continue
        edge = widget.mapTo(scroll.viewport(), QPoint(widget.width(), 0)).x()
        if edge > right:
            cut.append(f"{widget.objectName()} ends at {edge} > {right}")
    edge = win.preset_bar.delete_button.geometry().right()
    if edge > win.preset_bar.width():
        cut.append(f"the preset bar's Delete ends at {edge} > {win.preset_bar.width()}")
    return cut


def open_panel(qtbot: QtBot, win: MainWindow, width: int, height: int) -> None:
    win.resize(width, height)
    win.panel_button.setChecked(True)
    qtbot.waitUntil(lambda: win.side_panel.isVisible() and win.width() == width
                    and win.splitter.sizes()[2] >= SIDE_PANEL_MIN)  # laid out with the panel
    qtbot.waitUntil(lambda: panel_scroll(win).viewport().width() > 0)


@pytest.mark.parametrize(("width", "height"), [(1240, 820), (1600, 900)])
def test_the_side_panel_shows_its_controls_whole(
        qtbot: QtBot, window: MainWindow, width: int, height: int) -> None:
    open_panel(qtbot, window, width, height)
    qtbot.waitUntil(lambda: not cut_in_panel(window))
    # The longest notice: it must not widen the chat column and squeeze the panel.
    window.queue_notice.show_waiting("A conversation with a rather long title " * 4, 3)
    qtbot.waitUntil(window.queue_notice.isVisible)
    window.splitter.setSizes([0, 10_000, 0])  # the panel as narrow as the splitter lets it be
    qtbot.waitUntil(lambda: window.side_panel.width() < 400)
    assert not cut_in_panel(window), cut_in_panel(window)
    assert window.side_panel.width() >= window.side_panel.minimumSizeHint().width()


def test_at_700_by_600_the_bubbles_are_not_cut_under_the_panel(
        qtbot: QtBot, window: MainWindow) -> None:
    chat(qtbot, window, "Show me something wide: " + "averyverylongwordwithoutspaces" * 3)
    window.resize(1240, 820)
    window.panel_button.setChecked(True)
    window.splitter.setSizes([200, 640, 400])  # a wide panel, as a user may leave it
    open_panel(qtbot, window, 700, 600)
    view = window.chat
    qtbot.waitUntil(lambda: window.chat.parentWidget().width() >= CHAT_MIN)
    for bubble in view.bubbles:
        edge = bubble.mapTo(view.viewport(), QPoint(bubble.width(), 0)).x()
        assert edge <= view.viewport().width(), (edge, view.viewport().width())
    assert not cut_in_panel(window)


@pytest.mark.parametrize(("width", "height"), [(1240, 820), (700, 600)])
def test_an_empty_chat_shows_its_heading_and_starters_whole(
        qtbot: QtBot, window: MainWindow, width: int, height: int) -> None:
    window.splitter.setSizes([200, 600, 420])  # the widest panel
    open_panel(qtbot, window, width, height)
    view, empty = window.chat, window.chat.empty

    def whole() -> bool:
        right = view.viewport().width()
        return all(b.width() >= b.sizeHint().width() and b.isVisible()
                   and b.mapTo(view.viewport(), QPoint(b.width(), 0)).x() <= right
                   for b in empty.starter_buttons)

    qtbot.waitUntil(whole)


def test_at_700_wide_the_context_meter_is_whole_and_the_model_name_gives_way(
        qtbot: QtBot, window: MainWindow) -> None:
    window.resize(700, 600)
    window.model_label.setText("A-model-with-a-rather-long-file-name-Q4_K_M  ·  vision")
    window.context_label.setText("Context ≈495,298 + ≈32 typed + ≤512 passages / 131,072")
    qtbot.waitUntil(lambda: window.width() == 700)
    qtbot.waitUntil(lambda: window.context_label.width()
                    >= window.context_label.sizeHint().width())
    assert window.model_label.width() < window.model_label.sizeHint().width()  # cut with "…"
    assert window.model_label.text().endswith("vision")  # the whole name kept, for tests/a11y


def test_at_700_by_600_the_message_box_keeps_room_to_type(
        qtbot: QtBot, window: MainWindow) -> None:
    """At 700 px the chat list stays, so the composer is narrow: Attach and Dictate show their
    icons alone (tooltips and accessible names say what they are) and the message box keeps a
    usable width (it was ~130 px, its placeholder wrapped)."""
    composer, edit = window.composer, window.composer.edit
    window.resize(700, 600)
    qtbot.waitUntil(lambda: window.width() == 700 and composer.width() < 600)
    assert not window.sidebar.isHidden()  # the room is not taken from the chat list
    attach, mic = composer.attach_button, composer.mic.button
    for button, name in ((attach, "Attach"), (mic, "Dictate")):
        assert button.text() == "" and not button.icon().isNull()
        assert button.accessibleName() == name and button.toolTip()
    qtbot.waitUntil(lambda: edit.width() >= 200)  # 144 with the words
    placeholder = edit.fontMetrics().horizontalAdvance(edit.placeholderText())
    assert placeholder < edit.viewport().width() - 2 * edit.document().documentMargin()
    window.resize(1400, 900)  # room again: the words come back
    qtbot.waitUntil(lambda: window.width() == 1400 and composer.width() >= 600)
    assert attach.text() == "Attach" and mic.text() == "Dictate"
    assert attach.icon().isNull() and mic.icon().isNull()
