"""One MCP server's session, on the tool manager's event loop (see manager.py).

The official SDK's transports and ClientSession are async context managers that must be
entered and left by the same task, so each connection is one task (a `_Run`) that opens them,
serves calls made from other tasks, and closes them when told to or when the server goes away.
A server that dies, or stops answering after a call timed out, ends its run; the next use
starts a new one ("restart on next use"), so one bad call never leaves a tool broken for good.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterable, Callable, Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TextIO

import anyio
import mcp_types as types
from anyio.streams.memory import MemoryObjectSendStream
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage

from inglenook import __version__
from inglenook.tools import bounded_lines, results
from inglenook.tools.catalog import ToolInfo
from inglenook.tools.config import ServerConfig
from inglenook.tools.results import ToolResult

if sys.version_info < (3, 11):
    from exceptiongroup import BaseExceptionGroup

bounded_lines.install()  # a server's answers are read a bounded message at a time

ServerStatus = Literal["stopped", "starting", "running", "failed"]
CLIENT_INFO = types.Implementation(name="Inglenook", version=__version__)
STDERR_TAIL = 2000  # characters of a server's stderr quoted when it fails


@dataclass(frozen=True)
class ServerState:
    name: str
    status: ServerStatus
    error: str = ""  # why it failed, for the user
    detail: str = ""  # the end of what it wrote to stderr


class ServerDown(Exception):
    """The server could not be reached; str() says why, for the user."""

    def __init__(self, message: str, detail: str = "") -> None:
        super().__init__(message)
        self.detail = detail


class _Run:
    """One connection attempt and, if it succeeds, the session's lifetime."""

    def __init__(self) -> None:
        self.ready: asyncio.Future[ClientSession] = asyncio.get_running_loop().create_future()
        # Read once here: a caller that gave up leaves no "exception never retrieved".
        self.ready.add_done_callback(lambda f: f.cancelled() or f.exception())
        self.wake = asyncio.Event()  # stop requested, or the server went away
        self.over = False  # no new calls: a later use starts a new run
        self.tools: tuple[ToolInfo, ...] | None = None
        self.task: asyncio.Task[None] | None = None
        self.http_status = 0  # the last HTTP error status: the SDK's errors do not say it

    async def note_status(self, response: Any) -> None:
        if response.status_code >= 400:
            self.http_status = response.status_code

    def end(self) -> None:
        self.over = True
        self.wake.set()


class ServerConnection:
    """Runs on the manager's loop only; nothing here is thread-safe by design."""

    def __init__(self, config: ServerConfig, log_path: Path, *, connect_timeout: float,
                 ping_timeout: float, on_state: Callable[[ServerState], None]) -> None:
        self.config = config
        self.log_path = log_path
        self.connect_timeout = connect_timeout
        self.ping_timeout = ping_timeout
        self._on_state = on_state
        self._run: _Run | None = None
        self._ending: set[asyncio.Task[None]] = set()
        self.state = ServerState(config.name, "stopped")

    @property
    def name(self) -> str:
        return self.config.name

    # -- what the manager calls ---------------------------------------------------------------
    async def tools(self, refresh: bool = False) -> tuple[ToolInfo, ...]:
        """Raises ServerDown."""
        run, session = await self._session()
        if run.tools is None or refresh:
            try:
                with anyio.fail_after(self.connect_timeout):
                    run.tools = await self._list(session)
            except TimeoutError:
                raise ServerDown(f"it did not list its tools within "
                                 f"{self.connect_timeout:g} s") from None
            except MCPError as exc:
                if exc.code == types.CONNECTION_CLOSED:
                    self._fail(run, "the server stopped")
                raise ServerDown(_describe(exc), self._stderr_tail()) from None
        return run.tools

    async def _list(self, session: ClientSession) -> tuple[ToolInfo, ...]:
        listed: list[ToolInfo] = []
        cursor: str | None = None
        while True:
            params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await session.list_tools(params=params)
            listed += [ToolInfo(self.name, t.name, t.description or "", dict(t.input_schema),
                                t.title or "") for t in page.tools]
            cursor = page.next_cursor
            if not cursor:
                return tuple(listed)

    async def call(self, tool: str, arguments: Mapping[str, Any], timeout: float) -> ToolResult:
        try:
            run, session = await self._session()
        except ServerDown as exc:
            return results.unavailable(self.name, str(exc), exc.detail)
        try:
            with anyio.fail_after(timeout):
                reply = await session.call_tool(tool, dict(arguments))
        except TimeoutError:
            if not await self._responds(session):
                self._fail(run, "it stopped answering and was stopped; it restarts on next use")
            return results.timed_out(timeout)
        except MCPError as exc:
            if exc.code == types.CONNECTION_CLOSED:
                message = f"the server stopped while running {tool!r}"
                self._fail(run, message)
                return results.failed(message, self._stderr_tail())
            return results.failed(exc.message)
        except Exception as exc:  # a reply the SDK could not read
            return results.failed(_describe(exc))
        return results.from_content(list(reply.content), reply.structured_content,
                                    reply.is_error and not bounded_lines.was_cut(reply))

    async def stop(self) -> None:
        """End the session (and the server process) and wait until it is gone."""
        if self._run is not None:
            self._run.end()
            self._run = None
        while self._ending:
            await asyncio.gather(*self._ending, return_exceptions=True)
        self._set_state("stopped")

    # -- the run ------------------------------------------------------------------------------
    async def _session(self) -> tuple[_Run, ClientSession]:
        run = self._run
        if run is None or run.over:
            run = self._run = _Run()
            run.task = asyncio.get_running_loop().create_task(self._serve(run))
            self._ending.add(run.task)
            run.task.add_done_callback(self._ending.discard)
        # Shielded: a caller that gives up must not cancel the future other callers share.
        return run, await asyncio.shield(run.ready)

    async def _serve(self, run: _Run) -> None:
        self._set_state("starting")
        log = self.log_path.open("w", encoding="utf-8", errors="replace")
        try:
            async with AsyncExitStack() as stack:
                session = await self._open(stack, run, log)
                with anyio.fail_after(self.connect_timeout):
                    await session.initialize()
                run.ready.set_result(session)
                self._set_state("running")
                await run.wake.wait()
                if self._run is run:  # not stopped by us: the server went away by itself
                    self._fail(run, "the server stopped")
        except Exception as exc:
            cause = _first_cause(exc)
            message = (f"it did not answer within {self.connect_timeout:g} s"
                       if isinstance(cause, TimeoutError) else _describe(cause))
            if run.http_status:
                message += f" (HTTP {run.http_status})"
            run.over = True
            if not run.ready.done():
                run.ready.set_exception(ServerDown(message, self._stderr_tail()))
            if self._run is run:
                self._set_state("failed", message)
        finally:
            run.over = True
            if not run.ready.done():
                run.ready.set_exception(ServerDown("it was stopped"))
            log.close()

    async def _open(self, stack: AsyncExitStack, run: _Run, log: TextIO) -> ClientSession:
        """Transport, a relay that notices the server going away, and the session."""
        config = self.config
        if config.url:
            http = await stack.enter_async_context(
                create_mcp_http_client(headers=dict(config.headers) or None))
            http.event_hooks["response"].append(run.note_status)
            read, write = await stack.enter_async_context(
                streamable_http_client(config.url, http_client=http))
        else:
            params = StdioServerParameters(command=config.command, args=list(config.args),
                                           env=dict(config.env) or None, cwd=config.cwd or None)
            read, write = await stack.enter_async_context(stdio_client(params, errlog=log))
        relayed, receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        stack.callback(relayed.close)  # closed by the relay and the session, unless they
        stack.callback(receive.close)  # never ran: anyio warns about unclosed streams
        group = await stack.enter_async_context(anyio.create_task_group())
        stack.callback(group.cancel_scope.cancel)  # left before the group: stops the relay
        group.start_soon(_relay, read, relayed, run)
        return await stack.enter_async_context(
            ClientSession(receive, write, client_info=CLIENT_INFO,
                          message_handler=self._on_message))

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification) and self._run is not None:
            self._run.tools = None

    async def _responds(self, session: ClientSession) -> bool:
        with anyio.move_on_after(self.ping_timeout):
            try:
                await session.send_ping()
            except MCPError:
                return False
            return True
        return False

    def _fail(self, run: _Run, message: str) -> None:
        run.end()
        if self._run is run:
            self._run = None
        if self._run is None:  # not when a newer run has taken over meanwhile
            self._set_state("failed", message)

    def _set_state(self, status: ServerStatus, error: str = "") -> None:
        detail = self._stderr_tail() if status == "failed" else ""
        self.state = ServerState(self.name, status, error, detail)
        self._on_state(self.state)

    def _stderr_tail(self) -> str:
        with contextlib.suppress(OSError), self.log_path.open("rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - STDERR_TAIL))
            return f.read().decode("utf-8", "replace").strip()
        return ""


async def _relay(read: AsyncIterable[SessionMessage | Exception],
                 out: MemoryObjectSendStream[SessionMessage | Exception], run: _Run) -> None:
    """Pass the server's messages on to the session; when they end, the server is gone."""
    try:
        async with out:
            async for item in read:
                await out.send(item)
    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
        pass
    finally:
        run.end()


def _first_cause(exc: BaseException) -> BaseException:
    """The first real failure inside exception groups (anyio task groups wrap them)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _describe(exc: BaseException) -> str:
    """A failure in words, for the user."""
    exc = _first_cause(exc)
    if isinstance(exc, MCPError):
        closed = exc.code == types.CONNECTION_CLOSED
        return "the server exited before it answered" if closed else exc.message
    if isinstance(exc, FileNotFoundError):
        return f"the program {exc.filename or ''!s} was not found".replace("  ", " ")
    return str(exc) or type(exc).__name__
