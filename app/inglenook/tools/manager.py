"""MCP tool servers, run with the official SDK on a thread of their own.

Threading contract: every public method may be called from any thread and returns at once.
Work runs on the manager's thread (one asyncio event loop for all servers) and completes a
`concurrent.futures.Future`. A future's done-callbacks run on the manager's thread (or at
once, in the adding thread, when it is already done), as does `on_state`: a Qt caller
re-emits from them as a queued signal and never blocks the GUI thread on `result()`.

A server starts on first use, not at construction; one that crashes or hangs is stopped and
starts again on the next use. `close()` stops them all (each stdio server is sent EOF, then
SIGTERM, then SIGKILL by the SDK) and ends the thread.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
import threading
from collections.abc import Callable, Coroutine, Iterable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from inglenook import paths
from inglenook.tools import results
from inglenook.tools.catalog import ToolInfo
from inglenook.tools.config import ServerConfig
from inglenook.tools.connection import ServerConnection, ServerDown, ServerState
from inglenook.tools.results import ToolResult

DEFAULT_CALL_TIMEOUT = 60.0
DEFAULT_CONNECT_TIMEOUT = 30.0  # `npx -y some-server` may download it first
DEFAULT_PING_TIMEOUT = 5.0  # after a call timed out: is the server still there?
T = TypeVar("T")
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ToolListing:
    tools: tuple[ToolInfo, ...] = ()
    errors: Mapping[str, str] = field(default_factory=dict)  # server → why it has no tools


class ToolManager:
    def __init__(self, servers: Iterable[ServerConfig] = (), *, log_dir: Path | None = None,
                 connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
                 ping_timeout: float = DEFAULT_PING_TIMEOUT,
                 on_state: Callable[[ServerState], None] | None = None) -> None:
        self._configs: dict[str, ServerConfig] = {s.name: s for s in servers}
        self._log_dir = log_dir or paths.mcp_log_dir()
        self._connect_timeout = connect_timeout
        self._ping_timeout = ping_timeout
        self._on_state = on_state
        self._connections: dict[str, ServerConnection] = {}  # the loop's thread only
        self._states: dict[str, ServerState] = {}
        self._closed = False
        self._lock = threading.Lock()  # _closed and submitting, against close()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run_loop, name="inglenook-mcp", daemon=True)
        self._thread.start()

    def __enter__(self) -> ToolManager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- any thread ---------------------------------------------------------------------------
    def servers(self) -> tuple[ServerConfig, ...]:
        return tuple(self._configs.values())

    def state(self, name: str) -> ServerState:
        return self._states.get(name, ServerState(name, "stopped"))

    def configure(self, servers: Iterable[ServerConfig]) -> Future[None]:
        """Use these servers from now on; running ones whose entry changed or went are
        stopped (a changed one starts again, as configured now, on its next use)."""
        return self._submit(self._configure({s.name: s for s in servers}))

    def list_tools(self, server: str, refresh: bool = False) -> Future[tuple[ToolInfo, ...]]:
        """One server's tools, started if needed. The future raises ServerDown."""
        return self._submit(self._list(server, refresh))

    def list_all_tools(self, servers: Iterable[str] | None = None) -> Future[ToolListing]:
        """The tools of these servers (all enabled ones by default), listed side by side; a
        server that fails is named in `errors`, the others still count."""
        names = None if servers is None else list(servers)
        return self._submit(self._list_all(names))

    def call_tool(self, server: str, tool: str, arguments: Mapping[str, Any], *,
                  timeout: float = DEFAULT_CALL_TIMEOUT) -> Future[ToolResult]:
        """Run a tool (approval is the caller's business). The future always gives a
        ToolResult, failures included: its text is what the model is told. `timeout` is for
        the call itself (starting the server has `connect_timeout`). Cancelling the future
        abandons the call; the server is told so."""
        return self._submit(self._call(server, tool, dict(arguments), timeout))

    def stop_server(self, name: str) -> Future[None]:
        return self._submit(self._stop(name))

    def close(self, timeout: float = 15.0) -> None:
        """Stop every server and the thread. Not from a done-callback (the manager's thread)."""
        if threading.current_thread() is self._thread:
            raise RuntimeError("ToolManager.close() called from its own thread")
        with self._lock:
            if self._closed:
                return
            self._closed = True
            stopping = asyncio.run_coroutine_threadsafe(self._stop_all(), self._loop)
        try:
            stopping.result(timeout)
        except Exception:
            log.exception("MCP servers did not all stop cleanly")
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout)

    # -- the manager's thread -----------------------------------------------------------------
    def _run_loop(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_forever()
        finally:
            # Calls still in flight (close() timed out): their futures end cancelled.
            pending = asyncio.all_tasks(self._loop)
            for task in pending:
                task.cancel()
            self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            self._loop.run_until_complete(self._loop.shutdown_asyncgens())
            self._loop.run_until_complete(self._loop.shutdown_default_executor())
            self._loop.close()

    def _submit(self, coro: Coroutine[Any, Any, T]) -> Future[T]:
        with self._lock:
            if self._closed:
                coro.close()
                raise RuntimeError("The tool manager is closed.")
            return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def _connection(self, name: str) -> ServerConnection:
        config = self._configs.get(name)
        if config is None:
            raise ServerDown("there is no such server")
        if not config.enabled:
            raise ServerDown("it is turned off")
        connection = self._connections.get(name)
        if connection is None:
            connection = self._connections[name] = ServerConnection(
                config, self._log_dir / _log_name(name), connect_timeout=self._connect_timeout,
                ping_timeout=self._ping_timeout, on_state=self._state_changed)
        return connection

    def _state_changed(self, state: ServerState) -> None:
        self._states[state.name] = state
        if self._on_state is not None:
            try:
                self._on_state(state)
            except Exception:  # a listener's bug must not stop the servers
                log.exception("on_state callback failed")

    async def _configure(self, configs: dict[str, ServerConfig]) -> None:
        self._configs = configs
        for name, connection in list(self._connections.items()):
            if configs.get(name) != connection.config:
                del self._connections[name]
                await connection.stop()

    async def _list(self, server: str, refresh: bool) -> tuple[ToolInfo, ...]:
        return await self._connection(server).tools(refresh)

    async def _list_all(self, names: list[str] | None) -> ToolListing:
        if names is None:
            names = [s.name for s in self._configs.values() if s.enabled]
        listed = await asyncio.gather(*(self._list(n, False) for n in names),
                                      return_exceptions=True)
        tools: list[ToolInfo] = []
        errors: dict[str, str] = {}
        for name, outcome in zip(names, listed, strict=True):
            if isinstance(outcome, BaseException):
                if not isinstance(outcome, Exception):
                    raise outcome  # cancellation
                errors[name] = str(outcome) or type(outcome).__name__
            else:
                tools += outcome
        return ToolListing(tuple(tools), errors)

    async def _call(self, server: str, tool: str, arguments: dict[str, Any],
                    timeout: float) -> ToolResult:
        try:
            connection = self._connection(server)
        except ServerDown as exc:
            return results.unavailable(server, str(exc))
        return await connection.call(tool, arguments, timeout)

    async def _stop(self, name: str) -> None:
        connection = self._connections.pop(name, None)
        if connection is not None:
            await connection.stop()

    async def _stop_all(self) -> None:
        await asyncio.gather(*(self._stop(name) for name in list(self._connections)))


def _log_name(server: str) -> str:
    """A file name per server name; two names that read the same once cleaned stay apart."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", server)[:48]
    if safe != server:
        safe += "-" + hashlib.sha1(server.encode()).hexdigest()[:8]
    return f"{safe}.log"
