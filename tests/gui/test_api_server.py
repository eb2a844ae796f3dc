"""The API server switched on from the window: an API client and a chat share the engine,
take turns visibly, and both complete (fake engine)."""

from __future__ import annotations

import http.client
import json
import socket
import threading

import pytest
from PySide6.QtWidgets import QLabel, QPushButton
from pytestqt.qtbot import QtBot

from inglenook.core.settings import load_settings
from inglenook.models.download_queue import DownloadState
from inglenook.ui.main_window import MainWindow
from inglenook.ui.server.server_dialog import ServerDialog
from tests import fakehub
from tests.fakehub import FakeFile, FakeHub
from tests.gui.conftest import REPLY_TIMEOUT_MS, Script, start_reply, wait_reply

fake_hub = fakehub.fake_hub  # the fixture, under its own name


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ask_api(port: int, text: str, result: dict) -> None:
    """A client on another thread: one non-streaming chat completion."""
    post(port, "/v1/chat/completions",
         {"model": "", "messages": [{"role": "user", "content": text}]}, result)


def post(port: int, path: str, body: dict, result: dict) -> None:
    """One JSON request, its status and body put in `result` (for a client thread)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        response = conn.getresponse()
        result["status"] = response.status
        result["body"] = json.loads(response.read())
    finally:
        conn.close()


@pytest.fixture
def serving(qtbot: QtBot, window: MainWindow) -> tuple[MainWindow, int]:
    port = free_port()
    window.command_actions["apiServer"].trigger()
    dialog = window.findChild(ServerDialog)
    dialog.port.setValue(port)
    dialog.enabled.setChecked(True)
    qtbot.waitUntil(lambda: window.server.running, timeout=REPLY_TIMEOUT_MS)
    assert f":{port}" in dialog.status.text() and window.server_label.isVisible()
    return window, port


def test_an_api_client_and_a_chat_share_the_engine(
        qtbot: QtBot, serving: tuple[MainWindow, int], script: Script) -> None:
    window, port = serving
    script.write([{"match": "API", "text": " ".join(f"a{i}" for i in range(30)),
                   "token_ms": 30}])
    result: dict = {}
    client = threading.Thread(target=ask_api, args=(port, "From the API", result))
    client.start()
    qtbot.waitUntil(lambda: window.worker.queue().running is not None, timeout=REPLY_TIMEOUT_MS)
    start_reply(qtbot, window, "From the window")
    qtbot.waitUntil(window.queue_notice.isVisible, timeout=REPLY_TIMEOUT_MS)
    assert "an API request" in window.queue_notice.label.text()
    wait_reply(qtbot, window)
    client.join(60)
    assert result["status"] == 200
    assert result["body"]["choices"][0]["message"]["content"].startswith("a0 a1")
    assert window.chat.bubbles[-1].text == "Echo: From the window"
    qtbot.waitUntil(lambda: "1 requests" in window.server_label.text(), timeout=10_000)


def test_the_server_setting_is_kept_and_switched_off(
        qtbot: QtBot, serving: tuple[MainWindow, int]) -> None:
    window, port = serving
    dialog = window.findChild(ServerDialog)
    dialog.enabled.setChecked(False)
    assert not window.server.running and not window.server_label.isVisible()
    with pytest.raises(ConnectionRefusedError):
        ask_api(port, "anyone?", {})
    window.close()
    stored = load_settings()
    assert stored.api_port == port and stored.api_enabled is False


def test_a_network_address_without_a_token_is_refused(
        qtbot: QtBot, window: MainWindow) -> None:
    window.command_actions["apiServer"].trigger()
    dialog = window.findChild(ServerDialog)
    dialog.host.setCurrentIndex(1)  # 0.0.0.0
    dialog.token.clear()
    dialog.enabled.setChecked(True)
    assert not window.server.running and not dialog.enabled.isChecked()
    assert "token" in dialog.status.text()


def test_the_request_log_lists_each_request_and_what_was_refused(
        qtbot: QtBot, serving: tuple[MainWindow, int], script: Script) -> None:
    window, port = serving
    script.write([{"match": "logged", "text": "one two three"}])
    result: dict = {}
    ask_api(port, "logged", result)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:  # a body that is not JSON: refused before it reaches the engine
        conn.request("POST", "/v1/chat/completions", b"{not json",
                     {"Content-Type": "application/json"})
        refused = conn.getresponse().status
    finally:
        conn.close()
    dialog = window.findChild(ServerDialog)
    qtbot.waitUntil(lambda: dialog.log.topLevelItemCount() == 2, timeout=REPLY_TIMEOUT_MS)
    newest, oldest = (dialog.log.topLevelItem(i) for i in range(2))
    columns = {name: i for i, name in enumerate(dialog.log.headerItem().text(c)
                                                for c in range(dialog.log.columnCount()))}
    assert result["status"] == 200 and refused == 400
    assert oldest.text(columns["Request"]) == "POST /v1/chat/completions"
    assert oldest.text(columns["Status"]) == "200" and oldest.text(columns["From"]) == "127.0.0.1"
    assert oldest.text(columns["Model"]) == result["body"]["model"]
    assert f"{result['body']['usage']['completion_tokens']} out" in oldest.text(columns["Tokens"])
    assert newest.text(columns["Status"]) == "400" and newest.text(columns["Tokens"]) == ""


def ollama_version(port: int) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", "/api/version")
        return conn.getresponse().status
    finally:
        conn.close()


def test_ollamas_api_is_served_only_when_ticked_and_kept(
        qtbot: QtBot, serving: tuple[MainWindow, int]) -> None:
    window, port = serving
    dialog = window.findChild(ServerDialog)
    assert ollama_version(port) == 404  # off by default: a second open door
    port_button = dialog.findChild(QPushButton, "serverOllamaPort")
    assert not port_button.isEnabled()
    dialog.ollama.setChecked(True)  # the running server restarts with it
    qtbot.waitUntil(lambda: window.server.running, timeout=REPLY_TIMEOUT_MS)
    assert ollama_version(port) == 200 and port_button.isEnabled()
    window.close()
    assert load_settings().api_ollama is True


def test_fetching_images_by_url_is_off_until_ticked_and_kept(
        qtbot: QtBot, window: MainWindow) -> None:
    window.command_actions["apiServer"].trigger()
    dialog = window.findChild(ServerDialog)
    assert not dialog.fetch.isChecked()  # nothing leaves the machine by default
    dialog.port.setValue(free_port())
    dialog.fetch.setChecked(True)
    dialog.enabled.setChecked(True)
    qtbot.waitUntil(lambda: window.server.running, timeout=REPLY_TIMEOUT_MS)
    assert window.server.server is not None and window.server.server.config.fetch_images
    assert not dialog.fetch.isEnabled()  # changed with the server off, like the address
    window.close()
    assert load_settings().api_fetch_images is True


def test_the_dialog_says_tokenless_clients_share_a_cache_and_can_keep_them_apart(
        qtbot: QtBot, window: MainWindow) -> None:
    """Issue 39 #15: the side channel is said where the server is turned on, with the switch
    that closes it, kept in the settings and given to the server."""
    window.command_actions["apiServer"].trigger()
    dialog = window.findChild(ServerDialog)
    note = dialog.findChild(QLabel, "serverIsolation")
    assert "Clients without a token share one cache" in note.text()
    assert "keep clients apart" in note.text()
    assert not dialog.isolate.isChecked()  # off by default: reuse between tools is faster
    dialog.isolate.setChecked(True)
    dialog.port.setValue(free_port())
    dialog.enabled.setChecked(True)
    qtbot.waitUntil(lambda: window.server.running, timeout=REPLY_TIMEOUT_MS)
    assert window.server.server is not None and window.server.server.config.isolate_clients
    assert not dialog.isolate.isEnabled()  # changed with the server off
    dialog.enabled.setChecked(False)
    window.close()
    assert load_settings().api_isolate_clients is True


def test_ollamas_pull_is_off_until_ticked_and_goes_through_the_windows_downloads(
        qtbot: QtBot, window: MainWindow, fake_hub: FakeHub) -> None:
    fake_hub.add_repo("org/Tiny-GGUF", [FakeFile("tiny.Q4_K_M.gguf", 300_000)])
    window.command_actions["apiServer"].trigger()
    dialog = window.findChild(ServerDialog)
    assert not dialog.pull.isChecked() and not dialog.pull.isEnabled()  # needs Ollama's API
    dialog.port.setValue(free_port())
    dialog.ollama.setChecked(True)
    assert dialog.pull.isEnabled()
    dialog.pull.setChecked(True)
    dialog.enabled.setChecked(True)
    qtbot.waitUntil(lambda: window.server.running, timeout=REPLY_TIMEOUT_MS)
    assert not dialog.pull.isEnabled()  # changed with the server off
    server = window.server.server
    assert server is not None and server.config.allow_pull
    result: dict = {}
    client = threading.Thread(target=post, args=(
        int(server.url.rsplit(":", 1)[1]), "/api/pull",
        {"model": "hf.co/org/Tiny-GGUF:Q4_K_M", "stream": False}, result))
    client.start()
    qtbot.waitUntil(lambda: any(s.state is DownloadState.DONE and s.filename ==
                                "tiny.Q4_K_M.gguf" for s in window.downloads.statuses()),
                    timeout=REPLY_TIMEOUT_MS)
    client.join(30)
    assert result == {"status": 200, "body": {"status": "success"}}
    window.close()
    assert load_settings().api_allow_pull is True
