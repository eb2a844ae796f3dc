"""Tab and Shift+Tab walk the whole window in a sensible order, and edit nothing on the way
(issue 35, point 1): the system prompt swallowed Tab (a tab character in the chat's prompt, the
preset turned Custom), and Shift+Tab never reached the sidebar."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QAccessible
from PySide6.QtWidgets import QAbstractButton, QApplication, QPlainTextEdit, QTextEdit, QWidget
from pytestqt.qtbot import QtBot

from inglenook.ui.main_window import MainWindow
from inglenook.ui.widgets.controls import CollapsibleSection
from tests.gui.conftest import chat


def press_tab(qtbot: QtBot, forward: bool) -> QWidget:
    focused = QApplication.focusWidget()
    assert focused is not None
    if forward:
        qtbot.keyClick(focused, Qt.Key.Key_Tab)
    else:
        qtbot.keyClick(focused, Qt.Key.Key_Backtab, Qt.KeyboardModifier.ShiftModifier)
    now = QApplication.focusWidget()
    assert now is not None
    return now


def walk(qtbot: QtBot, window: MainWindow, forward: bool) -> list[QWidget]:
    """From the message box round to it again; the widgets Tab (or Shift+Tab) landed on."""
    start = window.composer.edit
    start.setFocus()
    qtbot.waitUntil(start.hasFocus)
    seen: list[QWidget] = []
    for _ in range(400):
        widget = press_tab(qtbot, forward)
        if widget is start:
            return seen
        assert widget not in seen, f"went round without the message box: {seen}"
        seen.append(widget)
    raise AssertionError("Tab never came back to the message box")


def part_of(window: MainWindow, widget: QWidget) -> str:
    for name, part in (("top", window.findChild(QWidget, "topBar")),
                       ("sidebar", window.sidebar), ("chat", window.chat),
                       ("composer", window.composer), ("panel", window.side_panel)):
        if part is widget or part.isAncestorOf(widget):
            return name
    return "other"


def test_tab_walks_the_whole_window_both_ways_and_edits_nothing(
        qtbot: QtBot, window: MainWindow) -> None:
    chat(qtbot, window, "Hello")  # a message's own buttons too
    window.panel_button.setChecked(True)
    assert window.side.apply_preset_named("Balanced")  # an edit would turn it to Custom
    for section in window.panel.findChildren(CollapsibleSection):
        section.set_expanded(True)  # the system prompt and the JSON schema boxes shown
    window.panel.reply_format_section.json_check.setChecked(True)
    window.activateWindow()
    qtbot.waitUntil(window.isActiveWindow)
    panel, bar = window.panel, window.preset_bar
    prompt, preset = panel.system_prompt_edit.toPlainText(), bar.combo.currentText()
    boxes = {box: box.toPlainText() for box in window.findChildren(QPlainTextEdit)
             + window.findChildren(QTextEdit)}

    forward = walk(qtbot, window, forward=True)
    backward = walk(qtbot, window, forward=False)

    tab = Qt.FocusPolicy.TabFocus
    everything = {w for w in window.findChildren(QWidget)  # every control Tab may land on
                  if w.focusPolicy() & tab == tab and w.isVisible() and w.isEnabled()
                  and w.focusProxy() is None}
    assert set(forward) | {window.composer.edit} == everything
    assert backward == forward[::-1]  # Shift+Tab: the same way back
    assert window.sidebar.new_button in backward and window.sidebar.list in backward
    # From the message box: the composer, the side panel, the top bar, the sidebar, the chat.
    parts = [part_of(window, w) for w in forward]
    assert "other" not in parts
    order = [p for i, p in enumerate(parts) if i == 0 or parts[i - 1] != p]
    assert order == ["composer", "panel", "top", "sidebar", "chat"], order
    assert panel.system_prompt_edit in forward and panel.reply_format_section.schema_edit \
        in forward
    # Nothing typed on the way: the prompt, the preset and every text box are as they were.
    assert panel.system_prompt_edit.toPlainText() == prompt
    assert bar.combo.currentText() == preset != "Custom"
    assert {box: box.toPlainText() for box in boxes} == boxes
    assert window.chats.session.settings.system_prompt == prompt


def test_every_text_box_but_the_message_box_passes_tab_on(qtbot: QtBot,
                                                         window: MainWindow) -> None:
    window.side.edit_model_defaults(window.models.path)  # a dialog's template box too
    dialogs = [w for w in QApplication.topLevelWidgets() if w.isVisible()]
    editable = [box for root in dialogs
                for box in root.findChildren(QPlainTextEdit) + root.findChildren(QTextEdit)
                if not box.isReadOnly()]
    assert len(editable) >= 4
    assert [box.objectName() for box in editable if not box.tabChangesFocus()] == []
    for dialog in dialogs:
        if dialog is not window:
            dialog.close()


def test_every_button_has_a_name_in_words(qtbot: QtBot, window: MainWindow) -> None:
    """A name a screen reader can say: not "⋯" or "✕"."""
    chat(qtbot, window, "Hello")
    window.panel_button.setChecked(True)
    window.finder.open()
    window.banner.show_message("A notice with its ✕.", "info")
    wordless = []
    for button in window.findChildren(QAbstractButton):
        if not button.isVisibleTo(window):
            continue
        face = QAccessible.queryAccessibleInterface(button)
        name = face.text(QAccessible.Text.Name) if face else ""
        if not any(c.isalpha() for c in name):
            wordless.append(f"{button.objectName()} ({name!r})")
    assert wordless == []
    assert window.menu_button.accessibleName() and window.panel_button.accessibleName()
