"""The main window: model bar, conversation, composer, side panel and status bar."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QByteArray, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QCloseEvent, QKeySequence
from PySide6.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QMainWindow,
    QProgressBar,
    QPushButton,
    QSplitter,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from inglenook.core.load import ModelInfo
from inglenook.core.messages import GenerationRequest, Message, build_messages
from inglenook.core.replies import Finish, Stats
from inglenook.core.settings import Settings, load_settings, save_settings
from inglenook.engine.worker import EngineThread, EngineWorker
from inglenook.ui.chat_view import ChatView, MessageBubble
from inglenook.ui.composer import Composer
from inglenook.ui.model_picker import ModelPicker
from inglenook.ui.sampling_panel import SamplingPanel


class MainWindow(QMainWindow):
    """The chat window. Its signals fire on the GUI thread (tests and tools wait on these, never
    on the worker's, whose handlers would run on the worker thread).

    Signals:
        shown(): the window was shown for the first time (start-up timing).
        reply_started(int): a reply request was sent to the engine; its id.
        reply_finished(int, object): the reply ended; its id and Finish.
        model_ready(object): a model finished loading; its ModelInfo.
        engine_lost(str): the engine died; the message shown to the user.
    """

    shown = Signal()
    reply_started = Signal(int)
    reply_finished = Signal(int, object)
    model_ready = Signal(object)
    engine_lost = Signal(str)

    def __init__(self, worker: EngineWorker | None = None, settings: Settings | None = None,
                 autoload: bool = True) -> None:
        super().__init__()
        self.setWindowTitle("Inglenook")
        self.setObjectName("mainWindow")
        self.settings = settings or load_settings()
        self.turns: list[Message] = []
        self.model: ModelInfo | None = None
        self.loading = False
        self._next_id = 0
        self.current_id: int | None = None
        self.current_bubble: MessageBubble | None = None
        self.last_request: GenerationRequest | None = None
        self._shown_once = False
        self._closed = False
        self._build()
        self._pending: list[str] = []
        self._flush_timer = QTimer(self, singleShot=True, interval=0)
        self._flush_timer.timeout.connect(self._flush_pending)
        self._save_timer = QTimer(self, singleShot=True, interval=500)
        self._save_timer.timeout.connect(self.save_settings)

        self.worker = worker or EngineWorker()
        self.engine = EngineThread(self.worker)
        w = self.worker
        w.engine_ready.connect(self._on_engine_ready)
        w.model_loading.connect(self._on_model_loading)
        w.model_loaded.connect(self._on_model_loaded)
        w.model_load_failed.connect(self._on_model_load_failed)
        w.generation_started.connect(self._on_started)
        w.prompt_progress.connect(self._on_prompt_progress)
        w.token_delta.connect(self._on_delta)
        w.generation_stats.connect(self._on_stats)
        w.generation_finished.connect(self._on_finished)
        w.engine_crashed.connect(self._on_crashed)
        self.engine.start()
        self.refresh_models()
        if self.settings.window_geometry:
            self.restoreGeometry(QByteArray.fromBase64(self.settings.window_geometry.encode()))
        else:
            self.resize(1240, 820)
        if autoload and self.picker.path():
            self.load_model(self.picker.path())

    # ---- layout --------------------------------------------------------------------------
    def _build(self) -> None:
        top = QWidget(self)
        top.setObjectName("topBar")
        bar = QHBoxLayout(top)
        bar.setContentsMargins(16, 10, 16, 10)
        bar.setSpacing(10)
        title = QLabel("Inglenook", top)
        title.setObjectName("appTitle")
        self.picker = ModelPicker(top)
        self.picker.model_chosen.connect(self.load_model)
        self.picker.open_requested.connect(self.open_model)
        self.new_chat_button = QPushButton("New chat", top)
        self.new_chat_button.setObjectName("newChatButton")
        self.new_chat_button.setToolTip("Start a new conversation (Ctrl+N)")
        self.new_chat_button.clicked.connect(self.new_chat)
        self.panel_button = QToolButton(top)
        self.panel_button.setObjectName("panelButton")
        self.panel_button.setText("Settings")
        self.panel_button.setCheckable(True)
        self.panel_button.setToolTip("Show or hide the sampling and model settings")
        bar.addWidget(title)
        bar.addSpacing(12)
        bar.addWidget(self.picker)
        bar.addStretch(1)
        bar.addWidget(self.new_chat_button)
        bar.addWidget(self.panel_button)

        self.banner = QLabel(self)
        self.banner.setObjectName("banner")
        self.banner.setWordWrap(True)
        self.banner.setTextFormat(Qt.TextFormat.PlainText)
        self.banner.hide()
        self.reload_button = QPushButton("Reload model", self)
        self.reload_button.setObjectName("bannerReloadButton")
        self.reload_button.clicked.connect(self.reload_model)
        self.reload_button.hide()
        banner_row = QHBoxLayout()
        banner_row.setContentsMargins(16, 8, 16, 0)
        banner_row.addWidget(self.banner, 1)
        banner_row.addWidget(self.reload_button)

        self.chat = ChatView(self)
        self.chat.set_empty_text("Loading the model…")
        self.composer = Composer(self)
        self.composer.set_can_send(False)
        self.composer.send_requested.connect(self.send)
        self.composer.stop_requested.connect(self.stop)

        column = QWidget(self)
        column.setObjectName("chatColumn")
        column_layout = QVBoxLayout(column)
        column_layout.setContentsMargins(0, 0, 0, 0)
        column_layout.setSpacing(0)
        column_layout.addLayout(banner_row)
        column_layout.addWidget(self.chat, 1)
        column_layout.addWidget(self.composer)

        self.panel = SamplingPanel(self)
        self.panel.set_settings(self.settings)
        self.panel.settings_changed.connect(self._schedule_save)
        self.panel.reload_requested.connect(self.reload_model)
        self.panel.setVisible(self.settings.side_panel_visible)
        self.panel_button.setChecked(self.settings.side_panel_visible)
        self.panel_button.toggled.connect(self._toggle_panel)

        self.splitter = QSplitter(Qt.Orientation.Horizontal, self)
        self.splitter.setChildrenCollapsible(False)
        self.splitter.addWidget(column)
        self.splitter.addWidget(self.panel)
        self.splitter.setStretchFactor(0, 1)
        self.splitter.setStretchFactor(1, 0)

        central = QWidget(self)
        layout = QVBoxLayout(central)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(top)
        layout.addWidget(self.splitter, 1)
        self.setCentralWidget(central)

        status = self.statusBar()
        self.model_label = QLabel("No model", self)
        self.model_label.setObjectName("statusModel")
        self.context_label = QLabel("", self)
        self.context_label.setObjectName("statusContext")
        self.progress = QProgressBar(self)
        self.progress.setObjectName("statusProgress")
        self.progress.setRange(0, 100)
        self.progress.setMaximumWidth(180)
        self.progress.setTextVisible(False)
        self.progress.hide()
        self.status_text = QLabel("", self)
        status.addWidget(self.model_label)
        status.addWidget(self.status_text, 1)
        status.addPermanentWidget(self.progress)
        status.addPermanentWidget(self.context_label)

        for text, keys, slot in (("New chat", QKeySequence.StandardKey.New, self.new_chat),
                                 ("Open model…", QKeySequence.StandardKey.Open, self.open_model)):
            action = QAction(text, self)
            action.setShortcut(keys)
            action.triggered.connect(slot)
            self.addAction(action)

    def _toggle_panel(self, visible: bool) -> None:
        self.panel.setVisible(visible)
        self._schedule_save()

    # ---- models --------------------------------------------------------------------------
    def refresh_models(self) -> None:
        self.picker.refresh(self.model.path if self.model else self.settings.last_model)

    def open_model(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open a model", str(Path.home()),
                                              "GGUF models (*.gguf);;All files (*)")
        if path:
            self.load_model(path)

    def load_model(self, path: str) -> None:
        if self.current_id is not None:
            self.stop()
        self.loading = True
        self.composer.set_can_send(False)
        self.picker.select(path)
        self.worker.load_requested.emit(self.panel.load_params(path))

    def reload_model(self) -> None:
        path = self.model.path if self.model else self.picker.path()
        if path:
            self.hide_banner()
            self.load_model(path)

    def _on_engine_ready(self, ready: object) -> None:
        self.panel.set_gpu_offload_supported(
            ready.gpu_offload_supported,  # type: ignore[attr-defined]
            "This build of llama.cpp runs on the CPU only, so there is nothing to offload. "
            "See README, “Building the engine”, to build with CUDA, Metal or Vulkan.")
        self.panel.set_physical_cores(ready.physical_cores)  # type: ignore[attr-defined]

    def _on_model_loading(self, path: str, fraction: float) -> None:
        self.status_text.setText(f"Loading {Path(path).name}…")
        self.progress.setValue(int(fraction * 100))
        self.progress.show()

    def _on_model_loaded(self, info: ModelInfo) -> None:
        self.loading = False
        self.model = info
        self.progress.hide()
        self.settings.last_model = info.path
        self._schedule_save()
        self.composer.set_can_send(True)
        chatml = info.template_source == "chatml"
        self.model_label.setText(f"{info.name}  ·  ChatML template" if chatml else info.name)
        self.model_label.setToolTip(
            f"{info.path}\n{info.architecture}, context {info.n_ctx} (trained {info.n_ctx_train}),"
            f" {info.n_threads} threads, GPU layers {info.n_gpu_layers}, KV {info.kv_cache_type},"
            f" loaded in {info.load_seconds:.1f} s"
            + ("\nThis model has no chat template; Inglenook uses ChatML." if chatml else ""))
        self.status_text.setText("")
        if info.template_source == "chatml":
            self.status_text.setText("This model has no chat template; using ChatML.")
        self._set_context_used(0, info.n_ctx)
        self.chat.set_empty_text(f"{info.name} is ready. Ask it anything.")
        self._enable_regenerate(True)
        self.composer.edit.setFocus()
        self.model_ready.emit(info)

    def _on_model_load_failed(self, path: str, message: str) -> None:
        self.loading = False
        self.model = None
        self.progress.hide()
        self.status_text.setText("")
        self.model_label.setText("No model")
        self.show_banner(f"Could not load {Path(path).name}. {message}", reload=False)
        self.chat.set_empty_text("Choose a model above to start.")
        if self.settings.last_model == path:
            self.settings.last_model = ""  # never retry a failing model on the next start
            self._schedule_save()

    def _on_crashed(self, message: str) -> None:
        self.model = None
        self.model_label.setText("No model")
        self.composer.set_can_send(False)
        self.show_banner(f"{message} Your conversation is safe.", reload=True)
        self._enable_regenerate(False)
        self.engine_lost.emit(message)

    def _enable_regenerate(self, enabled: bool) -> None:
        if self.chat.bubbles and self.current_id is None:
            self.chat.bubbles[-1].regenerate_button.setEnabled(enabled)

    def show_banner(self, text: str, reload: bool) -> None:
        self.banner.setText(text)
        self.banner.show()
        self.reload_button.setVisible(reload)

    def hide_banner(self) -> None:
        self.banner.hide()
        self.reload_button.hide()

    # ---- chatting ------------------------------------------------------------------------
    def send(self, text: str) -> None:
        if self.model is None or self.current_id is not None:
            return
        self.hide_banner()
        if self.turns and self.turns[-1].role == "user":
            # Its reply failed before writing anything. It stays on screen, but the model gets
            # alternating turns (many templates insist), so the new message takes its place.
            self.turns.pop()
        self.turns.append(Message("user", text))
        self.chat.add_bubble("user", text)
        self._request_reply()

    def regenerate(self) -> None:
        if self.current_id is not None or self.model is None:
            return
        if self.chat.bubbles and self.chat.bubbles[-1].role == "assistant":
            self.chat.remove_last()  # also a failed reply, which never became a turn
            if self.turns and self.turns[-1].role == "assistant":
                self.turns.pop()
        if self.turns and self.turns[-1].role == "user":
            self._request_reply()

    def _request_reply(self) -> None:
        self._next_id += 1
        rid = self._next_id
        request = GenerationRequest(
            rid, build_messages(self.panel.system_prompt(), self.turns), self.panel.sampling())
        self.current_id = rid
        self.last_request = request
        for older in self.chat.bubbles:
            older.regenerate_button.hide()  # only the last reply can be regenerated
        bubble = self.chat.add_bubble("assistant")
        bubble.author.setText(self.model.name if self.model else "Assistant")
        bubble.set_streaming(True)
        bubble.stop_requested.connect(self.stop)
        bubble.regenerate_requested.connect(self.regenerate)
        self.current_bubble = bubble
        self.composer.set_generating(True)
        self.worker.generate_requested.emit(request)
        self.reply_started.emit(rid)

    def stop(self) -> None:
        if self.current_id is not None:
            self.worker.cancel(self.current_id)

    def new_chat(self) -> None:
        if self.current_id is not None:
            self.stop()
            self._detach_reply()  # its late events belong to the old chat: drop them
        self.turns.clear()
        self.chat.clear()
        if self.model:
            self._set_context_used(0, self.model.n_ctx)
        self.composer.edit.setFocus()

    def _on_started(self, rid: int) -> None:
        if rid == self.current_id:
            self.status_text.setText("Thinking…")

    def _on_prompt_progress(self, rid: int, done: int, total: int) -> None:
        if rid == self.current_id:
            self.status_text.setText(f"Reading the prompt: {done} / {total} tokens")
            self.progress.setValue(int(100 * done / max(total, 1)))
            self.progress.setVisible(done < total)

    def _on_delta(self, rid: int, text: str) -> None:
        # Deltas that queued up while the GUI was busy are rendered together, once.
        if rid == self.current_id and self.current_bubble is not None:
            self._pending.append(text)
            if not self._flush_timer.isActive():
                self._flush_timer.start()

    def _flush_pending(self) -> None:
        self._flush_timer.stop()
        if self._pending and self.current_bubble is not None:
            if not self.current_bubble.text:
                self.status_text.setText("")
                self.progress.hide()
            self.current_bubble.append_text("".join(self._pending))
        self._pending.clear()

    def _on_stats(self, rid: int, stats: Stats) -> None:
        if rid == self.current_id and self.current_bubble is not None:
            self.current_bubble.set_stats(stats)
            self._set_context_used(stats.context_used, stats.n_ctx)

    def _detach_reply(self) -> MessageBubble | None:
        """Forget the reply in flight: later events with its id are ignored."""
        bubble = self.current_bubble
        self._flush_pending()
        self.current_id = None
        self.current_bubble = None
        self.composer.set_generating(False)
        self.status_text.setText("")
        self.progress.hide()
        if self.model is not None and not self.loading:
            self.composer.set_can_send(True)
        return bubble

    def _on_finished(self, rid: int, finish: Finish) -> None:
        if rid != self.current_id:
            return
        bubble = self._detach_reply()
        if bubble is None:
            return
        bubble.set_streaming(False)
        bubble.set_finish(finish)
        bubble.regenerate_button.setEnabled(self.model is not None)
        if bubble.text:
            self.turns.append(Message("assistant", bubble.text))  # partial replies are kept
        self.reply_finished.emit(rid, finish)

    def _set_context_used(self, used: int, n_ctx: int) -> None:
        self.context_label.setText(f"Context {used:,} / {n_ctx:,}")

    # ---- settings and lifetime -----------------------------------------------------------
    def _schedule_save(self) -> None:
        self._save_timer.start()

    def save_settings(self) -> None:
        self.settings = self.panel.apply_to(self.settings)
        self.settings.side_panel_visible = self.panel_button.isChecked()
        self.settings.window_geometry = bytes(self.saveGeometry().toBase64()).decode()
        save_settings(self.settings)

    def showEvent(self, event) -> None:
        super().showEvent(event)
        if not self._shown_once:
            self._shown_once = True
            self.shown.emit()

    def closeEvent(self, event: QCloseEvent) -> None:
        self.shutdown()
        super().closeEvent(event)

    def shutdown(self) -> None:
        """Save settings and stop the engine; safe to call more than once."""
        if self._closed:
            return
        self._closed = True
        self._save_timer.stop()
        try:
            self.save_settings()
        except OSError as exc:
            self.show_banner(f"Could not save settings: {exc}", reload=False)
        if self.loading:
            self.worker.client.kill()  # a load cannot be interrupted; don't wait for it
        self.engine.stop(self.current_id)
