"""Long chats in the real window: a transcript that costs what is on screen, opens at its end,
reads older messages page by page, moves like a reader (keys, the jump button, Find), and
keeps what the user did in a message that scrolled away."""

from __future__ import annotations

import shiboken6
from PySide6.QtCore import QObject, Qt
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from inglenook.store.branch import KEEP_PAGES
from inglenook.ui.chat.chat_view import ChatView
from inglenook.ui.history.search_dialog import SearchDialog
from inglenook.ui.main_window import MainWindow
from inglenook.ui.window import commands
from tests.gui.conftest import REPLY_TIMEOUT_MS, Script, start_reply, wait_reply
from tests.helpers.long_chat import add_long_chat, text_of

LONG = 3_000
FEW = 60  # bubbles: a screenful and the margins around it, whatever the chat's length


def open_long(qtbot: QtBot, window: MainWindow, messages: int = LONG, **extra: object) -> int:
    conv = add_long_chat(window.store, messages, **extra)  # type: ignore[arg-type]
    window.history.refresh()
    window.chats.open(conv)
    qtbot.waitUntil(lambda: not window.chat._fill_timer.isActive())
    return conv


def in_view(view: ChatView, index: int) -> bool:
    bubble = view.bubble_at(index)
    if bubble is None or not bubble.isVisible():
        return False
    top, bottom = bubble.y(), bubble.y() + bubble.height()
    return bottom > 0 and top < view.viewport().height()


def settled(qtbot: QtBot, view: ChatView) -> None:
    qtbot.waitUntil(lambda: not view._fill_timer.isActive() and not view._refit_timer.isActive())


def test_a_long_chat_opens_at_its_end_with_a_screenful_of_bubbles(
        qtbot: QtBot, window: MainWindow) -> None:
    open_long(qtbot, window)
    view = window.chat
    assert view.row_count == LONG
    assert in_view(view, LONG - 1) and view.following
    assert view.bubble_at(LONG - 1).text == text_of(LONG - 1)  # type: ignore[union-attr]
    assert 0 < len(view.bubbles) <= FEW
    assert len(window.chats.session.path._pages) <= 2  # one page read, maybe two
    widgets = len(QApplication.allWidgets())
    window.chats.open(open_long(qtbot, window, 40))  # a short chat costs about as much
    assert abs(len(QApplication.allWidgets()) - widgets) < 400


def test_paging_up_reads_older_messages_and_keeps_memory_bounded(
        qtbot: QtBot, window: MainWindow) -> None:
    open_long(qtbot, window, 600)
    view, path = window.chat, window.chats.session.path
    view.setFocus()
    seen = 0
    while view.verticalScrollBar().value() > 0:
        qtbot.keyClick(view, Qt.Key.Key_PageUp)
        settled(qtbot, view)
        assert len(view.bubbles) <= FEW and len(path._pages) <= KEEP_PAGES
        seen += 1
        assert seen < 2_000
    assert in_view(view, 0) and not view.following
    assert view.bubble_at(0).text == text_of(0)  # type: ignore[union-attr]
    assert view.bubble_at(LONG - 1) is None


def test_home_and_end_go_to_the_first_and_the_latest_message(
        qtbot: QtBot, window: MainWindow) -> None:
    open_long(qtbot, window)
    view = window.chat
    view.setFocus()
    qtbot.keyClick(view, Qt.Key.Key_Home, Qt.KeyboardModifier.ControlModifier)
    settled(qtbot, view)
    assert in_view(view, 0) and view.verticalScrollBar().value() == 0
    assert view.jump.isVisible()
    qtbot.keyClick(view, Qt.Key.Key_End, Qt.KeyboardModifier.ControlModifier)
    settled(qtbot, view)
    assert in_view(view, LONG - 1) and view.following and not view.jump.isVisible()
    qtbot.keyClick(view, Qt.Key.Key_Home)
    assert in_view(view, 0)
    qtbot.keyClick(view, Qt.Key.Key_End)
    assert in_view(view, LONG - 1)
    # PageUp in a short draft scrolls the conversation; in a long one it moves the cursor.
    window.composer.edit.setFocus()
    qtbot.keyClick(window.composer.edit, Qt.Key.Key_PageUp)
    assert not view.following


def test_keys_in_a_focused_message_scroll_the_conversation(
        qtbot: QtBot, window: MainWindow) -> None:
    open_long(qtbot, window)
    view = window.chat
    body = view.bubble_at(LONG - 1).body  # type: ignore[union-attr]
    qtbot.mouseClick(body, Qt.MouseButton.LeftButton, pos=body.rect().center())
    assert body.hasFocus()
    for _ in range(30):  # far enough that the clicked message's bubble is deleted
        qtbot.keyClick(QApplication.focusWidget(), Qt.Key.Key_PageUp)
    settled(qtbot, view)
    assert view.bubble_at(LONG - 1) is None and not view.following
    qtbot.keyClick(QApplication.focusWidget(), Qt.Key.Key_End)  # keys still reach the view
    assert in_view(view, LONG - 1)


def test_the_jump_button_shows_while_a_reply_streams_below(
        qtbot: QtBot, window: MainWindow, script: Script) -> None:
    open_long(qtbot, window, 400)
    script.write(default={"text": "word " * 400, "token_ms": 25})
    start_reply(qtbot, window, "Write at length.")
    view = window.chat
    qtbot.waitUntil(lambda: bool(view.bubbles[-1].text), timeout=REPLY_TIMEOUT_MS)
    view.scroll_to_row(100)
    settled(qtbot, view)
    assert window.chats.session.reply is not None  # still writing
    assert view.jump.isVisible() and "reply" in view.jump.text()
    reply = window.chats.reply.bubble
    assert reply is not None and shiboken6.isValid(reply)  # far away, yet kept while it writes
    qtbot.mouseClick(view.jump, Qt.MouseButton.LeftButton)
    assert view.following and not view.jump.isVisible()
    wait_reply(qtbot, window)
    assert view.bubble_at(view.row_count - 1).text.startswith("word word")  # type: ignore[union-attr]
    assert view.jump.text() == "↓  Latest"


def test_a_reply_written_while_the_user_reads_far_above_ends_where_it_belongs(
        qtbot: QtBot, window: MainWindow, script: Script) -> None:
    open_long(qtbot, window, 400)
    script.write(default={"text": "Echo: {last}", "token_ms": 20})
    start_reply(qtbot, window, "A short one.")
    view = window.chat
    view.scroll_to_top()
    wait_reply(qtbot, window)
    settled(qtbot, view)
    assert in_view(view, 0)  # the user's place is kept
    view.scroll_to_bottom()
    settled(qtbot, view)
    assert view.bubble_at(view.row_count - 1).text == "Echo: A short one."  # type: ignore[union-attr]
    assert window.chats.session.path[-1].content == "Echo: A short one."


def test_find_in_this_chat_goes_to_the_matches_and_counts_them(
        qtbot: QtBot, window: MainWindow) -> None:
    open_long(qtbot, window)
    view, bar = window.chat, window.find_bar
    window.command_actions["findInChat"].trigger()
    assert bar.isVisible() and bar.edit.hasFocus()
    qtbot.keyClicks(bar.edit, "item 1200.")
    qtbot.waitUntil(lambda: bar.count.text() == "1 of 1")
    assert in_view(view, 1200)
    assert view.bubble_at(1200).body.selected_text().lower() == "item"  # type: ignore[union-attr]
    bar.edit.setText("tell")  # every question: the nearest is the one in view
    qtbot.waitUntil(lambda: bar.count.text().endswith(f" of {LONG // 2:,}"))
    nearest = window.finder.current
    assert in_view(view, 2 * nearest) and abs(2 * nearest - 1200) <= 20
    qtbot.keyClick(bar.edit, Qt.Key.Key_Return, Qt.KeyboardModifier.ShiftModifier)  # older
    assert bar.count.text() == f"{nearest:,} of {LONG // 2:,}"
    assert in_view(view, 2 * nearest - 2)
    window.chats.open(open_long(qtbot, window, 60))  # a short chat: the latest is nearest
    qtbot.waitUntil(lambda: bar.count.text() == "30 of 30")
    assert in_view(window.chat, 58)
    qtbot.keyClick(bar.edit, Qt.Key.Key_Return)  # newer: round the end, to the first
    assert bar.count.text() == "1 of 30" and in_view(view, 0)
    window.command_actions["findPrevious"].trigger()  # Shift+F3: back round to the last
    assert bar.count.text() == "30 of 30"
    bar.edit.setText("zeppelin")
    qtbot.waitUntil(lambda: bar.count.text() == "No matches")
    qtbot.keyClick(bar.edit, Qt.Key.Key_Escape)
    assert not bar.isVisible() and window.composer.edit.hasFocus()
    window.command_actions["search"].trigger()  # Ctrl+K still searches every chat
    dialog = window.findChild(SearchDialog)
    assert dialog is not None and dialog.isVisible()
    dialog.close()


def test_show_all_and_an_opened_reasoning_are_kept_while_out_of_view(
        qtbot: QtBot, window: MainWindow) -> None:
    long_text = "".join(f"Line {i} of a very long reply.\n\n" for i in range(2_500))
    conv = add_long_chat(window.store, 800, reasoning={797: "Thinking it over."})
    store = window.store
    store.update_message(store.active_path(conv)[799].id, long_text)
    window.history.refresh()
    window.chats.open(conv)
    view = window.chat
    settled(qtbot, view)
    last = view.bubble_at(799)
    assert last is not None and last.body.truncated
    with qtbot.waitSignal(last.body.fully_shown, timeout=REPLY_TIMEOUT_MS):
        last.body.show_all()
    view.scroll_to_row(797)
    settled(qtbot, view)
    thought = view.bubble_at(797)
    assert thought is not None and not thought.reasoning.is_open
    thought.reasoning.header.click()
    old: list[QObject] = [last, thought]
    view.scroll_to_top()
    settled(qtbot, view)
    qtbot.waitUntil(lambda: not any(shiboken6.isValid(o) for o in old))
    view.scroll_to_bottom()
    settled(qtbot, view)
    again = view.bubble_at(799)
    assert again is not None and again.body.expanded
    qtbot.waitUntil(lambda: not again.body.truncated, timeout=REPLY_TIMEOUT_MS)
    assert "Line 2499" in again.body.toPlainText()
    view.scroll_to_row(797)
    settled(qtbot, view)
    assert view.bubble_at(797).reasoning.is_open  # type: ignore[union-attr]


def test_another_version_of_a_message_in_a_long_chat_keeps_the_view_in_place(
        qtbot: QtBot, window: MainWindow) -> None:
    open_long(qtbot, window, 1_000)
    session, view = window.chats.session, window.chat
    question = session.path[500]
    store = window.store  # a second version of question 500 with its own replies, then
    parent = question.parent_id  # back to the first
    for n in range(30):
        parent = store.add_message(session.conv_id, "user" if n % 2 == 0 else "assistant",  # type: ignore[arg-type]
                                   "Question 500, asked again." if n == 0 else f"More {n}.",
                                   parent)
    store.show(question.id)
    session.reload()
    window.chats.render()
    view.scroll_to_row(500)
    settled(qtbot, view)
    bubble = view.bubble_at(500)
    assert bubble is not None and bubble.next_button.isVisible()
    y = bubble.y()
    qtbot.mouseClick(bubble.next_button, Qt.MouseButton.LeftButton)
    settled(qtbot, view)
    assert view.row_count == 530 and view.bubble_at(500).text == "Question 500, asked again."  # type: ignore[union-attr]
    assert view.bubble_at(500).y() == y  # type: ignore[union-attr]


def test_a_search_hit_deep_in_a_long_chat_opens_there(
        qtbot: QtBot, window: MainWindow) -> None:
    conv = add_long_chat(window.store, LONG)
    window.history.refresh()
    hit = window.store.active_path(conv)[1234].id
    window.chats.open(conv, hit, ["item"])
    view = window.chat
    settled(qtbot, view)
    assert in_view(view, 1234) and not view.following
    assert view.bubble_at(1234).body.selected_text().lower() == "item"  # type: ignore[union-attr]


def test_leaving_a_long_chat_deletes_its_bubbles(qtbot: QtBot, window: MainWindow) -> None:
    open_long(qtbot, window)
    old: list[QObject] = list(window.chat.bubbles)
    window.chats.new_chat()
    qtbot.waitUntil(lambda: not any(shiboken6.isValid(o) for o in old))
    assert window.chat.bubbles == [] and window.chat.empty.isVisible()


def test_the_message_box_has_the_focus_at_launch(window: MainWindow) -> None:
    assert window.focusWidget() is window.composer.edit


def test_the_shortcut_sheet_lists_the_transcript_and_message_box_keys(
        window: MainWindow) -> None:
    window.show_shortcuts()
    from inglenook.ui.window.help import ShortcutsDialog

    dialog = window.findChild(ShortcutsDialog)
    assert dialog is not None
    table = dialog.table
    rows = [tuple(table.item(r, c).text() for c in range(3)) for r in range(table.rowCount())]
    for where, what, keys in commands.KEYS:
        assert (where, what, keys) in rows
    assert any(what == "Find in this chat" for _, what, _ in rows)
    assert ("Conversation", "The latest message", "End, Ctrl+End") in rows
    dialog.close()
