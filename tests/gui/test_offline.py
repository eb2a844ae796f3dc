"""The offline proof: a whole use of the app makes no network access outside loopback.

Every Python process involved runs under tests/helpers/netguard.py: an audit hook that fails
any connect, datagram or name lookup outside loopback before it reaches the kernel, and
records it. The window's process gets it in the test; the engine host (a child process, started
as in production) gets it from a sitecustomize on PYTHONPATH and logs its pid, so the test can
check that the very process that ran llama.cpp was guarded. Online mode throughout
(HF_HUB_OFFLINE unset): nothing is kept off the network by a setting.

What the audit hook cannot see is native code calling the C library directly; llama.cpp is
built without its downloader (no libcurl), and the engine host is checked to hold no socket.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDoubleSpinBox, QSpinBox
from pytestqt.qtbot import QtBot

from inglenook import paths
from inglenook.models.catalog import load_catalog
from tests.gui.conftest import LOAD_TIMEOUT_MS, chat, greedy_settings, open_window
from tests.helpers import netguard

ROOT = Path(__file__).resolve().parents[2]


def sockets_held(pid: int) -> list[str]:
    """The sockets a process has open (Linux: /proc/PID/fd)."""
    fd_dir = Path(f"/proc/{pid}/fd")
    links = []
    for fd in fd_dir.iterdir():
        try:
            links.append(os.readlink(fd))
        except OSError:  # closed meanwhile
            continue
    return [link for link in links if link.startswith("socket:")]


@pytest.fixture
def online(monkeypatch: pytest.MonkeyPatch) -> None:
    """As a user runs it: offline mode off, the real Hub's address."""
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def guard_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, online: None) -> Path:
    """Child processes started from now on are guarded and log to the returned file."""
    log = tmp_path / "net-guard.jsonl"
    for name, value in netguard.guarded_env(log).items():
        if os.environ.get(name) != value:
            monkeypatch.setenv(name, value)
    return log


@pytest.fixture
def guard(guard_log: Path) -> Iterator[netguard.Guard]:
    """This process guarded too, for the length of the test."""
    g = netguard.install()
    g.attempts.clear()
    yield g
    g.on = False


def run_guarded(code: str, log: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT,
                          env=netguard.guarded_env(log), capture_output=True, text=True,
                          timeout=60)


def test_the_guard_blocks_the_network_and_lets_loopback_through(tmp_path: Path) -> None:
    """The guard itself can fail: outside addresses and name lookups are refused and logged
    (192.0.2.1 is TEST-NET-1, never routed), loopback works."""
    log = tmp_path / "net.jsonl"
    proc = run_guarded("""
        import socket
        tcp, udp = socket.socket(), socket.socket(type=socket.SOCK_DGRAM)
        for attempt in (lambda: tcp.connect(("192.0.2.1", 80)),
                        lambda: udp.sendto(b"x", ("192.0.2.1", 53)),
                        lambda: socket.getaddrinfo("example.com", 443)):
            try:
                attempt()
                print("reached")
            except ConnectionRefusedError as exc:
                print(type(exc).__name__)
        with socket.create_server(("127.0.0.1", 0)) as server:
            with socket.create_connection(server.getsockname(), timeout=5):
                print("loopback ok")
    """, log)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["NetworkBlocked"] * 3 + ["loopback ok"]
    records = netguard.read_log(log)
    assert [r["event"] for r in records] == ["installed"] + ["blocked"] * 3
    assert [r["what"].split()[0] for r in records[1:]] == [
        "socket.connect", "socket.sendto", "socket.getaddrinfo"]
    assert "example.com" in records[3]["what"]


@pytest.mark.integration
def test_the_self_test_makes_no_network_attempt(guard_log: Path, tmp_path: Path) -> None:
    """`inglenook --self-test` from its first import: window, engine host, model, reply."""
    proc = subprocess.run([sys.executable, "-m", "inglenook", "--self-test"], cwd=tmp_path,
                          env=dict(os.environ, QT_QPA_PLATFORM="offscreen"),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    records = netguard.read_log(guard_log)
    installed = {r["pid"]: r["argv"] for r in records if r["event"] == "installed"}
    # The window's process, the engine host and the host's chat-template renderer.
    assert len(installed) == 3
    assert any("--self-test" in argv for argv in installed.values())  # the others: children
    assert [r for r in records if r["event"] == "blocked"] == []


@pytest.mark.integration
def test_a_whole_session_makes_no_network_attempt(qtbot: QtBot, guard: netguard.Guard,
                                                  guard_log: Path) -> None:
    # Start, with the bundled model loaded by the real engine host.
    win = open_window(qtbot, None, greedy_settings())
    client = win.worker.client
    assert client.ready is not None and win.models.model is not None
    host_pid = client.ready.pid

    # Chat.
    chat(qtbot, win, "What is the capital of France?")
    assert win.chats.session.turns()[-1].content.strip()

    # Change settings and save them.
    win.panel.findChild(QDoubleSpinBox, "temperature_spin").setValue(0.5)
    win.panel.findChild(QSpinBox, "max_tokens_spin").setValue(24)
    win.save_settings()
    saved = json.loads(paths.settings_file().read_text(encoding="utf-8"))
    assert saved["sampling"]["temperature"] == 0.5

    # The Models dialog: Library (headers read from disk), then Discover's curated catalog.
    qtbot.mouseClick(win.models_button, Qt.MouseButton.LeftButton)
    dialog = win.models._dialog
    assert dialog is not None and dialog.isVisible()
    dialog.show_page("library")
    qtbot.waitUntil(lambda: not dialog.library.reading, timeout=LOAD_TIMEOUT_MS)
    table = dialog.library.table
    assert any("SmolLM2" in table.topLevelItem(i).text(0)
               for i in range(table.topLevelItemCount()))
    dialog.show_page("discover")
    assert dialog.discover.result_ids() == [e.repo for e in load_catalog()]
    dialog.close()

    # The engine host that did the work was guarded, and holds no socket of any kind.
    records = netguard.read_log(guard_log)
    assert host_pid in {r["pid"] for r in records if r["event"] == "installed"}
    assert sockets_held(host_pid) == []

    # Quit.
    win.close()
    qtbot.waitUntil(lambda: not client.alive, timeout=LOAD_TIMEOUT_MS)

    assert guard.attempts == []
    assert [r for r in netguard.read_log(guard_log) if r["event"] == "blocked"] == []
