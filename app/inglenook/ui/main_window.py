"""The main window: model bar, conversation, composer, side panel and status bar."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QByteArray, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QCloseEvent, QKeySequence
from PySide6.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QInputDialog,
    QLabel,
    QMainWindow,
    QMenu,
    QMessageBox,
    QProgressBar,
    QPushButton,
    QSplitter,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from inglenook.core.load import ModelDefaults, ModelInfo
from inglenook.core.messages import GenerationRequest, Message, build_messages
from inglenook.core.provenance import Provenance
from inglenook.core.replies import Finish, Stats
from inglenook.core.settings import Settings, load_settings, save_settings
from inglenook.engine.worker import EngineThread, EngineWorker
from inglenook.models import fit
from inglenook.models.fingerprint import sha256_of
from inglenook.store import Preset, Store, StoredMessage, StoreError
from inglenook.store.session import ConversationSession, open_store
from inglenook.ui.chat.chat_view import ChatView, MessageBubble
from inglenook.ui.chat.composer import Composer
from inglenook.ui.chat.details import DetailsDialog
from inglenook.ui.history.dialogs import (
    export_conversation,
    export_everything,
    import_conversations,
)
from inglenook.ui.history.search_dialog import SearchDialog
from inglenook.ui.history.sidebar import ConversationSidebar
from inglenook.ui.models.bridge import DownloadBridge
from inglenook.ui.models.defaults_dialog import ModelDefaultsDialog
from inglenook.ui.models.dialog import ModelsDialog
from inglenook.ui.models.picker import ModelPicker
from inglenook.ui.side.preset_bar import PresetBar
from inglenook.ui.side.sampling_panel import SamplingPanel


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
    model_hashed = Signal(str, str)  # emitted from a hashing thread; queued to the GUI thread
    reply_started = Signal(int)
    reply_finished = Signal(int, object)
    model_ready = Signal(object)
    engine_lost = Signal(str)

    def __init__(self, worker: EngineWorker | None = None, settings: Settings | None = None,
                 autoload: bool = True, store: Store | None = None) -> None:
        super().__init__()
        self.setWindowTitle("Inglenook")
        self.setObjectName("mainWindow")
        self.settings = settings or load_settings()
        self.store, store_problem = (store, None) if store else open_store()
        self.session = ConversationSession(self.store)
        self._deleted: int | None = None
        self._last_stats: Stats | None = None
        self._model_sha256 = ""
        self._pending_preset = ""
        self.model: ModelInfo | None = None
        self.loading = False
        self._next_id = 0
        self.current_id: int | None = None
        self.current_bubble: MessageBubble | None = None
        self.last_request: GenerationRequest | None = None
        self._shown_once = False
        self._closed = False
        self._build()
        # Downloads live with the window, so they continue while the Models dialog is closed.
        self.downloads = DownloadBridge(self)
        self.downloads.completed.connect(lambda _status: self.refresh_models())
        self._models_dialog: ModelsDialog | None = None
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
        self.model_hashed.connect(self._on_model_hashed)
        self.engine.start()
        self.refresh_models()
        self.refresh_conversations()
        self.refresh_presets()
        if store_problem:
            self.show_banner(store_problem, reload=False)
        elif self.store.recovered_from is not None:
            self.show_banner(f"The conversation database was damaged. It was moved aside to "
                             f"{self.store.recovered_from} and a new one was started.",
                             reload=False)
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
        self.menu_button = QToolButton(top)
        self.menu_button.setObjectName("menuButton")
        self.menu_button.setText("⋯")
        self.menu_button.setToolTip("Search, export and import conversations")
        self.menu_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        menu = QMenu(self.menu_button)
        menu.addAction("Search conversations…", self.search)
        menu.addAction("Export this conversation…", self.export_conversation)
        menu.addAction("Export all conversations…", self.export_all)
        menu.addAction("Import conversations…", self.import_conversations)
        menu.addSeparator()
        menu.addAction("Models: library, discover, downloads…", self.show_models)
        menu.addAction("Defaults for this model…", self.edit_model_defaults)
        self.menu_button.setMenu(menu)
        self.panel_button = QToolButton(top)
        self.panel_button.setObjectName("panelButton")
        self.panel_button.setText("Settings")
        self.panel_button.setCheckable(True)
        self.panel_button.setToolTip("Show or hide the sampling and model settings")
        bar.addWidget(title)
        bar.addSpacing(12)
        bar.addWidget(self.picker)
        bar.addStretch(1)
        self.models_button = QPushButton("Models", top)
        self.models_button.setObjectName("modelsButton")
        self.models_button.setToolTip("Installed models, the Hub, and downloads")
        self.models_button.clicked.connect(self.show_models)
        bar.addWidget(self.models_button)
        bar.addWidget(self.menu_button)
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
        self.undo_button = QPushButton("Undo", self)
        self.undo_button.setObjectName("bannerUndoButton")
        self.undo_button.clicked.connect(self.undo_delete)
        self.undo_button.hide()
        banner_row = QHBoxLayout()
        banner_row.setContentsMargins(16, 8, 16, 0)
        banner_row.addWidget(self.banner, 1)
        banner_row.addWidget(self.undo_button)
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
        self.panel.sampling_changed.connect(lambda _s: self.preset_bar.show_current(None))
        self.panel.system_prompt_changed.connect(lambda _s: self.preset_bar.show_current(None))
        self.preset_bar = PresetBar(self)
        self.preset_bar.preset_chosen.connect(self.apply_preset)
        self.preset_bar.save_requested.connect(self._save_preset)
        self.preset_bar.delete_requested.connect(self._delete_preset)
        self.side = QWidget(self)
        self.side.setObjectName("sidePanel")
        side_layout = QVBoxLayout(self.side)
        side_layout.setContentsMargins(0, 0, 0, 0)
        side_layout.setSpacing(0)
        side_layout.addWidget(self.preset_bar)
        side_layout.addWidget(self.panel, 1)
        self.side.setVisible(self.settings.side_panel_visible)
        self.panel_button.setChecked(self.settings.side_panel_visible)
        self.panel_button.toggled.connect(self._toggle_panel)

        self.sidebar = ConversationSidebar(self)
        self.sidebar.conversation_selected.connect(self.open_conversation)
        self.sidebar.new_requested.connect(self.new_chat)
        self.sidebar.rename_requested.connect(self._rename_conversation)
        self.sidebar.pin_requested.connect(self._pin_conversation)
        self.sidebar.delete_requested.connect(self._delete_conversation)
        self.sidebar.export_requested.connect(self.export_conversation)
        self.new_chat_button = self.sidebar.new_button

        self.splitter = QSplitter(Qt.Orientation.Horizontal, self)
        self.splitter.setChildrenCollapsible(False)
        self.splitter.addWidget(self.sidebar)
        self.splitter.addWidget(column)
        self.splitter.addWidget(self.side)
        self.splitter.setStretchFactor(0, 0)
        self.splitter.setStretchFactor(1, 1)
        self.splitter.setStretchFactor(2, 0)

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

        for text, keys, slot in (
                ("New chat", QKeySequence(QKeySequence.StandardKey.New), self.new_chat),
                ("Open model…", QKeySequence(QKeySequence.StandardKey.Open), self.open_model),
                ("Search", QKeySequence("Ctrl+K"), self.search),
                ("Find", QKeySequence(QKeySequence.StandardKey.Find), self.search)):
            action = QAction(text, self)
            action.setShortcut(keys)
            action.triggered.connect(slot)
            self.addAction(action)

    def _toggle_panel(self, visible: bool) -> None:
        self.side.setVisible(visible)
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
        defaults = self.settings.defaults_for(path)
        self._pending_preset = defaults.preset
        self.worker.load_requested.emit(defaults.apply(self.panel.load_params(path)))

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
        if ready.gpu_offload_supported:  # type: ignore[attr-defined]
            vram = ready.vram_free  # type: ignore[attr-defined]
            fit.set_vram_probe(lambda: vram)  # free VRAM as the engine saw it when it started

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
        if self._pending_preset:
            preset = next((p for p in self.store.presets() if p.name == self._pending_preset),
                          None)
            if preset is not None:
                self.apply_preset(preset)
            self._pending_preset = ""
        self._model_sha256 = ""
        threading.Thread(target=self._hash_model, args=(info.path,), daemon=True,
                         name="model-sha256").start()
        self._enable_regenerate(True)
        self.composer.edit.setFocus()
        self.model_ready.emit(info)

    def _hash_model(self, path: str) -> None:
        # OSError: the file went away; RuntimeError: the window was closed meanwhile.
        with contextlib.suppress(OSError, RuntimeError):
            self.model_hashed.emit(path, sha256_of(path))

    def _on_model_hashed(self, path: str, digest: str) -> None:
        if self.model is not None and self.model.path == path:
            self._model_sha256 = digest

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

    def show_banner(self, text: str, reload: bool, undo: bool = False,
                    info: bool = False) -> None:
        self.banner.setText(text)
        self.banner.setProperty("kind", "info" if undo or info else "error")
        self.banner.style().unpolish(self.banner)
        self.banner.style().polish(self.banner)
        self.banner.show()
        self.reload_button.setVisible(reload)
        self.undo_button.setVisible(undo)

    def hide_banner(self) -> None:
        self.banner.hide()
        self.reload_button.hide()
        self.undo_button.hide()

    # ---- chatting ------------------------------------------------------------------------
    @property
    def turns(self) -> list[Message]:
        """The conversation on screen as the model will see it."""
        return self.session.turns()

    def send(self, text: str) -> None:
        if self.model is None or self.current_id is not None:
            return
        self.hide_banner()
        if not self._store_call(lambda: self.session.add_user(text)):
            return
        created = len(self.session.path) == 1
        self._add_message_bubble(self.session.path[-1])
        if created:
            preset = self.preset_bar.current()
            if preset is not None:
                conv_id = self.session.conv_id
                self._store_call(lambda: self.store.set_preset(conv_id, preset.name))
            self.refresh_conversations()
        self._request_reply()

    def regenerate(self) -> None:
        if self.current_id is not None or self.model is None or not self.session.path:
            return
        if self.session.path[-1].role == "assistant":
            self.chat.remove_last()
        self._request_reply()

    def edit_message(self, bubble: MessageBubble) -> None:
        if self.current_id is not None or bubble.message_id is None or self.model is None:
            return
        text, ok = QInputDialog.getMultiLineText(self, "Edit message",
                                                 "Ask again (the original stays as a branch):",
                                                 bubble.text)
        message_id = bubble.message_id
        if ok and text.strip() and self._store_call(
                lambda: self.session.edit_user(message_id, text.strip())):
            self.render_conversation()
            self._request_reply()

    def show_sibling(self, bubble: MessageBubble, step: int) -> None:
        if self.current_id is not None or bubble.message_id is None:
            return
        siblings = self.store.siblings(bubble.message_id)
        ids = [m.id for m in siblings]
        target = ids.index(bubble.message_id) + step
        if 0 <= target < len(ids):
            self._store_call(lambda: self.session.select_sibling(ids[target]))
            self.render_conversation()

    def _request_reply(self) -> None:
        turns = self.session.turns()
        if turns and turns[-1].role == "assistant":
            turns.pop()  # Regenerate: a new version of the last reply
        if not turns or turns[-1].role != "user":
            return
        self._next_id += 1
        rid = self._next_id
        request = GenerationRequest(
            rid, build_messages(self.panel.system_prompt(), turns), self.panel.sampling())
        if not self._store_call(self.session.begin_reply):
            return
        self.current_id = rid
        self.last_request = request
        self._last_stats = None
        for older in self.chat.bubbles:
            older.regenerate_button.hide()  # only the last reply can be regenerated
        bubble = self._add_message_bubble(self.session.path[-1])
        bubble.set_streaming(True)
        self.current_bubble = bubble
        self.composer.set_generating(True)
        self.worker.generate_requested.emit(request)
        self.reply_started.emit(rid)

    def _add_message_bubble(self, message: StoredMessage) -> MessageBubble:
        bubble = self.chat.add_bubble(message.role, message.content)
        bubble.message_id = message.id
        bubble.set_siblings(message.sibling_index, message.sibling_count)
        bubble.sibling_requested.connect(lambda step, b=bubble: self.show_sibling(b, step))
        bubble.delete_requested.connect(lambda b=bubble: self.delete_from(b))
        if message.role == "user":
            bubble.edit_requested.connect(lambda b=bubble: self.edit_message(b))
        else:
            model = message.provenance.model_name
            bubble.author.setText(model or (self.model.name if self.model else "Assistant"))
            bubble.stop_requested.connect(self.stop)
            bubble.regenerate_requested.connect(self.regenerate)
            bubble.details_requested.connect(lambda b=bubble: self.show_details(b))
            stats = message.provenance.stats
            if stats:
                bubble.set_stats(stats)
            if message.status == "interrupted":
                bubble.set_notice("Interrupted: the app closed while this reply was written.")
            elif message.status == "error":
                bubble.set_notice(message.provenance.error or "This reply failed.", "error")
        return bubble

    def delete_from(self, bubble: MessageBubble) -> None:
        """Delete a message and everything after it on this branch, after asking."""
        if self.current_id is not None or bubble.message_id is None:
            return
        answer = QMessageBox.question(
            self, "Delete messages", "Delete this message and everything after it?")
        if answer != QMessageBox.StandardButton.Yes:
            return
        message_id = bubble.message_id
        if self._store_call(lambda: self.store.delete_from(message_id)):
            assert self.session.conv_id is not None
            self.session.open(self.session.conv_id)
            self.render_conversation()

    def show_details(self, bubble: MessageBubble) -> None:
        message = next((m for m in self.session.path if m.id == bubble.message_id), None)
        if message is not None:
            DetailsDialog(message, self).open()

    def render_conversation(self) -> None:
        """Show the branch of the open conversation that is active."""
        self.chat.clear()
        for message in self.session.path:
            self._add_message_bubble(message)
        for bubble in self.chat.bubbles[:-1]:
            bubble.regenerate_button.hide()
        self.chat.scroll_to_bottom()

    def stop(self) -> None:
        if self.current_id is not None:
            self.worker.cancel(self.current_id)

    def _leave_reply(self) -> None:
        """Leaving a conversation while its reply streams: stop it and save what was written."""
        if self.current_id is not None:
            self.stop()
            bubble = self._detach_reply()  # its late events belong to the old chat: drop them
            if self.session.replying:
                self._store_call(lambda: self.session.finish_reply(
                    bubble.text if bubble else "", "complete", self._provenance(None)))

    def new_chat(self) -> None:
        self._leave_reply()
        self.session.new()
        self.chat.clear()
        self.sidebar.select(None)
        if self.model:
            self._set_context_used(0, self.model.n_ctx)
        self.composer.edit.setFocus()

    def open_conversation(self, conv_id: int, message_id: int | None = None) -> None:
        if conv_id == self.session.conv_id and message_id is None:
            return
        self._leave_reply()
        if self._store_call(lambda: self.session.open(conv_id)):
            self.render_conversation()
            self.sidebar.select(conv_id)
            name = self.store.conversation(conv_id).preset
            preset = next((p for p in self.store.presets() if p.name == name), None)
            if preset is not None:
                self.apply_preset(preset)
            if message_id is not None:
                self.chat.scroll_to_message(message_id)

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
            self._store_call(lambda: self.session.stream(self.current_bubble.text))
        self._pending.clear()

    def _on_stats(self, rid: int, stats: Stats) -> None:
        if rid == self.current_id and self.current_bubble is not None:
            self._last_stats = stats
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
        status = "error" if finish.reason == "error" else "complete"  # a stopped reply is kept
        if self._store_call(lambda: self.session.finish_reply(
                bubble.text, status, self._provenance(finish))):
            last = self.session.path[-1]
            bubble.set_siblings(last.sibling_index, last.sibling_count)
        self.reply_finished.emit(rid, finish)

    def _provenance(self, finish: Finish | None) -> Provenance:
        sha256 = self._model_sha256 if self.model else ""
        return Provenance.of_reply(self.model, self.last_request, self._last_stats, finish,
                                   sha256)

    def _store_call(self, action: Callable[[], object]) -> bool:
        """Run a store operation; a failure (disk full, read-only) is shown, never raised."""
        try:
            action()
        except StoreError as exc:
            self.show_banner(f"Could not save the conversation: {exc}", reload=False)
            return False
        return True

    # ---- conversations -------------------------------------------------------------------
    def refresh_conversations(self) -> None:
        try:
            conversations = self.store.conversations()
        except StoreError as exc:
            self.show_banner(f"Could not read conversations: {exc}", reload=False)
            return
        self.sidebar.set_conversations(conversations, self.session.conv_id)

    def _rename_conversation(self, conv_id: int, title: str) -> None:
        if self._store_call(lambda: self.store.rename(conv_id, title)):
            self.refresh_conversations()

    def _pin_conversation(self, conv_id: int, pinned: bool) -> None:
        if self._store_call(lambda: self.store.set_pinned(conv_id, pinned)):
            self.refresh_conversations()

    def _delete_conversation(self, conv_id: int) -> None:
        if not self._store_call(lambda: self.store.delete(conv_id)):
            return
        if conv_id == self.session.conv_id:
            self.new_chat()
        self._deleted = conv_id
        self.show_banner("Conversation deleted.", reload=False, undo=True)
        self.refresh_conversations()

    def undo_delete(self) -> None:
        if self._deleted is not None and self._store_call(
                lambda: self.store.undelete(self._deleted)):
            conv_id, self._deleted = self._deleted, None
            self.hide_banner()
            self.refresh_conversations()
            self.open_conversation(conv_id)

    # ---- presets -------------------------------------------------------------------------
    def refresh_presets(self, current: str | None = None) -> None:
        try:
            presets = self.store.presets()
        except StoreError as exc:
            self.show_banner(f"Could not read presets: {exc}", reload=False)
            return
        if current is None:  # name the preset the panel's values came from, if any
            sampling, prompt = self.panel.sampling(), self.panel.system_prompt()
            current = next((p.name for p in presets
                            if p.sampling == sampling and p.system_prompt == prompt), None)
        self.preset_bar.set_presets(presets, current)

    def apply_preset(self, preset: Preset) -> None:
        """Put a preset's system prompt and sampling in the panel; the chat remembers it."""
        settings = self.panel.apply_to(self.settings)
        settings.sampling, settings.system_prompt = preset.sampling, preset.system_prompt
        self.settings = settings
        self.panel.set_settings(settings)
        self.preset_bar.show_current(preset.name)
        self._schedule_save()
        if self.session.conv_id is not None:
            self._store_call(lambda: self.store.set_preset(self.session.conv_id, preset.name))

    def _save_preset(self, name: str) -> None:
        preset = Preset(name, self.panel.system_prompt(), self.panel.sampling())
        if self._store_call(lambda: self.store.save_preset(preset)):
            self.refresh_presets(name)

    def _delete_preset(self, name: str) -> None:
        if self._store_call(lambda: self.store.delete_preset(name)):
            self.refresh_presets()

    def export_conversation(self, conv_id: int | None = None) -> None:
        conv_id = conv_id or self.session.conv_id
        if conv_id is not None:
            self._file_action(lambda: export_conversation(self.store, conv_id, self), "export")

    def export_all(self) -> None:
        self._file_action(lambda: export_everything(self.store, self), "export")

    def import_conversations(self) -> None:
        ids: list[int] = []
        if self._file_action(lambda: ids.extend(import_conversations(self.store, self)),
                             "import") and ids:
            self.refresh_conversations()
            self.refresh_presets()
            self.open_conversation(ids[0])

    def _file_action(self, action: Callable[[], object], what: str) -> bool:
        try:
            action()
        except (OSError, ValueError, StoreError) as exc:
            self.show_banner(f"Could not {what}: {exc}", reload=False)
            return False
        return True

    def edit_model_defaults(self, path: str = "") -> None:
        """Per-model context, GPU layers, preset and template; applied on the next load."""
        path = path or (self.model.path if self.model else self.picker.path())
        if not path:
            return
        ready = self.worker.client.ready
        supported = bool(ready and ready.gpu_offload_supported)
        presets = [p.name for p in self.store.presets()]
        dialog = ModelDefaultsDialog(path, self.settings.defaults_for(path), presets, supported,
                                     self)
        dialog.accepted.connect(lambda: self._save_model_defaults(path, dialog.result_defaults))
        dialog.open()

    def _save_model_defaults(self, path: str, defaults: ModelDefaults) -> None:
        self.settings.set_defaults(path, defaults)
        self._schedule_save()
        if self.model is not None and self.model.path == path:
            self.show_banner("Saved. Reload the model to use its new defaults.", reload=True,
                             info=True)

    def show_models(self) -> None:
        if self._models_dialog is None:  # one instance; it refreshes itself when shown
            self._models_dialog = ModelsDialog(self.downloads, self)
            self._models_dialog.model_chosen.connect(self.load_model)
            self._models_dialog.models_changed.connect(self.refresh_models)
            self._models_dialog.defaults_requested.connect(self.edit_model_defaults)
        self._models_dialog.show()
        self._models_dialog.activateWindow()

    def search(self) -> None:
        dialog = SearchDialog(self.store, self)
        dialog.hit_chosen.connect(self.open_conversation)
        dialog.open()

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
        self.downloads.close()  # pauses running downloads; their partial files are kept
        self.engine.stop(self.current_id)
