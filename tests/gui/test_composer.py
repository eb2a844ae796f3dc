"""The composer: a paste too big for a prompt is refused with a message and the draft is kept."""

from __future__ import annotations

from PySide6.QtCore import QMimeData, Qt
from PySide6.QtGui import QGuiApplication, QTextOption
from pytestqt.qtbot import QtBot

from inglenook.ui.chat.composer import MAX_PROMPT_CHARS, Composer


def composer(qtbot: QtBot) -> Composer:
    widget = Composer()
    qtbot.addWidget(widget)
    widget.resize(600, 120)
    widget.show()
    qtbot.waitExposed(widget)
    return widget


def test_a_huge_paste_is_refused_and_the_draft_kept(qtbot: QtBot) -> None:
    box = composer(qtbot)
    box.edit.setPlainText("My careful draft")
    box.edit.moveCursor(box.edit.textCursor().MoveOperation.End)
    QGuiApplication.clipboard().setText("x" * (MAX_PROMPT_CHARS + 1))
    with qtbot.waitSignal(box.edit.paste_refused) as refused:
        qtbot.keyClick(box.edit, Qt.Key.Key_V, Qt.KeyboardModifier.ControlModifier)
    assert refused.args == [MAX_PROMPT_CHARS + 1]
    assert box.edit.toPlainText() == "My careful draft"
    assert box.notice.isVisible() and "not added" in box.notice.text()
    qtbot.keyClicks(box.edit, "!")  # typing on: the message goes
    assert not box.notice.isVisible()
    assert box.edit.toPlainText() == "My careful draft!"


def test_the_limit_counts_the_draft_too(qtbot: QtBot) -> None:
    box = composer(qtbot)
    box.edit.setPlainText("draft words " * (MAX_PROMPT_CHARS // 24))
    mime = QMimeData()
    mime.setText("z" * (MAX_PROMPT_CHARS // 2 + 10))
    with qtbot.waitSignal(box.edit.paste_refused):
        box.edit.insertFromMimeData(mime)
    assert "z" not in box.edit.toPlainText()


def test_an_ordinary_paste_goes_in(qtbot: QtBot) -> None:
    box = composer(qtbot)
    QGuiApplication.clipboard().setText("pasted text")
    with qtbot.assertNotEmitted(box.edit.paste_refused):
        qtbot.keyClick(box.edit, Qt.Key.Key_V, Qt.KeyboardModifier.ControlModifier)
    assert box.edit.toPlainText() == "pasted text"
    assert not box.notice.isVisible()


def test_a_long_unbroken_paste_wraps_anywhere_until_the_prompt_is_sent(qtbot: QtBot) -> None:
    box = composer(qtbot)
    mime = QMimeData()
    mime.setText("b64:" + "QUJD" * 5_000)
    box.edit.insertFromMimeData(mime)
    assert box.edit.wordWrapMode() == QTextOption.WrapMode.WrapAnywhere
    with qtbot.waitSignal(box.send_requested):
        qtbot.keyClick(box.edit, Qt.Key.Key_Return)
    assert box.edit.wordWrapMode() == QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere
