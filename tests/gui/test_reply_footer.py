"""Every reply's footer says the same (issue 37): the last reply has one more button
(Regenerate), and choosing short labels by each bubble's own buttons once made it say Retry,
Info and Read where the replies above it said Details and Read aloud."""

from __future__ import annotations

from PySide6.QtWidgets import QToolButton
from pytestqt.qtbot import QtBot

from inglenook.ui.main_window import MainWindow
from tests.gui.conftest import Script, chat, start_reply, wait_reply

WIDTHS = range(700, 1300, 20)


def labels(window: MainWindow, index: int) -> tuple[str, str]:
    bubble = [b for b in window.chat.bubbles if b.role == "assistant"][index]
    return bubble.details_button.text(), bubble.speak_button.text()


def test_every_reply_says_details_and_read_aloud_alike_at_any_width(
        qtbot: QtBot, window: MainWindow) -> None:
    chat(qtbot, window, "Hello there, tell me something")
    chat(qtbot, window, "And again please")
    last = [b for b in window.chat.bubbles if b.role == "assistant"][-1]
    assert last.regenerate_button.isVisibleTo(last)  # the last reply's one more button
    seen = set()
    for width in WIDTHS:
        window.resize(width, 700)
        qtbot.waitUntil(lambda w=width: window.width() == w)
        qtbot.waitUntil(lambda: labels(window, 0) == labels(window, -1))
        seen.add(labels(window, -1))
    assert seen == {("Details", "Read aloud"), ("Info", "Read")}  # both kinds met


def test_a_streaming_reply_at_700_by_600_shows_its_buttons_whole(
        qtbot: QtBot, window: MainWindow, script: Script) -> None:
    """Stop beside the six buttons at rest squeezed Delete to "D…e"; while the reply streams
    those it cannot use yet are put away."""
    window.resize(700, 600)
    qtbot.waitUntil(lambda: window.width() == 700)
    script.write(default={"text": "Slow first word", "token_ms": 400})
    start_reply(qtbot, window, "Hello")
    bubble = window.chat.bubbles[-1]
    qtbot.waitUntil(lambda: bubble.stop_button.isVisible())
    shown = [b for b in bubble.findChildren(QToolButton) if b.isVisible()
             and b.parent() is bubble]
    assert {b.text() for b in shown} == {"Stop", "Info"} or \
        {b.text() for b in shown} == {"Stop", "Details"}
    qtbot.waitUntil(lambda: all(b.width() >= b.sizeHint().width() for b in shown))
    wait_reply(qtbot, window)
    assert bubble.copy_button.isVisible() and bubble.regenerate_button.isVisible()
