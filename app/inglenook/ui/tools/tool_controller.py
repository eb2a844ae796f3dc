"""The window's MCP tool servers: mcp.json, and the ToolManager that runs them.

The manager (and the MCP SDK it imports, ~0.7 s) is made on first use: a window whose chats use
no tools never pays for it. Its futures complete on the manager's thread; their results come
back here through ui/tasks (on the GUI thread), so the GUI thread never waits on a tool. A
reply's turn lists its chat's tools with `listing`, which waits: it runs on the turn's thread
(chat/turn.py), and may be the first use.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QWidget

from inglenook.tools import results
from inglenook.tools.catalog import ToolCatalog
from inglenook.tools.config import (
    McpConfig,
    ServerConfig,
    load_config,
    save_config,
    set_server_enabled,
)
from inglenook.tools.results import ToolResult
from inglenook.ui import tasks

if TYPE_CHECKING:
    from inglenook.tools.manager import ToolManager

DEFAULT_CALL_TIMEOUT = 60.0  # tools.manager's; repeated so that importing it waits for use


class ToolController(QObject):
    """Signals:
        servers_changed(): mcp.json was read again or saved.
        server_state(object): a server started, runs, failed or stopped (ServerState).
    """

    servers_changed = Signal()
    server_state = Signal(object)

    def __init__(self, parent: QWidget) -> None:
        super().__init__(parent)
        self.call_timeout = DEFAULT_CALL_TIMEOUT
        self.config: McpConfig = load_config()
        self._manager: ToolManager | None = None
        self._manager_lock = threading.Lock()  # made on the GUI thread or on a turn's
        self._closed = False
        self._waiting: set[tasks.Task] = set()  # dropped at close: their answers with them

    # ---- configuration ------------------------------------------------------------------
    @property
    def started(self) -> bool:
        return self._manager is not None

    def servers(self) -> tuple[ServerConfig, ...]:
        return self.config.servers

    def enabled(self) -> tuple[str, ...]:
        """The servers that are on in mcp.json (a chat uses those of them it names)."""
        return tuple(s.name for s in self.config.enabled)

    def reload(self) -> None:
        self.config = load_config()
        if self._manager is not None:
            self._manager.configure(self.config.servers)
        self.servers_changed.emit()

    def save(self, servers: Sequence[ServerConfig]) -> None:
        """Write mcp.json (ConfigError, OSError for the caller to show) and use it."""
        save_config(servers)
        self.reload()

    def set_enabled(self, name: str, enabled: bool) -> None:
        """Turn one server on or off in mcp.json as it is on disk (hand edits kept)."""
        set_server_enabled(name, enabled)
        self.reload()

    # ---- work on the manager's thread ---------------------------------------------------
    def manager(self) -> ToolManager:
        """RuntimeError once closed (a turn still gathering at quit must not start another)."""
        with self._manager_lock:
            if self._closed:
                raise RuntimeError("The tool servers were stopped.")
            if self._manager is None:
                from inglenook.tools.manager import ToolManager  # the MCP SDK: only when used

                self._manager = ToolManager(self.config.servers,
                                            on_state=self.server_state.emit)
            return self._manager

    def listing(self, servers: Sequence[str]) -> tuple[ToolCatalog, Mapping[str, str]]:
        """The tools of these servers as one catalog, and why any could not be listed. It
        waits for them: call it off the GUI thread (chat/turn.py's gather does)."""
        try:
            outcome = self.manager().list_all_tools(list(servers)).result()
        except Exception as exc:  # closed meanwhile: the listing was cancelled
            return ToolCatalog(()), {"": str(exc) or type(exc).__name__}
        return ToolCatalog(outcome.tools), dict(outcome.errors)

    def list_tools(self, server: str, done: Callable[[object], None]) -> None:
        """`done(tuple of ToolInfo | Exception)` on this thread."""
        self._when_done(self.manager().list_tools(server), done)

    def call(self, server: str, tool: str, arguments: Mapping[str, Any],
             done: Callable[[ToolResult], None]) -> None:
        def called(outcome: object) -> None:
            done(outcome if isinstance(outcome, ToolResult) else
                 results.failed(str(outcome) or type(outcome).__name__))

        future = self.manager().call_tool(server, tool, arguments, timeout=self.call_timeout)
        self._when_done(future, called)

    def close(self) -> None:
        """Stop every server (on quit); safe to call when none ran."""
        with self._manager_lock:
            manager, self._manager, self._closed = self._manager, None, True
        for task in self._waiting:
            task.cancel()
        self._waiting.clear()
        if manager is not None:
            manager.close()

    def _when_done(self, future: Future[Any], done: Callable[[object], None]) -> None:
        """done(the result or the exception), on this thread; a cancelled future: never."""
        def finished(outcome: object) -> None:
            self._waiting.discard(task)
            done(outcome)

        task = tasks.from_future(future, on_done=finished, on_failed=finished, owner=self,
                                 name="mcp")
        self._waiting.add(task)
