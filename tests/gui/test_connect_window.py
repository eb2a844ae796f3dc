"""Models → Connect an app… in the real window (fake engine): the settings of each app for the
server as it is set and as it runs, with the loaded model's name, and Copy."""

from __future__ import annotations

import shlex
import socket

from PySide6.QtGui import QGuiApplication
from pytestqt.qtbot import QtBot

from inglenook.ui.main_window import MainWindow
from inglenook.ui.server.connect_dialog import ConnectDialog
from inglenook.ui.server.server_dialog import ServerDialog
from tests.gui.conftest import REPLY_TIMEOUT_MS


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def choose(dialog: ConnectDialog, app: str) -> str:
    dialog.apps.setCurrentRow([g.app for g in dialog.guides].index(app))
    return dialog.text.toPlainText()


def test_connect_an_app_shows_each_apps_settings_and_follows_the_server(
        qtbot: QtBot, window: MainWindow) -> None:
    model = window.worker.client.model
    assert model is not None
    window.command_actions["connectApp"].trigger()
    dialog = window.findChild(ConnectDialog)
    assert dialog.isVisible() and "is off" in dialog.intro.text()
    assert dialog.start_button.isVisible()  # the server it needs, one click away
    aider = shlex.split(choose(dialog, "Aider"))
    assert aider[aider.index("--model") + 1] == f"openai/{model.name}"
    assert aider[aider.index("--openai-api-base") + 1] == (
        f"http://127.0.0.1:{window.app_settings.value.api_port}/v1")
    assert not dialog.note.isVisibleTo(dialog)
    choose(dialog, "Claude Code")
    assert "does not serve yet" in dialog.note.text() or "tools" in dialog.note.text()
    dialog.copy.click()
    assert QGuiApplication.clipboard().text() == dialog.text.toPlainText()

    port = free_port()
    window.command_actions["apiServer"].trigger()
    server = window.findChild(ServerDialog)
    server.port.setValue(port)
    server.token.setText("a-token-for-the-tools-0123")
    server.enabled.setChecked(True)
    qtbot.waitUntil(lambda: window.server.running, timeout=REPLY_TIMEOUT_MS)
    qtbot.waitUntil(lambda: f":{port}." in dialog.intro.text(), timeout=REPLY_TIMEOUT_MS)
    assert "is on" in dialog.intro.text()
    aider = shlex.split(choose(dialog, "Aider"))
    assert aider[aider.index("--openai-api-key") + 1] == "a-token-for-the-tools-0123"
    assert f"127.0.0.1:{port}/v1" in aider[aider.index("--openai-api-base") + 1]


def test_connect_an_app_turns_the_server_on(qtbot: QtBot, window: MainWindow) -> None:
    window.app_settings.update(api_port=free_port())
    window.command_actions["connectApp"].trigger()
    dialog = window.findChild(ConnectDialog)
    dialog.start_button.click()
    qtbot.waitUntil(lambda: window.server.running, timeout=REPLY_TIMEOUT_MS)
    assert "is on" in dialog.intro.text() and not dialog.start_button.isVisible()
    assert window.app_settings.value.api_enabled  # kept on, as the server dialog's switch does
    window.server.stop()
