"""The API server as an object the CLI and the window can start and stop: uvicorn on its own
thread, answering from an engine it shares through the scheduler.

    server = ApiServer(worker.scheduler, worker.client, ServerConfig(port=8080))
    server.start()            # binds now: a port in use raises OSError here
    server.status()           # ServerStatus: requests, tokens/s, last error
    server.stop()             # stops API replies, then the server; the engine stays
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import threading
from collections.abc import Callable

import uvicorn

from inglenook.engine.client import EngineClient
from inglenook.engine.router import EngineRouter
from inglenook.engine.scheduler import Scheduler
from inglenook.models.download_queue import DownloadManager
from inglenook.server.config import ServerConfig
from inglenook.server.connections import ConnectionGuard, guarded_protocol, most_connections
from inglenook.server.engine_link import EngineLink
from inglenook.server.routes import build_app
from inglenook.server.status import ServerStatus, StatusBoard

log = logging.getLogger(__name__)
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0
GRACEFUL_S = 3  # how long stop() lets open responses finish after their replies are stopped
BACKLOG = 64


class ApiServer:
    """`on_engine_lost(message)` runs on the engine thread when the engine died during an API
    reply; `on_status(ServerStatus)` on the server's thread whenever a figure changes."""

    def __init__(self, scheduler: Scheduler, client: EngineClient | EngineRouter,
                 config: ServerConfig,
                 on_engine_lost: Callable[[str], None] | None = None,
                 on_status: Callable[[ServerStatus], None] | None = None,
                 downloads: DownloadManager | None = None) -> None:
        config.check()
        self.config = config
        self.downloads = downloads  # Ollama's pulls go through it (the window's queue)
        self.board = StatusBoard(on_status)
        self.link = EngineLink(scheduler, client, config.max_pending, self.board, on_engine_lost)
        self._started = threading.Event()
        self._server: uvicorn.Server | None = None
        self._socket: socket.socket | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return self.board.get().url

    def status(self) -> ServerStatus:
        return self.board.get()

    def start(self) -> str:
        """Bind and serve; returns the URL. Raises OSError when the address cannot be bound."""
        if self._thread is not None:
            raise RuntimeError("the server is already running")
        sock = _bind(self.config.host, self.config.port)
        port = sock.getsockname()[1]
        app = build_app(self.link, self.config, self.board, self._started.set, self.downloads)
        # Connections are bounded by the guard (server/connections.py): uvicorn's own limit
        # counted half-open ones too, and answered everyone 503 while they lasted.
        # The backlog is also how many connections asyncio accepts in one go before the guard
        # sees any of them (uvicorn's 2,048 let a burst take every file descriptor).
        guard = ConnectionGuard(most_connections())
        self._server = uvicorn.Server(uvicorn.Config(
            app, loop="asyncio", http=guarded_protocol(guard), ws="none", lifespan="on",
            log_config=None, access_log=False, proxy_headers=False, server_header=False,
            limit_concurrency=2 * guard.total, backlog=BACKLOG,
            timeout_graceful_shutdown=GRACEFUL_S))
        self._socket = sock
        self._started.clear()
        self._thread = threading.Thread(target=self._serve, args=(self._server, sock),
                                        daemon=True, name="api-server")
        self._thread.start()
        self._started.wait(START_TIMEOUT_S)
        url = ServerConfig(host=self.config.host, port=port).url
        if not self._thread.is_alive():
            self.stop()
            raise OSError(f"The API server could not start on {url}; see the log.")
        self.board.update(running=True, url=url, last_error="")
        return url

    def _serve(self, server: uvicorn.Server, sock: socket.socket) -> None:
        try:
            asyncio.run(server.serve(sockets=[sock]))
        except BaseException as exc:  # SystemExit from uvicorn included: report, don't die
            log.exception("the API server stopped")
            self.board.update(last_error=f"The API server stopped: {exc}")
        finally:
            self._started.set()  # a start() still waiting learns it failed
            self.board.update(running=False)

    def stop(self) -> None:
        """Stop every API reply (waiting or running), then the server. Safe to call twice."""
        self.link.cancel_all()
        server, thread, sock = self._server, self._thread, self._socket
        self._server = self._thread = self._socket = None
        if server is not None:
            server.should_exit = True
        if thread is not None:
            thread.join(STOP_TIMEOUT_S + GRACEFUL_S)
            if thread.is_alive() and server is not None:
                server.force_exit = True
                thread.join(STOP_TIMEOUT_S)
        if sock is not None:
            sock.close()
        self.board.update(running=False)


def _bind(host: str, port: int) -> socket.socket:
    family, _, _, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            with contextlib.suppress(OSError):  # "::" serves IPv4 as well where allowed
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        sock.bind(address)
        sock.listen(BACKLOG)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock
