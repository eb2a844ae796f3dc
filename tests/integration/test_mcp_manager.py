"""The tool manager against a real MCP server (tests/helpers/mcp_server.py, the official SDK's
MCPServer) over stdio and streamable HTTP: listing, calling from any thread, tool errors,
timeouts, a server that hangs, one that crashes, one that cannot start.

No test waits by sleeping: each waits on a future. The short call timeouts are what is tested
(a tool that sleeps 30 s against a timeout of 1 s).
"""

from __future__ import annotations

import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil
import pytest

from inglenook.tools.config import ServerConfig
from inglenook.tools.connection import ServerDown, ServerState
from inglenook.tools.manager import ToolManager
from inglenook.tools.results import MAX_RESULT_CHARS

HELPER = Path(__file__).resolve().parents[1] / "helpers" / "mcp_server.py"
WAIT = 60.0  # for futures: generous, the machine may be busy


def server(name: str = "calc", *extra: str) -> ServerConfig:
    return ServerConfig(name, command=sys.executable, args=(str(HELPER), *extra))


def pid_of(manager: ToolManager, name: str = "calc") -> int:
    result = manager.call_tool(name, "pid", {}).result(WAIT)
    assert result.ok, result
    return int(result.text)


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


class States:
    def __init__(self) -> None:
        self.seen: list[ServerState] = []
        self.threads: set[str] = set()

    def __call__(self, state: ServerState) -> None:
        self.seen.append(state)
        self.threads.add(threading.current_thread().name)


@pytest.fixture(scope="module")
def states() -> States:
    return States()


@pytest.fixture(scope="module")
def manager(tmp_path_factory: pytest.TempPathFactory, states: States) -> Iterator[ToolManager]:
    """One server for the tests that leave it healthy."""
    with ToolManager([server()], log_dir=tmp_path_factory.mktemp("mcp-logs"),
                     on_state=states) as shared:
        yield shared


def test_tools_are_listed_with_their_schemas(manager: ToolManager, states: States) -> None:
    tools = {t.name: t for t in manager.list_tools("calc").result(WAIT)}
    assert {"add", "echo", "pid", "fail", "sleep", "freeze", "crash"} <= set(tools)
    add = tools["add"]
    assert (add.server, add.description) == ("calc", "Add two numbers.")
    assert add.input_schema["required"] == ["a", "b"]
    assert add.input_schema["properties"]["a"]["type"] == "number"
    assert [s.status for s in states.seen[:2]] == ["starting", "running"]
    assert states.threads == {"inglenook-mcp"}  # callbacks come from the manager's thread
    assert manager.state("calc").status == "running"


def test_calls_from_many_threads_get_their_own_answers(manager: ToolManager) -> None:
    def add(n: int) -> str:
        return manager.call_tool("calc", "add", {"a": n, "b": 0.5}).result(WAIT).text

    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(add, range(12)))
    assert answers == [str(n + 0.5) for n in range(12)]
    echo = manager.call_tool("calc", "echo", {"text": "héllo 🔧"}).result(WAIT)
    assert (echo.status, echo.text) == ("ok", "héllo 🔧")


def test_a_tool_error_is_a_result_for_the_model(manager: ToolManager) -> None:
    failed = manager.call_tool("calc", "fail", {"reason": "no such city"}).result(WAIT)
    assert failed.status == "error" and "no such city" in failed.text
    unknown = manager.call_tool("calc", "nope", {}).result(WAIT)
    assert unknown.status == "error" and "nope" in unknown.text
    bad_args = manager.call_tool("calc", "add", {"a": "two"}).result(WAIT)
    assert bad_args.status == "error"
    assert manager.state("calc").status == "running"


def test_a_50_mb_answer_is_cut_says_so_and_leaves_the_server_serving(
        manager: ToolManager) -> None:
    # Read whole by the SDK this took minutes of copying (44-65 s on a fast machine): past the
    # call's timeout. Cut at the transport, it is the server's own time to write it.
    big = manager.call_tool("calc", "big", {"megabytes": 50}, timeout=40).result(WAIT)
    assert big.status == "ok", big
    assert big.text.startswith("All work and no play makes Jack a dull boy.")
    assert len(big.text) <= MAX_RESULT_CHARS
    # The SDK's server sends the text twice (as content and as structured content): ~104 MB.
    assert re.search(r"the tool's answer was 1\d\d\.\d MB, more than 8 MB: the rest was not "
                     r"read]$", big.text)
    echo = manager.call_tool("calc", "echo", {"text": "still here"}).result(WAIT)
    assert (echo.status, echo.text) == ("ok", "still here")


def test_a_slow_tool_times_out_and_the_server_keeps_serving(manager: ToolManager) -> None:
    before = pid_of(manager)
    slow = manager.call_tool("calc", "sleep", {"seconds": 30}, timeout=1).result(WAIT)
    assert (slow.status, slow.text) == ("timeout", "The tool did not answer within 1 s.")
    assert pid_of(manager) == before  # it answered the ping: not restarted


def test_a_call_given_up_on_leaves_the_server_serving(manager: ToolManager) -> None:
    before = pid_of(manager)
    waiting = manager.call_tool("calc", "sleep", {"seconds": 30})
    assert waiting.cancel() and waiting.cancelled()
    assert pid_of(manager) == before


def test_a_hung_server_is_stopped_and_starts_again_on_next_use(tmp_path: Path) -> None:
    with ToolManager([server()], log_dir=tmp_path, ping_timeout=1) as manager:
        hung = pid_of(manager)
        frozen = manager.call_tool("calc", "freeze", {"seconds": 120}, timeout=0.5).result(WAIT)
        assert frozen.status == "timeout"
        state = manager.state("calc")
        assert state.status == "failed" and "stopped answering" in state.error
        assert pid_of(manager) != hung
    assert gone(hung)  # close() waited for the stopping of the hung one too


def test_a_crashed_server_starts_again_on_next_use(tmp_path: Path) -> None:
    states = States()
    with ToolManager([server()], log_dir=tmp_path, on_state=states) as manager:
        first = pid_of(manager)
        crashed = manager.call_tool("calc", "crash", {}).result(WAIT)
        assert crashed.status == "error" and "stopped while running 'crash'" in crashed.text
        assert "crashing on purpose" in crashed.detail  # its stderr, for the card
        assert manager.state("calc").status == "failed"
        assert manager.call_tool("calc", "add", {"a": 1, "b": 2}).result(WAIT).text == "3.0"
        assert pid_of(manager) != first
    statuses = [s.status for s in states.seen]
    changes = [a for a, b in zip(statuses, [None, *statuses], strict=False) if a != b]
    assert changes == ["starting", "running", "failed", "starting", "running", "stopped"]


def test_servers_that_cannot_start_are_named_and_the_others_still_list(tmp_path: Path) -> None:
    servers = [server(), server("broken", "--exit-at-start"),
               ServerConfig("missing", command=str(tmp_path / "no-such-program"))]
    with ToolManager(servers, log_dir=tmp_path) as manager:
        listing = manager.list_all_tools().result(WAIT)
        assert {t.server for t in listing.tools} == {"calc"}
        assert set(listing.errors) == {"broken", "missing"}
        assert "exited" in listing.errors["broken"]
        assert "not found" in listing.errors["missing"]
        broken = manager.call_tool("broken", "add", {"a": 1, "b": 1}).result(WAIT)
        assert broken.status == "unavailable" and "'broken'" in broken.text
        assert "refusing to start" in broken.detail
        state = manager.state("broken")
        assert state.status == "failed" and "refusing to start" in state.detail
        with pytest.raises(ServerDown):
            manager.list_tools("missing").result(WAIT)


def test_a_server_that_never_answers_the_handshake_times_out(tmp_path: Path) -> None:
    silent = ServerConfig("silent", command=sys.executable,
                          args=("-c", "import time; time.sleep(120)"))
    with ToolManager([silent], log_dir=tmp_path, connect_timeout=1) as manager:
        result = manager.call_tool("silent", "add", {}).result(WAIT)
        assert result.status == "unavailable" and "did not answer within 1 s" in result.text


def test_off_and_unknown_servers_are_not_started(tmp_path: Path) -> None:
    off = ServerConfig("off", command=str(tmp_path / "never-run"), enabled=False)
    with ToolManager([off], log_dir=tmp_path) as manager:
        assert "turned off" in manager.call_tool("off", "x", {}).result(WAIT).text
        assert "no such server" in manager.call_tool("nope", "x", {}).result(WAIT).text
        assert manager.list_all_tools().result(WAIT).tools == ()  # off servers are skipped
        assert manager.state("off").status == "stopped"


def test_a_changed_server_restarts_and_close_stops_every_server(tmp_path: Path) -> None:
    manager = ToolManager([server(), server("other")], log_dir=tmp_path)
    try:
        calc, other = pid_of(manager), pid_of(manager, "other")
        manager.configure([server("calc", "--name", "renamed"), server("other")]).result(WAIT)
        assert gone(calc)
        assert pid_of(manager) != calc and pid_of(manager, "other") == other
        assert [s.name for s in manager.servers()] == ["calc", "other"]
    finally:
        manager.close()
    assert gone(other)
    with pytest.raises(RuntimeError):
        manager.call_tool("calc", "pid", {})


@pytest.fixture
def http_server() -> Iterator[str]:
    """The helper serving streamable HTTP to clients with the right bearer token."""
    proc = subprocess.Popen([sys.executable, str(HELPER), "--http", "s3cret"],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())  # printed once it listens
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(WAIT)
        if proc.stdout is not None:
            proc.stdout.close()


def test_a_streamable_http_server_gets_the_configured_headers(
        http_server: str, tmp_path: Path) -> None:
    servers = [ServerConfig("web", url=http_server, headers={"Authorization": "Bearer s3cret"}),
               ServerConfig("anonymous", url=http_server)]
    with ToolManager(servers, log_dir=tmp_path) as manager:
        echo = manager.call_tool("web", "echo", {"text": "over http"}).result(WAIT)
        assert (echo.status, echo.text) == ("ok", "over http")
        assert "add" in {t.name for t in manager.list_tools("web").result(WAIT)}
        refused = manager.call_tool("anonymous", "echo", {"text": "x"}).result(WAIT)
        assert refused.status == "unavailable" and "HTTP 401" in refused.text
