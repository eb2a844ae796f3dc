"""The API server's switch and settings: address, port, token, browser origins, live status."""

from __future__ import annotations

import secrets
import time

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from inglenook.core.settings import Settings
from inglenook.server.config import OLLAMA_PORT, ServerConfig
from inglenook.server.status import RequestRecord, ServerStatus
from inglenook.ui.plain import plain_label, plain_tip
from inglenook.ui.widgets.content_height import fit_to_content

LOCAL = "127.0.0.1"
ANYWHERE = "0.0.0.0"


LOG_COLUMNS = ["Time", "Status", "Request", "Model", "Tokens", "Took", "From"]
ROLE_AT = Qt.ItemDataRole.UserRole


def log_row(r: RequestRecord) -> list[str]:
    """A request's row; text only (the route and model name come from outside)."""
    cached = f" ({r.cached_tokens:,} cached)" if r.cached_tokens else ""
    tokens = (f"{r.prompt_tokens:,} in{cached}, {r.generated_tokens:,} out"
              if r.prompt_tokens or r.generated_tokens else "")
    took = f"{r.seconds * 1000:.0f} ms" if r.seconds < 10 else f"{r.seconds:.1f} s"
    status = str(r.status) if r.status else "—"
    return [time.strftime("%H:%M:%S", time.localtime(r.at)), f"{status} {r.outcome}".strip(),
            f"{r.method} {r.route}" + (f" · {r.fetched}" if r.fetched else ""), r.model,
            tokens, took, r.client]


class ServerDialog(QDialog):
    """Signals:
    switched(bool): the user turned the server on or off.
    dialects_changed(): the user turned Ollama's API on or off (a running server restarts).
    """

    switched = Signal(bool)
    dialects_changed = Signal()

    def __init__(self, settings: Settings, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("serverDialog")
        self.setWindowTitle("Local API server")
        intro = QLabel("Serve the loaded model to other programs on an OpenAI-compatible API "
                       "(editors, scripts, agents). They share the model with your chats, "
                       "several replies at once; a request may name another model of the "
                       "library, which is loaded for it.", self)
        intro.setWordWrap(True)
        isolation = plain_label(
            "What is kept apart: a request never reuses your chats' KV cache, and each token "
            "has a cache of its own (give each tool its own token: several, separated by "
            "spaces). Clients without a token share one cache between them: by timing how "
            "fast a prompt is read, one can learn what another sent, never what your chats "
            "hold. On a computer shared with others, give tokens or keep clients apart.", self,
            name="serverIsolation")
        isolation.setWordWrap(True)
        self.enabled = QCheckBox("Serve the loaded model", self)
        self.enabled.setObjectName("serverSwitch")
        self.host = QComboBox(self)
        self.host.setObjectName("serverHost")
        self.host.setEditable(True)
        self.host.addItem("This computer only (127.0.0.1)", LOCAL)
        self.host.addItem("Other computers too (0.0.0.0, needs a token)", ANYWHERE)
        self.port = QSpinBox(self)
        self.port.setObjectName("serverPort")
        self.port.setRange(1, 65535)
        self.token = QLineEdit(self)
        self.token.setObjectName("serverToken")
        self.token.setPlaceholderText("none (allowed on 127.0.0.1 only)")
        self.token.setEchoMode(QLineEdit.EchoMode.PasswordEchoOnEdit)
        self.token.setAccessibleName("Token")
        generate = QPushButton("New token", self)
        generate.setToolTip("Make a new random token")
        generate.clicked.connect(lambda: self.token.setText(secrets.token_urlsafe(24)))
        add = QPushButton("Add a token", self)
        add.setObjectName("serverAddToken")
        add.setToolTip("Another token beside these, for another tool: each token's clients "
                       "have a KV cache of their own")
        add.clicked.connect(lambda: self.token.setText(
            " ".join([*self.token.text().split(), secrets.token_urlsafe(24)])))
        token_row = QHBoxLayout()
        token_row.addWidget(self.token, 1)
        token_row.addWidget(generate)
        token_row.addWidget(add)
        self.ollama = QCheckBox("Answer Ollama's API too (/api/chat, /api/tags…)", self)
        self.ollama.setObjectName("serverOllama")
        use_port = QPushButton(f"Use Ollama's port {OLLAMA_PORT}", self)
        use_port.setObjectName("serverOllamaPort")
        use_port.setToolTip(f"Ollama's clients look on port {OLLAMA_PORT} unless told "
                            "otherwise (Ollama itself must not be running on it)")
        use_port.clicked.connect(lambda: self.port.setValue(OLLAMA_PORT))
        self.ollama.toggled.connect(use_port.setEnabled)
        use_port.setEnabled(False)
        ollama_row = QHBoxLayout()
        ollama_row.addWidget(self.ollama, 1)
        ollama_row.addWidget(use_port)
        self.fetch = QCheckBox("Fetch images that requests name by an http(s) URL", self)
        self.fetch.setObjectName("serverFetchImages")
        self.pull = QCheckBox("Let clients download models (Ollama's pull)", self)
        self.pull.setObjectName("serverAllowPull")
        self.ollama.toggled.connect(
            lambda on: self.pull.setEnabled(on and not self.enabled.isChecked()))
        self.isolate = QCheckBox("Keep each client's cache to itself", self)
        self.isolate.setObjectName("serverIsolateClients")
        self.origins = QLineEdit(self)
        self.origins.setObjectName("serverOrigins")
        self.origins.setPlaceholderText("e.g. http://localhost:3000 (none: no browser pages)")
        for widget, tip in (
                (self.enabled, "Start or stop the local API server"),
                (self.host, "Which network addresses the server listens on"),
                (self.port, "The TCP port the server listens on"),
                (self.token, "Clients must send it (one of them) as a bearer token; needed "
                             "off 127.0.0.1. Several, separated by spaces: one per tool"),
                (self.origins, "Web pages from these origins may call the API"),
                (self.fetch, "Off: a request must send its images as data: URLs, and nothing "
                             "is fetched. On: this computer downloads an image a request names "
                             "by URL (public addresses only, up to 32 MiB), on the client's "
                             "behalf"),
                (self.pull, "Off: Ollama's /api/pull is refused. On: a client may download a "
                            "GGUF model from the Hugging Face Hub (hf.co/owner/repo:QUANT) into "
                            "the models folder; it shows under Models → Downloads"),
                (self.isolate, "For a computer shared with others: clients without a token "
                               "never reuse one another's prompt cache (each by its address "
                               "and 'user', else its connection), so none can learn what "
                               "another sent; repeated prompts between clients are read "
                               "again"),
                (self.ollama, "For tools that speak only Ollama's API (VS Code Copilot's Ollama "
                              "provider, Goose, n8n, Raycast…): the same security, a second "
                              "dialect on the same port")):
            widget.setToolTip(tip)
        form = QFormLayout()
        form.addRow("Address", self.host)
        form.addRow("Port", self.port)
        form.addRow("Token", token_row)
        form.addRow("Browser origins", self.origins)
        form.addRow("Dialects", ollama_row)
        form.addRow("Images", self.fetch)
        form.addRow("Downloads", self.pull)
        form.addRow("Prompt cache", self.isolate)
        self.status = plain_label("", self, name="serverStatus")  # errors quote clients
        self.status.setWordWrap(True)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.log_title = plain_label("Recent requests (what was asked, never what was said)",
                                     self, name="serverLogTitle")
        self.log = QTreeWidget(self)
        self.log.setObjectName("serverLog")
        self.log.setAccessibleName("Recent requests")
        self.log.setRootIsDecorated(False)
        self.log.setUniformRowHeights(True)
        self.log.setHeaderLabels(LOG_COLUMNS)
        self.log.header().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.log.setMinimumHeight(140)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        buttons.button(QDialogButtonBox.StandardButton.Close).setToolTip("Close this window")
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(intro)
        layout.addWidget(isolation)
        layout.addWidget(self.enabled)
        layout.addLayout(form)
        layout.addWidget(self.status)
        layout.addWidget(self.log_title)
        layout.addWidget(self.log, 1)
        layout.addWidget(buttons)
        self.load(settings)
        self.enabled.toggled.connect(self.switched)
        self.ollama.toggled.connect(lambda _on: self.dialects_changed.emit())
        self._height = fit_to_content(self, 820)

    def load(self, settings: Settings) -> None:
        index = self.host.findData(settings.api_host)
        if index >= 0:
            self.host.setCurrentIndex(index)
        else:
            self.host.setEditText(settings.api_host)
        self.port.setValue(settings.api_port)
        self.token.setText(settings.api_token)
        self.origins.setText(settings.api_cors_origins)
        self.ollama.setChecked(settings.api_ollama)
        self.fetch.setChecked(settings.api_fetch_images)
        self.pull.setChecked(settings.api_allow_pull)
        self.pull.setEnabled(settings.api_ollama and not self.enabled.isChecked())
        self.isolate.setChecked(settings.api_isolate_clients)

    def config(self) -> ServerConfig:
        host = self.host.currentData() if self.host.currentText() == self.host.itemText(
            self.host.currentIndex()) else self.host.currentText().strip()
        return ServerConfig(host=host or LOCAL, port=self.port.value(),
                            token=self.token.text().strip(),
                            cors_origins=tuple(self.origins.text().split()),
                            ollama=self.ollama.isChecked(), fetch_images=self.fetch.isChecked(),
                            isolate_clients=self.isolate.isChecked(),
                            allow_pull=self.pull.isChecked())

    def changes(self) -> dict[str, object]:
        """The settings this dialog shows, for AppSettings.update()."""
        config = self.config()
        return {"api_host": config.host, "api_port": config.port, "api_token": config.token,
                "api_cors_origins": " ".join(config.cors_origins), "api_ollama": config.ollama,
                "api_fetch_images": config.fetch_images, "api_allow_pull": config.allow_pull,
                "api_isolate_clients": config.isolate_clients}

    def show_status(self, status: ServerStatus, error: str = "") -> None:
        for widget in (self.host, self.port, self.token, self.origins, self.fetch, self.isolate):
            widget.setEnabled(not status.running)  # change them with the server off
        self.pull.setEnabled(not status.running and self.ollama.isChecked())
        if error:
            self.status.setText(error)
        elif status.running:
            self.status.setText(
                f"Serving at {status.url}/v1 — {status.requests} requests, "
                f"{status.active} now, {status.tokens:,} tokens, last "
                f"{status.tokens_per_s:.1f} tok/s"
                + (f". Last error: {status.last_error}" if status.last_error else "."))
        else:
            self.status.setText("Off.")
        self.enabled.blockSignals(True)
        self.enabled.setChecked(status.running)
        self.enabled.blockSignals(False)
        self._show_log(status.recent)

    def _show_log(self, recent: tuple[RequestRecord, ...]) -> None:
        """Newest first; rebuilt only when a request was added (a status change per reply,
        not per token)."""
        newest = self.log.topLevelItem(0)
        if self.log.topLevelItemCount() == len(recent) and (
                not recent or (newest is not None and newest.data(0, ROLE_AT) == recent[-1].at)):
            return
        self.log.clear()
        for r in reversed(recent):
            item = QTreeWidgetItem(log_row(r))
            item.setData(0, ROLE_AT, r.at)
            if r.outcome:
                item.setToolTip(LOG_COLUMNS.index("Status"), plain_tip(r.outcome))
            self.log.addTopLevelItem(item)
