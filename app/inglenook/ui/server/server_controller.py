"""The API server living in the window: on and off, its status in the status bar, and its
requests sharing the engine (and the queue) with the chats."""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QWidget

from inglenook.core.settings import Settings, SettingsValueError
from inglenook.engine.worker import EngineWorker
from inglenook.models.download_queue import DownloadManager
from inglenook.server.api_server import ApiServer
from inglenook.server.config import ConfigError, ServerConfig, is_loopback
from inglenook.server.connect import guides
from inglenook.server.status import ServerStatus
from inglenook.ui.app_settings import AppSettings
from inglenook.ui.server.connect_dialog import ConnectDialog
from inglenook.ui.server.server_dialog import ServerDialog


class ServerController(QObject):
    """Signals:
    status_changed(object): the latest ServerStatus (re-emitted on the GUI thread).
    shown(object): the ServerStatus shown now (the status bar's indicator follows it).
    """

    status_changed = Signal(object)
    shown = Signal(object)

    def __init__(self, worker: EngineWorker, app_settings: AppSettings,
                 parent: QWidget,
                 downloads: DownloadManager | None = None) -> None:
        super().__init__(parent)
        self.worker = worker
        self.downloads = downloads  # the window's queue: Ollama's pulls show there
        self.app = app_settings
        self._parent = parent
        self.server: ApiServer | None = None
        self.error = ""
        self._dialog: ServerDialog | None = None
        self._connect: ConnectDialog | None = None
        self.status_changed.connect(self._show)

    @property
    def settings(self) -> Settings:
        return self.app.value

    @property
    def running(self) -> bool:
        return self.server is not None

    def show_dialog(self) -> None:
        if self._dialog is None:
            self._dialog = ServerDialog(self.settings, self._parent)
            self._dialog.switched.connect(self.switch)
            self._dialog.dialects_changed.connect(self.restart)
        self._dialog.load(self.settings)
        self._show(self.server.status() if self.server else ServerStatus())
        self._dialog.show()

    def show_connect(self) -> None:
        """Connect an app…: the settings for the server as it runs, or as it is set."""
        if self._connect is None:
            self._connect = ConnectDialog(self._parent)
            self._connect.start_requested.connect(self._start_for_connect)
        self._fill_connect()
        self._connect.show()

    def _fill_connect(self) -> None:
        if self._connect is None:
            return
        s = self.settings
        status = self.server.status() if self.server else None
        host = s.api_host if is_loopback(s.api_host) else "127.0.0.1"  # from this computer
        url = status.url if status and status.url else f"http://{host}:{s.api_port}"
        model = self.worker.model
        self._connect.set_guides(
            guides(url, model.name if model else "", (s.api_token.split() or [""])[0],
                   model.n_ctx if model else 8192),
            self.server is not None, url, self.error)

    def _start_for_connect(self) -> None:
        self.switch(True)
        self._fill_connect()  # on, with its address; or why it did not start

    def switch(self, on: bool) -> None:
        changes = self._dialog.changes() if self._dialog is not None else {}
        try:
            self.app.update(**changes, api_enabled=on)
        except SettingsValueError as exc:  # nothing kept; the server stays as it was
            self.error = str(exc)
            self._show(self.server.status() if self.server else ServerStatus())
            return
        self.start() if on else self.stop()

    def restart(self) -> None:
        """Serve again with the dialog's settings, when serving (a route added or taken away
        needs a new app; clients reconnect)."""
        if self.server is not None:
            self.stop()
            self.switch(True)

    def start(self) -> None:
        if self.server is not None:
            return
        config = self._dialog.config() if self._dialog else self._config()
        try:
            server = ApiServer(*self.worker.api_engine(), config,
                               on_engine_lost=self.worker.report_crash,
                               on_status=self.status_changed.emit,
                               downloads=self.downloads)
            server.start()
        except (ConfigError, OSError) as exc:
            self.error = f"The server did not start: {exc}"
            self.app.set("api_enabled", False)
            self._show(ServerStatus())
            return
        self.server, self.error = server, ""
        self._show(server.status())

    def stop(self) -> None:
        server, self.server = self.server, None
        if server is not None:
            server.stop()
        self._show(ServerStatus())

    def _config(self) -> ServerConfig:
        s = self.settings
        return ServerConfig(host=s.api_host, port=s.api_port, token=s.api_token,
                            cors_origins=tuple(s.api_cors_origins.split()), ollama=s.api_ollama,
                            fetch_images=s.api_fetch_images, allow_pull=s.api_allow_pull,
                            isolate_clients=s.api_isolate_clients)

    def _show(self, status: ServerStatus) -> None:
        if self._dialog is not None:
            self._dialog.show_status(status, self.error)
        if self._connect is not None and self._connect.isVisible() and \
                status.running != self._connect.running:
            self._fill_connect()  # the server went on or off
        self.shown.emit(status)
