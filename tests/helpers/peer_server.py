"""llama-cpp-python's own OpenAI-compatible server (`python -m llama_cpp.server`, the `server`
extra) on loopback: a real third-party server for the remote-engine tests."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx2

START_S = 120.0  # loading the model on a busy machine


@dataclass
class PeerServer:
    proc: subprocess.Popen[bytes]
    url: str  # the API's base, ".../v1"
    log: Path

    def kill(self) -> None:
        """Kill it abruptly (SIGKILL): connections break as they would with a crashed server."""
        self.proc.kill()
        self.proc.wait()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until_listing(server: PeerServer, api_key: str = "", timeout: float = START_S) -> None:
    """Poll GET /models until it answers 200; fail at once if the server exits. Each failed
    attempt waits on the process itself (up to 0.1 s), not on a clock."""
    deadline = time.monotonic() + timeout
    headers = {"authorization": f"Bearer {api_key}"} if api_key else {}
    with httpx2.Client(timeout=2.0, trust_env=False, headers=headers) as client:
        while time.monotonic() < deadline:
            try:
                if client.get(f"{server.url}/models").status_code == 200:
                    return
            except httpx2.TransportError:
                pass
            try:
                server.proc.wait(0.1)
            except subprocess.TimeoutExpired:
                continue
            raise AssertionError(f"llama_cpp.server exited ({server.proc.returncode}): "
                                 f"{server.log.read_text(errors='replace')[-2000:]}")
    raise AssertionError(f"llama_cpp.server did not answer within {timeout:.0f} s")


@contextmanager
def llama_cpp_server(model: Path, folder: Path, n_ctx: int = 2048,
                     api_key: str = "") -> Iterator[PeerServer]:
    port = free_port()
    log = folder / f"llama-cpp-server-{port}.log"
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(model),
               "--n_ctx", str(n_ctx), "--n_threads", "2", "--host", "127.0.0.1",
               "--port", str(port), "--verbose", "False"]
    if api_key:
        command += ["--api_key", api_key]
    with open(log, "wb") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    server = PeerServer(proc, f"http://127.0.0.1:{port}/v1", log)
    try:
        wait_until_listing(server, api_key)
        yield server
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
