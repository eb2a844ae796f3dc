"""The chat view with hostile content: long messages are cut with Show all, deep nesting shows as
text, removed bubbles are deleted, and a bubble makes its widgets only when they are needed."""

from __future__ import annotations

import shiboken6
from PySide6.QtCore import QObject, QPoint, Qt, QUrl
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QToolButton
from pytestqt.qtbot import QtBot

from inglenook.core.replies import Stats
from inglenook.ui.chat.chat_view import MAX_COLUMN_WIDTH, ChatView, MessageBubble
from inglenook.ui.chat.markdown_view import SHOW_ALL_URL

LOAD_MS = 60_000
TABLE = "| # | Name |\n|---|------|\n" + "".join(f"| {i} | row {i} |\n" for i in range(10_000))


def shown_chat(qtbot: QtBot, *messages: tuple[str, str]) -> ChatView:
    view = ChatView()
    qtbot.addWidget(view)
    for role, text in messages:
        view.add_bubble(role, text)
    view.resize(700, 500)
    view.show()
    qtbot.waitExposed(view)
    return view


def test_a_huge_table_is_cut_and_show_all_reveals_its_end(qtbot: QtBot) -> None:
    view = shown_chat(qtbot, ("user", "A big table, please."), ("assistant", TABLE))
    body = view.bubbles[-1].body
    assert body.truncated
    shown = body.toPlainText()
    assert "row 0" in shown and "row 9999" not in shown
    assert not body.anchor_rect(SHOW_ALL_URL).isEmpty()
    bar = view.verticalScrollBar()
    view.scroll_to_bottom()
    qtbot.waitUntil(lambda: bar.value() == bar.maximum())
    qtbot.waitUntil(lambda: body.visibleRegion().boundingRect().contains(
        body.anchor_rect(SHOW_ALL_URL).center().toPoint()))
    link = body.anchor_rect(SHOW_ALL_URL).center().toPoint()
    with qtbot.waitSignal(body.fully_shown, timeout=LOAD_MS):
        qtbot.mouseClick(body, Qt.MouseButton.LeftButton, pos=link)
    assert not body.truncated
    assert "row 9999" in body.toPlainText()
    assert body.anchor_rect(SHOW_ALL_URL).isEmpty()
    assert body.markdown() == TABLE
    view.scroll_to_bottom()  # the end can be scrolled to and painted
    qtbot.waitUntil(lambda: bar.value() == bar.maximum())


def test_a_long_line_wraps_inside_the_bubble(qtbot: QtBot) -> None:
    line = "A" * 200_000
    view = shown_chat(qtbot, ("assistant", line))
    body = view.bubbles[0].body
    assert body.truncated
    qtbot.waitUntil(lambda: body.height() == body.heightForWidth(body.width()))
    assert body.document().size().width() <= body.width() + 1
    assert body.height() > 20 * body.fontMetrics().lineSpacing()  # wrapped over many lines
    with qtbot.waitSignal(body.fully_shown, timeout=LOAD_MS):
        body.show_all()
    assert body.toPlainText().count("A") == len(line)


def test_a_five_megabyte_message_shows_its_start_at_once(qtbot: QtBot) -> None:
    text = "".join(f"Paragraph {i}: " + "some ordinary words " * 12 + "\n\n"
                   for i in range(20_000))
    assert len(text) > 5_000_000
    view = shown_chat(qtbot, ("assistant", text))
    body = view.bubbles[0].body
    assert body.truncated
    assert body.toPlainText().startswith("Paragraph 0:")
    assert "Paragraph 19999" not in body.toPlainText()


def test_content_past_the_nesting_limit_is_visible_text(qtbot: QtBot) -> None:
    view = shown_chat(qtbot, ("assistant", "> " * 40 + "deep quote"),
                      ("assistant", "- " * 40 + "deep list\n\nand after"))
    quote, listed = (bubble.body for bubble in view.bubbles)
    assert "deep quote" in quote.toPlainText()
    assert "deep list" in listed.toPlainText() and "and after" in listed.toPlainText()
    for body in (quote, listed):
        qtbot.waitUntil(lambda b=body: b.height() == b.heightForWidth(b.width()))
        assert body.height() > body.fontMetrics().lineSpacing()


def test_copy_of_a_code_block_cut_off_by_the_truncation_copies_all_of_it(qtbot: QtBot) -> None:
    code = "".join(f"print({i})\n" for i in range(5_000))
    view = shown_chat(qtbot, ("assistant", f"Here:\n\n```python\n{code}```\n"))
    body = view.bubbles[0].body
    assert body.truncated
    with qtbot.waitSignal(body.code_copied, timeout=LOAD_MS) as copied:
        body.anchorClicked.emit(QUrl("copy:0"))
    assert copied.args == [0]
    assert QGuiApplication.clipboard().text() == code.removesuffix("\n")


def test_keyboard_select_all_and_copy(qtbot: QtBot) -> None:
    word = "x" * 120  # long enough to get zero-width breaks in the document
    view = shown_chat(qtbot, ("assistant", f"Hello **world** {word}"))
    body = view.bubbles[0].body
    qtbot.mouseClick(body, Qt.MouseButton.LeftButton, pos=body.rect().center())
    qtbot.keyClick(body, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)
    qtbot.keyClick(body, Qt.Key.Key_C, Qt.KeyboardModifier.ControlModifier)
    assert QGuiApplication.clipboard().text() == f"Hello world {word}"


def test_dragging_selects_text(qtbot: QtBot) -> None:
    view = shown_chat(qtbot, ("assistant", "Select some of this text."))
    body = view.bubbles[0].body
    qtbot.waitUntil(lambda: body.height() == body.heightForWidth(body.width()))
    y = body.height() // 2
    qtbot.mousePress(body, Qt.MouseButton.LeftButton, pos=QPoint(2, y))
    qtbot.mouseMove(body, QPoint(body.width() - 2, y))
    qtbot.mouseRelease(body, Qt.MouseButton.LeftButton, pos=QPoint(body.width() - 2, y))
    assert body.selected_text() == "Select some of this text."


def test_clear_deletes_the_bubbles(qtbot: QtBot) -> None:
    view = shown_chat(qtbot, *[("user" if i % 2 == 0 else "assistant", f"Message {i}")
                               for i in range(20)])
    old: list[QObject] = [*view.bubbles, *(b.body for b in view.bubbles)]
    view.clear()
    assert view.bubbles == [] and view.empty.isVisible()
    qtbot.waitUntil(lambda: not any(shiboken6.isValid(o) for o in old))
    view.add_bubble("user", "A new chat.")
    view.remove_last()
    assert view.bubbles == []


def test_scroll_to_a_message_that_is_gone_is_harmless(qtbot: QtBot) -> None:
    view = shown_chat(qtbot, ("user", "One"), ("assistant", "Two"))
    view.bubbles[1].message_id = 7
    view.scroll_to_message(7)
    view.clear()
    qtbot.wait(50)  # let the scheduled scroll run against the deleted row


def test_a_bubble_makes_its_widgets_when_needed(qtbot: QtBot) -> None:
    bubble = MessageBubble("assistant", "Hello")
    qtbot.addWidget(bubble)
    made = {b.objectName() for b in bubble.findChildren(QToolButton)}
    assert made == {"bubbleEditButton", "bubbleDetailsButton", "bubbleRegenerateButton",
                    "bubbleSpeakButton",
                    "bubbleCopyButton", "bubbleDeleteButton"}
    bubble.show()
    bubble.set_siblings(1, 1)
    bubble.set_notice("")
    bubble.set_streaming(False)
    assert len(bubble.findChildren(QToolButton)) == 6

    bubble.set_streaming(True)
    assert bubble.stop_button.isVisible() and not bubble.copy_button.isEnabled()
    bubble.set_streaming(False)
    assert not bubble.stop_button.isVisible() and bubble.copy_button.isEnabled()

    bubble.set_siblings(2, 3)
    assert bubble.sibling_label.isVisible() and bubble.sibling_label.text() == "2/3"
    assert bubble.previous_button.isEnabled() and bubble.next_button.isEnabled()
    with qtbot.waitSignal(bubble.sibling_requested) as step:
        qtbot.mouseClick(bubble.next_button, Qt.MouseButton.LeftButton)
    assert step.args == [1]

    bubble.set_stats(Stats(prompt_tokens=40, cached_tokens=0, generated_tokens=12, ttft_s=0.2,
                           decode_tok_s=30.0, prompt_tok_s=300.0, context_used=52, n_ctx=2048))
    assert bubble.stats_label.isVisible() and bubble.stats_label.text() == "12 tokens · 30.0 tok/s"
    assert not bubble.notice.isVisible() and bubble.edit_button.isVisible()  # a reply, too


def test_user_bubble_actions(qtbot: QtBot) -> None:
    bubble = MessageBubble("user", "Question")
    qtbot.addWidget(bubble)
    bubble.show()
    assert bubble.edit_button.isVisible() and not bubble.regenerate_button.isVisible()
    assert not bubble.details_button.isVisible()
    with qtbot.waitSignal(bubble.copy_requested):
        qtbot.mouseClick(bubble.copy_button, Qt.MouseButton.LeftButton)
    assert QGuiApplication.clipboard().text() == "Question"


def test_another_text_after_show_all_starts_from_its_head(qtbot: QtBot) -> None:
    view = shown_chat(qtbot, ("assistant", TABLE))
    bubble = view.bubbles[0]
    with qtbot.waitSignal(bubble.body.fully_shown, timeout=LOAD_MS):
        bubble.body.show_all()
    bubble.set_text("A short answer instead.")
    assert not bubble.body.truncated
    assert bubble.body.toPlainText() == "A short answer instead."
    bubble.set_text(TABLE.replace("row", "line"))  # a long one again: cut, not all shown
    assert bubble.body.truncated and "line 0" in bubble.body.toPlainText()


def test_the_figures_under_a_reply_are_one_short_line(qtbot: QtBot) -> None:
    bubble = MessageBubble("assistant", "Answer")
    qtbot.addWidget(bubble)
    bubble.resize(600, 200)
    bubble.show()
    bubble.set_siblings(2, 3)
    bubble.set_stats(Stats(prompt_tokens=900, cached_tokens=850, generated_tokens=1234,
                           ttft_s=0.25, decode_tok_s=31.42, prompt_tok_s=300.0,
                           context_used=2134, n_ctx=4096, dropped_messages=3))
    label = bubble.stats_label
    assert label.text() == "1,234 tokens · 31.4 tok/s · 3 earlier messages left out"
    # The rest is a hover away (and in Details).
    assert "TTFT 250 ms" in label.toolTip() and "850 of 900 prompt tokens cached" in label.toolTip()
    one_line = label.fontMetrics().lineSpacing() + 4
    narrow = bubble.minimumSizeHint().width() + 80  # the figures get what ‹ 2/3 › and the
    bubble.resize(narrow, 200)                        # actions leave: too little for all
    qtbot.waitUntil(lambda: bubble.width() == narrow)
    assert label.sizeHint().height() <= one_line  # one line, never wrapped
    assert label.height() <= bubble.copy_button.height()  # the footer is no taller for it
    assert label.shown_text() in ("1,234 tokens · 31.4 tok/s", "31.4 tok/s")  # a shorter form
    bubble.stats_label.setFixedWidth(20)
    assert label.shown_text().endswith("…")  # and where nothing fits, the speed cut short


def test_a_wide_window_keeps_the_messages_to_a_readable_column(qtbot: QtBot) -> None:
    view = shown_chat(qtbot, ("user", "Question " * 60), ("assistant", "Answer " * 200))
    reply = view.bubbles[1]
    view.resize(1600, 600)
    content = view.viewport()
    qtbot.waitUntil(lambda: content.width() > 1500)
    qtbot.waitUntil(lambda: reply.width() <= MAX_COLUMN_WIDTH)
    left = reply.mapTo(content, QPoint(0, 0)).x()
    right = content.width() - (left + reply.width())
    assert abs(left - right) <= 2  # centred
    view.resize(700, 600)  # a narrow window: the usual margins, all the width
    qtbot.waitUntil(lambda: reply.mapTo(content, QPoint(0, 0)).x() == 24)


def test_copy_says_copied_then_copy_again(qtbot: QtBot) -> None:
    bubble = MessageBubble("assistant", "Answer")
    qtbot.addWidget(bubble)
    bubble.show()
    qtbot.mouseClick(bubble.copy_button, Qt.MouseButton.LeftButton)
    assert QGuiApplication.clipboard().text() == "Answer"
    assert bubble.copy_button.text() == "Copied"
    qtbot.waitUntil(lambda: bubble.copy_button.text() == "Copy", timeout=5000)
