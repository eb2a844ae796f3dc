"""Context you can see and control: the meter with what is typed, a message that cannot fit
refused before sending, the overflow policy kept with the chat, the marker where history was
left out (fake engine, and llama.cpp where the engine's own fitting is under test)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QComboBox, QSpinBox
from pytestqt.qtbot import QtBot

from inglenook.ui.main_window import MainWindow
from tests.gui.conftest import LOAD_TIMEOUT_MS, Script, chat


def meter_level(window: MainWindow) -> str:
    return str(window.context_label.property("level"))


def test_the_meter_counts_what_is_typed_and_warns_near_the_limit(
        qtbot: QtBot, window: MainWindow) -> None:
    n_ctx = window.models.model.n_ctx
    assert meter_level(window) == "ok" and "typed" not in window.context_label.text()
    window.composer.edit.setPlainText("word " * int(n_ctx * 0.9 * 4 / 5))  # ~90% of it
    qtbot.waitUntil(lambda: meter_level(window) == "near", timeout=5_000)
    assert "typed" in window.context_label.text()
    window.composer.edit.setPlainText("word " * (n_ctx * 2))
    qtbot.waitUntil(lambda: meter_level(window) == "over", timeout=5_000)
    window.composer.edit.clear()
    qtbot.waitUntil(lambda: meter_level(window) == "ok", timeout=5_000)


def test_a_message_that_cannot_fit_is_refused_before_sending(
        qtbot: QtBot, window: MainWindow) -> None:
    text = "word " * window.models.model.n_ctx
    window.composer.edit.setPlainText(text)
    qtbot.keyClick(window.composer.edit, Qt.Key.Key_Return)
    assert not window.chat.bubbles and window.chats.conv_id is None
    assert "context holds" in window.banner.text()
    assert window.composer.edit.toPlainText() == text.strip()


def test_the_overflow_policy_stays_with_its_chat(qtbot: QtBot, window: MainWindow,
                                                  script: Script) -> None:
    combo = window.panel.findChild(QComboBox, "overflow_combo")
    combo.setCurrentIndex(combo.findData("rolling"))
    chat(qtbot, window, "Keep a rolling window.")
    rolling = window.chats.conv_id
    assert window.chats.last_request.overflow == "rolling"
    assert window.chats.last_request.conversation == f"chat:{rolling}"
    qtbot.mouseClick(window.new_chat_button, Qt.MouseButton.LeftButton)
    combo.setCurrentIndex(combo.findData("stop"))
    chat(qtbot, window, "Stop at the limit.")
    window.chats.open(rolling)
    assert combo.currentData() == "rolling"
    chat(qtbot, window, "Still rolling?")
    assert window.chats.last_request.overflow == "rolling"


def test_history_left_out_is_marked_in_the_chat(qtbot: QtBot, real_window: MainWindow) -> None:
    window = real_window
    window.panel.findChild(QSpinBox, "n_ctx_spin").setValue(512)
    with qtbot.waitSignal(window.model_ready, timeout=LOAD_TIMEOUT_MS):
        window.models.reload()
    paragraph = "The keeper counted the waves and wrote each number in his log. " * 6
    for n in range(5):
        chat(qtbot, window, f"Note {n}: {paragraph}")
    reply = window.chats.session.path[-1]
    stats = reply.provenance.stats
    assert stats is not None and stats.dropped_messages > 0
    marked = [b for b in window.chat.bubbles if "not seen by the model" in b.notice.text()]
    assert len(marked) == 1
    window.chats.open(window.chats.conv_id, reply.id)  # and again after reopening
    assert any("not seen by the model" in b.notice.text() for b in window.chat.bubbles)


def test_a_full_chat_set_to_stop_offers_to_leave_history_out(
        qtbot: QtBot, real_window: MainWindow) -> None:
    window = real_window
    window.panel.findChild(QSpinBox, "n_ctx_spin").setValue(512)
    with qtbot.waitSignal(window.model_ready, timeout=LOAD_TIMEOUT_MS):
        window.models.reload()
    combo = window.panel.findChild(QComboBox, "overflow_combo")
    combo.setCurrentIndex(combo.findData("stop"))
    # Room for a 200-token reply is kept free, but replies end at their first full stop: the
    # engine refuses a prompt past 312 tokens while the window's own check (history + message
    # over 512) has no reason to refuse first, whatever the replies say.
    window.panel.findChild(QSpinBox, "max_tokens_spin").setValue(200)
    window.panel.stop_edit.set_stop_strings([".", "\n"])
    paragraph = "The keeper counted the waves and wrote each number in his log. " * 5
    for n in range(8):
        chat(qtbot, window, f"Note {n}: {paragraph}")
        if window.banner.action_button.isVisible():
            break
    assert window.banner.action_button.text() == "Leave out the middle"
    assert window.chats.session.path[-1].status == "error"
    with qtbot.waitSignal(window.reply_finished, timeout=LOAD_TIMEOUT_MS) as done:
        qtbot.mouseClick(window.banner.action_button, Qt.MouseButton.LeftButton)
    assert done.args[1].reason in ("stop", "length")
    assert combo.currentData() == "middle" and window.chats.last_request.overflow == "middle"


def test_a_chat_longer_than_the_context_shows_what_is_sent_and_where_it_is_cut(
        qtbot: QtBot, window: MainWindow) -> None:
    """A 10,000-message chat is not "over": the meter counts what the next request holds (the
    recent turns), its tooltip says what is left out, and the chat shows where."""
    from tests.helpers.long_chat import add_long_chat

    conv = add_long_chat(window.chats.store, 10_000)
    window.chats.open(conv)
    n_ctx = window.models.model.n_ctx
    text = window.context_label.text()
    used = int(text.split("≈")[1].split(" /")[0].replace(",", ""))
    assert used <= n_ctx and meter_level(window) != "over", text
    ahead = window.chats.session.next_prompt(n_ctx)
    assert ahead is not None and ahead.left_out > 9_000
    assert f"{ahead.left_out:,} earlier messages are left out" in window.context_label.toolTip()
    cut = window.chats.session.path.outline.ids[ahead.first_seen]
    window.chat.scroll_to_message(cut)
    bubble = window.chat.bubble_of(cut)
    assert bubble is not None and bubble.notice.isVisible()
    assert f"{ahead.left_out:,} earlier messages are left out of the model's view" \
        in bubble.notice.text()
