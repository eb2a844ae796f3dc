"""Continue a cut reply and edit a reply, in the real window (fake engine)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from inglenook.chat.reply_edits import is_edited
from inglenook.ui.chat.inline_edit import InlineEdit
from inglenook.ui.main_window import MainWindow
from tests.gui.conftest import REPLY_TIMEOUT_MS, Script, chat, wait_reply

COUNT = "one two three four five six"


def short_replies(window: MainWindow, max_tokens: int) -> None:
    session = window.chats.session
    session.set_settings(session.settings.replace(
        sampling=session.settings.sampling.replace(max_tokens=max_tokens)))


def test_continue_goes_on_from_a_cut_reply(qtbot: QtBot, window: MainWindow,
                                           script: Script) -> None:
    script.write([{"match": "Count", "text": COUNT, "token_ms": 0}])
    short_replies(window, 3)
    chat(qtbot, window, "Count to six.")
    cut = window.chat.bubbles[-1]
    assert cut.text == "one two three " and cut.continue_button.isVisible()
    short_replies(window, 48)
    with qtbot.waitSignal(window.reply_started, timeout=REPLY_TIMEOUT_MS):
        qtbot.mouseClick(cut.continue_button, Qt.MouseButton.LeftButton)
    # (Chat ▸ Continue the last reply does the same: window.chats.continue_reply.)
    assert window.chats.last_request is not None
    assert window.chats.last_request.prefill == "one two three "
    wait_reply(qtbot, window)
    _question, reply = window.chat.bubbles  # one reply, continued
    assert reply.text == COUNT and reply.sibling_label.text() == "2/2"
    assert not reply.continue_button.isVisible()  # it ended: nothing to go on from
    qtbot.mouseClick(reply.previous_button, Qt.MouseButton.LeftButton)
    assert window.chat.bubbles[-1].text == "one two three "


def test_editing_a_reply_makes_a_version_the_next_turn_uses(qtbot: QtBot, window: MainWindow
                                                           ) -> None:
    chat(qtbot, window, "Name a colour.")
    reply = window.chat.bubbles[-1]
    assert reply.edit_button.isVisible()
    qtbot.mouseClick(reply.edit_button, Qt.MouseButton.LeftButton)
    editor = reply.findChild(InlineEdit)
    assert editor is not None and editor.editor.toPlainText() == "Echo: Name a colour."
    assert editor.send_button.text() == "Save"
    qtbot.waitUntil(lambda: editor.isVisible() and editor.height() > 40, timeout=5_000)
    assert reply.height() > editor.height()  # the bubble makes room for it
    editor.editor.setPlainText("Green.")
    qtbot.keyClick(editor.editor, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: window.chat.bubbles[-1].text == "Green.", timeout=5_000)
    edited = window.chat.bubbles[-1]
    assert edited.sibling_label.text() == "2/2" and window.chats.session.reply is None
    assert is_edited(window.chats.session.path[-1].provenance)
    chat(qtbot, window, "Another?")
    assert window.chats.last_request is not None
    assert [m.content for m in window.chats.last_request.messages if m.role == "assistant"] \
        == ["Green."]
