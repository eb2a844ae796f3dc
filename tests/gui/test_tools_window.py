"""Tools through MCP in the window: the test MCP server (tests/helpers/mcp_server.py, stdio) in
mcp.json, the fake engine writing tool calls in the Qwen3 (Hermes) format. A call shows as a
card that runs only once approved; its result goes back to the model, which continues. Denied,
timed-out and crashing calls are answered too; cards come back when the chat is reopened; a
template without tool support says so."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from inglenook import paths
from inglenook.tools.approval import ChatToolPolicy
from inglenook.ui.chat.bubble import MessageBubble
from inglenook.ui.main_window import MainWindow
from inglenook.ui.tools.card_view import ToolCardList
from inglenook.ui.tools.chat_tools import NO_TOOL_SUPPORT
from inglenook.ui.tools.tools_dialog import ToolsDialog
from tests.gui.conftest import Script, chat, start_reply
from tests.gui.test_reasoning_window import window_with
from tests.templates import GPT_OSS, MAGISTRAL, QWEN3
from tests.unit.tools.test_formats import LLAMA32

SERVER = Path(__file__).resolve().parents[1] / "helpers" / "mcp_server.py"
WAIT_MS = 60_000  # a server starts in a second or two; the machine may be busy


def call(name: str, **arguments: object) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


REPLIES = [
    {"match": "add", "text": f"Let me add. {call('add', a=2, b=3)}"},
    {"match": "nap", "text": call("sleep", seconds=30)},
    {"match": "crash", "text": call("crash")},
    {"role": "tool", "match": "", "text": "The tool said: {last}"},
]


@pytest.fixture
def mcp_json() -> Path:
    path = paths.mcp_config_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"mcpServers": {
        "calc": {"command": sys.executable, "args": [str(SERVER), "--name", "calc"]}}}))
    return path


def tool_window(qtbot: QtBot, script: Script, tmp_path: Path, template: str) -> MainWindow:
    window = window_with(qtbot, script, tmp_path, template)
    session = window.chats.session
    session.set_settings(session.settings.replace(tools=ChatToolPolicy(frozenset({"calc"}))))
    return window


@pytest.fixture
def win(qtbot: QtBot, script: Script, tmp_path: Path, mcp_json: Path) -> Iterator[MainWindow]:
    """Qwen3's template on the fake engine; the chat on screen uses the calc server."""
    script.write(REPLIES)
    window = tool_window(qtbot, script, tmp_path, QWEN3)
    yield window
    window.close()


def cards(bubble: MessageBubble) -> ToolCardList:
    found = bubble.findChild(ToolCardList)
    assert found is not None
    return found


def ask(qtbot: QtBot, win: MainWindow, text: str) -> MessageBubble:
    """Send `text`; the bubble of the reply that called, once its card waits or runs."""
    start_reply(qtbot, win, text)
    qtbot.waitUntil(lambda: win.chats.session.tool_round is not None, timeout=WAIT_MS)
    return next(b for b in win.chat.bubbles if b.message_id
                == win.chats.session.tool_round.message_id)  # type: ignore[union-attr]


def answered(qtbot: QtBot, win: MainWindow) -> str:
    """Wait for the model's reply to the results; its text."""
    qtbot.waitUntil(lambda: win.chats.session.tool_round is None
                    and win.chats.session.reply is None
                    and win.chats.session.path[-1].content.startswith("The tool said"),
                    timeout=WAIT_MS)
    return win.chats.session.path[-1].content


def test_a_call_waits_for_approval_then_runs_and_the_model_continues(
        qtbot: QtBot, win: MainWindow) -> None:
    bubble = ask(qtbot, win, "Please add 2 and 3.")
    view = cards(bubble).views[0]
    assert bubble.text == "Let me add."
    assert view.title.text() == "Tool call: add · calc"
    assert json.loads(view.arguments.text()) == {"a": 2, "b": 3}
    assert view.buttons["once"].isVisible() and view.buttons["deny"].isVisible()
    assert win.chats.session.tool_round.cards[0].state == "awaiting"  # type: ignore[union-attr]
    qtbot.mouseClick(view.buttons["once"], Qt.MouseButton.LeftButton)
    assert answered(qtbot, win) == "The tool said: 5.0"
    request = win.chats.last_request
    assert [m.role for m in request.messages[-2:]] == ["assistant", "tool"]
    assert request.messages[-1].content == "5.0"
    called = win.chats.session.path[-2]
    assert called.tool_cards[0].result.text == "5.0"  # type: ignore[union-attr]
    assert not view.buttons["once"].isVisible() and view.status.text() == "Ran"
    assert view.result.text() == "5.0"
    # Reopened, the chat shows its card as it ended.
    conv = win.chats.conv_id
    win.chats.new_chat()
    win.chats.open(conv)
    reopened = next(b for b in win.chat.bubbles if b.message_id == called.id)
    assert cards(reopened).views[0].status.text() == "Ran"
    assert not cards(reopened).views[0].buttons["once"].isVisibleTo(reopened)


@pytest.mark.parametrize(("template", "reply"), [
    (QWEN3, '<think>Use add.</think><tool_call>{"name": "add", "arguments": {"a": 2, "b": 3}}'
            "</tool_call>"),
    (LLAMA32, '{"name": "add", "parameters": {"a": 2, "b": 3}}'),
    (MAGISTRAL, '[THINK]Use add.[/THINK][TOOL_CALLS]add[ARGS]{"a": 2, "b": 3}'),
    (GPT_OSS, "<|channel|>analysis<|message|>Use add.<|end|><|start|>assistant to=functions.add"
              '<|channel|>commentary <|constrain|>json<|message|>{"a": 2, "b": 3}'),
], ids=["hermes", "llama", "mistral", "harmony"])
def test_each_tool_call_format_makes_a_card_that_runs_once_approved(
        qtbot: QtBot, script: Script, tmp_path: Path, mcp_json: Path, template: str,
        reply: str) -> None:
    script.write([{"match": "add", "text": reply}, *REPLIES[-1:]])
    window = tool_window(qtbot, script, tmp_path, template)
    assert window.chats.session.settings.tools.uses("calc")
    bubble = ask(qtbot, window, "Please add 2 and 3.")
    view = cards(bubble).views[0]
    assert view.title.text() == "Tool call: add · calc"
    assert json.loads(view.arguments.text()) == {"a": 2, "b": 3}
    assert window.chats.last_request.tools[0]["function"]["name"] == "add"
    assert "Use add" not in bubble.text and "{" not in bubble.text  # no markup in the answer
    qtbot.mouseClick(view.buttons["once"], Qt.MouseButton.LeftButton)
    assert answered(qtbot, window) == "The tool said: 5.0"
    window.close()


def test_a_denied_call_never_runs_and_the_model_is_told(qtbot: QtBot,
                                                        win: MainWindow) -> None:
    bubble = ask(qtbot, win, "Please add 2 and 3.")
    qtbot.mouseClick(cards(bubble).views[0].buttons["deny"], Qt.MouseButton.LeftButton)
    assert answered(qtbot, win) == "The tool said: The user denied this call."
    card = win.chats.session.path[-2].tool_cards[0]
    assert (card.decision, card.result.status) == ("deny", "denied")  # type: ignore[union-attr]
    assert cards(bubble).views[0].status.text() == "Denied"


def test_always_allowed_tools_run_without_asking_again_in_this_chat(
        qtbot: QtBot, win: MainWindow) -> None:
    bubble = ask(qtbot, win, "Please add 2 and 3.")
    qtbot.mouseClick(cards(bubble).views[0].buttons["always"], Qt.MouseButton.LeftButton)
    answered(qtbot, win)
    start_reply(qtbot, win, "add again")
    qtbot.waitUntil(lambda: len(win.chats.session.path) == 6
                    and win.chats.session.path[-1].content.startswith("The tool said")
                    and win.chats.session.reply is None, timeout=WAIT_MS)
    card = win.chats.session.path[-2].tool_cards[0]
    assert card.decision == "always" and card.result.text == "5.0"  # type: ignore[union-attr]


def test_a_call_that_takes_too_long_is_answered_as_timed_out(qtbot: QtBot,
                                                             win: MainWindow) -> None:
    win.chats.tools.call_timeout = 1.0
    bubble = ask(qtbot, win, "Take a nap.")
    qtbot.mouseClick(cards(bubble).views[0].buttons["once"], Qt.MouseButton.LeftButton)
    assert answered(qtbot, win) == "The tool said: The tool did not answer within 1 s."
    assert cards(bubble).views[0].status.text().startswith("Timed out")


def test_a_server_that_crashes_is_answered_and_the_chat_goes_on(qtbot: QtBot,
                                                                win: MainWindow) -> None:
    bubble = ask(qtbot, win, "Make it crash.")
    qtbot.mouseClick(cards(bubble).views[0].buttons["once"], Qt.MouseButton.LeftButton)
    text = answered(qtbot, win)
    card = win.chats.session.path[-2].tool_cards[0]
    assert card.result is not None and not card.result.ok, card
    assert text == f"The tool said: {card.result.text}"
    assert cards(bubble).views[0].status.text().startswith(("Failed", "Not available"))
    # The server starts again on next use.
    again = ask(qtbot, win, "Please add 2 and 3.")
    qtbot.mouseClick(cards(again).views[0].buttons["once"], Qt.MouseButton.LeftButton)
    assert answered(qtbot, win) == "The tool said: 5.0"


def test_stop_answers_waiting_calls_without_running_them(qtbot: QtBot,
                                                         win: MainWindow) -> None:
    bubble = ask(qtbot, win, "Please add 2 and 3.")
    win.chats.stop()
    assert win.chats.session.tool_round is None and win.chats.session.reply is None
    assert cards(bubble).views[0].status.text() == "Denied"
    assert win.chats.session.path[-1].tool_cards[0].result.text == (  # type: ignore[union-attr]
        "The user stopped before this call ran.")


def test_the_dialog_lists_the_servers_tools_and_turns_them_on_per_chat(
        qtbot: QtBot, win: MainWindow) -> None:
    dialog = ToolsDialog(win.chats.tools, win.chats.session, win.models.model, win)
    qtbot.addWidget(dialog)
    item = dialog.servers.item(0)
    assert item.text() == "calc" and item.checkState() == Qt.CheckState.Checked
    dialog.servers.setCurrentRow(0)
    qtbot.waitUntil(lambda: dialog.tool_list.count() >= 7, timeout=WAIT_MS)
    assert "add" in [dialog.tool_list.item(i).text() for i in range(dialog.tool_list.count())]
    item.setCheckState(Qt.CheckState.Unchecked)
    assert not win.chats.session.settings.tools.uses("calc")
    dialog.name_edit.setText("web")
    dialog.target_edit.setText("https://example.org/mcp")
    qtbot.mouseClick(dialog.add_button, Qt.MouseButton.LeftButton)
    saved = json.loads(paths.mcp_config_file().read_text())["mcpServers"]
    assert saved["web"] == {"url": "https://example.org/mcp"} and "calc" in saved
    dialog.servers.setCurrentRow(1)
    qtbot.mouseClick(dialog.power_button, Qt.MouseButton.LeftButton)
    assert json.loads(paths.mcp_config_file().read_text())["mcpServers"]["web"]["disabled"]
    qtbot.mouseClick(dialog.remove_button, Qt.MouseButton.LeftButton)
    assert "web" not in json.loads(paths.mcp_config_file().read_text())["mcpServers"]
    dialog.close()
    chat(qtbot, win, "Hello")
    assert win.chats.last_request.tools == ()  # the chat uses no server now


def test_enter_adds_a_server_and_a_removed_one_takes_its_tools_along(
        qtbot: QtBot, win: MainWindow) -> None:
    """Issue 35, point 8: the removed server's tools stayed listed; Enter added nothing."""
    dialog = ToolsDialog(win.chats.tools, win.chats.session, win.models.model, win)
    qtbot.addWidget(dialog)
    dialog.show()
    dialog.servers.setCurrentRow(0)
    qtbot.waitUntil(lambda: dialog.tool_list.count() >= 7, timeout=WAIT_MS)
    qtbot.mouseClick(dialog.remove_button, Qt.MouseButton.LeftButton)
    assert dialog.servers.count() == 0 and dialog.tool_list.count() == 0
    qtbot.waitUntil(lambda: not server_processes(), timeout=WAIT_MS)  # stopped, as removed
    assert "calc" not in dialog.state.text()
    dialog.name_edit.setText("web")
    dialog.target_edit.setText("https://example.org/mcp")
    qtbot.keyClick(dialog.target_edit, Qt.Key.Key_Return)
    saved = json.loads(paths.mcp_config_file().read_text())["mcpServers"]
    assert saved == {"web": {"url": "https://example.org/mcp"}}
    assert dialog.isVisible() and dialog.name_edit.text() == dialog.target_edit.text() == ""
    dialog.close()


def test_a_template_without_tool_support_says_so_instead_of_offering_tools(
        qtbot: QtBot, window: MainWindow, mcp_json: Path) -> None:
    window.chats.tools.reload()  # the mcp.json written after the window opened
    session = window.chats.session
    session.set_settings(session.settings.replace(tools=ChatToolPolicy(frozenset({"calc"}))))
    window.panel_button.setChecked(True)
    window.side.bind(session)
    assert window.panel.reply_section.tools_label.text() == NO_TOOL_SUPPORT
    dialog = ToolsDialog(window.chats.tools, session, window.models.model, window)
    qtbot.addWidget(dialog)
    assert dialog.notice.text().startswith(NO_TOOL_SUPPORT)
    assert not dialog.servers.item(0).flags() & Qt.ItemFlag.ItemIsEnabled
    dialog.close()
    chat(qtbot, window, "Add 2 and 3.")
    assert window.chats.last_request.tools == ()
    assert not window.chats.tools.started


def test_cards_the_reasoning_block_and_the_dialog_name_every_control(
        qtbot: QtBot, win: MainWindow, script: Script) -> None:
    from tests.gui.test_accessibility import unnamed

    script.write([{"match": "add", "text": f"<think>Add.</think>{call('add', a=2, b=3)}"}])
    bubble = ask(qtbot, win, "Please add 2 and 3.")
    assert cards(bubble).views[0].buttons["once"].isVisible()
    assert bubble.reasoning.header.isVisible()
    assert unnamed(bubble) == []
    win.chats.show_tools()
    dialog = win.findChild(ToolsDialog)
    assert dialog is not None and unnamed(dialog) == []
    dialog.close()


def server_processes() -> list[psutil.Process]:
    """The test server's processes still running."""
    found = []
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if str(SERVER) in " ".join(child.cmdline()) and \
                    child.status() != psutil.STATUS_ZOMBIE:
                found.append(child)
    return found


def test_closing_the_window_stops_the_tool_servers(qtbot: QtBot, win: MainWindow) -> None:
    bubble = ask(qtbot, win, "Please add 2 and 3.")
    qtbot.mouseClick(cards(bubble).views[0].buttons["once"], Qt.MouseButton.LeftButton)
    answered(qtbot, win)

    assert len(server_processes()) == 1 and win.chats.tools.started
    win.close()
    assert not win.chats.tools.started and server_processes() == []


def test_a_model_that_keeps_calling_allowed_tools_is_stopped_after_a_while(
        qtbot: QtBot, win: MainWindow, script: Script, monkeypatch: pytest.MonkeyPatch) -> None:
    from inglenook.chat import tool_round

    monkeypatch.setattr(tool_round, "MAX_TOOL_ROUNDS", 3)
    script.write([{"match": "add", "text": call("add", a=2, b=3)},
                  {"role": "tool", "match": "", "text": call("add", a=2, b=3)}])
    bubble = ask(qtbot, win, "Please add 2 and 3.")
    qtbot.mouseClick(cards(bubble).views[0].buttons["always"], Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: "stopped after 3 replies" in win.banner.text(), timeout=WAIT_MS)
    session = win.chats.session
    assert session.tool_rounds() == 3 and session.tool_round is None and session.reply is None
    assert all(m.tool_cards[0].result.text == "5.0"  # type: ignore[union-attr]
               for m in session.path[1:])


def test_a_server_that_cannot_start_is_named_and_the_reply_goes_on_without_it(
        qtbot: QtBot, win: MainWindow, mcp_json: Path) -> None:
    mcp_json.write_text(json.dumps({"mcpServers": {"calc": {
        "command": sys.executable, "args": [str(SERVER), "--exit-at-start"]}}}))
    win.chats.tools.reload()
    chat(qtbot, win, "Hello")
    assert "Some tools are not available: calc" in win.banner.text()
    assert win.chats.last_request.tools == ()
    assert win.chats.session.path[-1].content == "Echo: Hello"
