"""The main window: builds the widgets and the controllers, and wires them. Nothing else.

`app_settings` owns settings.json; everyone who reads or writes a setting is handed it.
Controllers own the behaviour: `chats` (the chat on screen and every reply in flight), `models`
(the loaded model), `side` (the side panel bound to the chat on screen), `history` (the
conversation list). See ../shared/ARCHITECTURE.md.
"""

from __future__ import annotations

import time

from PySide6.QtCore import QByteArray, Qt, Signal
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import (
    QMainWindow,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from inglenook import paths
from inglenook.chat.forget import tidy_at_start
from inglenook.chat.session import OWNER_PREFIX
from inglenook.core.load import ModelInfo
from inglenook.core.settings import Settings
from inglenook.engine.worker import EngineWorker
from inglenook.speech import catalog as speech_catalog
from inglenook.store import Store
from inglenook.store.opening import open_store
from inglenook.ui import tasks, theme
from inglenook.ui.app_settings import AppSettings
from inglenook.ui.chat.chat_controller import ChatController, ChatWidgets
from inglenook.ui.chat.chat_view import ChatView
from inglenook.ui.chat.composer import Composer
from inglenook.ui.chat.context_meter import LiveFigures
from inglenook.ui.chat.find_bar import FindBar, FindInChat
from inglenook.ui.chat.queue_notice import QueueNotice
from inglenook.ui.history.history_controller import HistoryController
from inglenook.ui.history.sidebar import ConversationSidebar
from inglenook.ui.knowledge.knowledge_controller import KnowledgeController
from inglenook.ui.knowledge.knowledge_dialog import KnowledgeDialog
from inglenook.ui.models.bridge import DownloadBridge
from inglenook.ui.models.loaded_view import LoadedModels
from inglenook.ui.models.model_controller import ModelController
from inglenook.ui.server.server_controller import ServerController
from inglenook.ui.side.preset_bar import PresetBar
from inglenook.ui.side.sampling_panel import SamplingPanel
from inglenook.ui.side.side_controller import SideController
from inglenook.ui.side.tuning import Tuning
from inglenook.ui.tools.tool_controller import ToolController
from inglenook.ui.widgets.banner import Banner
from inglenook.ui.widgets.window_size import fit_in_window
from inglenook.ui.window import commands
from inglenook.ui.window.chat_models import ChatModels
from inglenook.ui.window.drops import accept_drops
from inglenook.ui.window.help import AboutDialog, ShortcutsDialog
from inglenook.ui.window.layout import MIN_WIDTH, PanelFolder
from inglenook.ui.window.menus import window_menus
from inglenook.ui.window.status_bar import StatusBar
from inglenook.ui.window.tab_order import step as tab_step
from inglenook.ui.window.top_bar import TopBar


class MainWindow(QMainWindow):
    """The chat window. Its signals fire on the GUI thread (tests wait on these).

    Signals:
        shown(): the window was shown for the first time (start-up timing).
        reply_started(int): a reply request was queued for the engine; its id.
        reply_finished(int, object): a reply ended; its id and Finish.
        model_ready(object): a model finished loading; its ModelInfo.
        engine_lost(str): the engine died; the message shown to the user.
    """

    shown = Signal()
    reply_started = Signal(int)
    reply_finished = Signal(int, object)
    model_ready = Signal(object)
    engine_lost = Signal(str)

    def __init__(self, worker: EngineWorker | None = None, settings: Settings | None = None,
                 autoload: bool = True, store: Store | None = None) -> None:
        super().__init__()
        self.setWindowTitle("Inglenook")
        self.setObjectName("mainWindow")
        notices = []
        self.app_settings = AppSettings(settings, parent=self)
        if settings is None:
            notices.append(self.app_settings.file.notice)
        settings = self.app_settings.value
        theme.manager().set_mode(settings.theme)  # before anything is drawn
        self.store, store_problem = (store, None) if store else open_store()
        self._owns_store = store is None
        self.worker = worker or EngineWorker()
        self._shown_once = self._closed = False
        self._build()
        self.downloads = DownloadBridge(self)  # downloads outlive the Models dialog

        self.side = SideController(self.panel, self.preset_bar, self.store, self.app_settings,
                                   self._gpu_supported, self)
        self.models = ModelController(self.worker, self.picker, self.banner,
                                      self.side.load_params, self.downloads, self.side.load_fix,
                                      self)
        self.models.app_settings = self.app_settings
        speech_catalog.choose(settings.speech_model, settings.speech_voice,
                              settings.speech_language)
        self.history = HistoryController(self.sidebar, self.store, self.banner,
                                         lambda: self.chats.conv_id, self)
        self.tools = ToolController(self)  # MCP servers, started on first use
        # Collections; indexing off the GUI thread, vectors from an embedding model the worker
        # loads beside the chat model.
        self.knowledge = KnowledgeController(self, self.worker.embedder)
        widgets = ChatWidgets(self.chat, self.composer, self.queue_notice, self.banner,
                              self.status_bar.context)
        self.chat_models = ChatModels(self.models, self.worker, self.banner, self)
        self.chats = ChatController(
            self.worker, self.store, widgets, self.tools, self.chat_models.model_for,
            self.side.new_chat_settings, lambda: self.side.presets, self)
        self.chat_models.bind(self.chats)
        self.chats.read_aloud.follow_replies = settings.read_replies_aloud
        if settings.read_replies_aloud:
            self.chats.read_aloud.reader.prepare()  # the first reply read starts sooner
        self.server = ServerController(self.worker, self.app_settings, self,
                                       self.downloads.manager)
        # The API's loads run on the worker's thread: they read the settings, never a widget.
        self.loaded = LoadedModels(self.worker, self.app_settings,
                                   lambda path: self.app_settings.value.load_params(path), self)
        self.finder = FindInChat(self.find_bar, self.chat, self.store,
                                 lambda: self.chats.session, self.focus_composer, self)
        self.live = LiveFigures(self.worker, lambda: self.chats.session, self.chats.context,
                                self.chat, lambda: self.chat_models.model_for()[0], self)
        self._wire()
        # Models into the library, other files (images…) onto the draft.
        self._drops = accept_drops(self, self.models.import_dropped, self.composer.attach_files)
        self.side.bind(self.chats.session)
        self.picker.chosen_projector = lambda path: str(
            self.side.model_defaults(path).own("mmproj_path", ""))
        self.models.refresh(settings.last_model)
        self.picker.refresh_remote()  # remote endpoints' models, listed in the background
        self.history.refresh()
        # Chats deleted in an earlier session are purged (unless another window, which may
        # still offer Undo, has the database open), then the image files made for the engine
        # that no stored message holds any more (derived data).
        tasks.run(tidy_at_start, self.store.path,
                  time.time() if self.store.alone else None, writer=True, name="purge and prune")
        if store_problem:  # damaged and moved aside, read-only, or temporary
            notices.append(store_problem)
        if any(notices):
            self.banner.show_message("\n\n".join(n for n in notices if n))
        # 1240 × 820 within the screen (a 1366 × 768 laptop, a 700 × 600 screen), unless the
        # last run's sizes say otherwise:
        fit_in_window(self, 1240, 820)
        self.restoreGeometry(QByteArray.fromBase64(settings.window_geometry.encode()))
        self.splitter.restoreState(QByteArray.fromBase64(settings.splitter_state.encode()))
        if not settings.welcomed:  # the first run: a short welcome above the starters,
            self.chat.empty.show_welcome(str(paths.data_dir()))
            self.side.welcomed()  # shown once: not again at the next start, dismissed or not
        if autoload and self.picker.path():
            self.models.load(self.picker.path())

    # ---- layout --------------------------------------------------------------------------
    def _build(self) -> None:
        top = TopBar(self)
        self.picker, self.models_button = top.picker, top.models_button
        self.menu_button, self.panel_button = top.menu_button, top.panel_button

        self.banner = Banner(self)
        self.find_bar = FindBar(self)
        self.chat = ChatView(self)
        self.chat.set_zoom(self.app_settings.value.text_zoom)  # kept from the last run
        self.chat.empty.label.setText("Loading the model…")
        self.queue_notice = QueueNotice(self)
        self.composer = Composer(self)
        self.composer.set_can_send(False)
        column = _column("chatColumn", self.banner, self.find_bar, self.chat, self.queue_notice,
                         self.composer)
        self.panel = SamplingPanel(self)
        self.preset_bar = PresetBar(self)
        self.side_panel = _column("sidePanel", self.preset_bar, self.panel)
        self.sidebar = ConversationSidebar(self)
        self.new_chat_button = self.sidebar.new_button

        self.splitter = QSplitter(Qt.Orientation.Horizontal, self)
        self.splitter.setChildrenCollapsible(False)
        for index, widget in enumerate((self.sidebar, column, self.side_panel)):
            self.splitter.addWidget(widget)
            self.splitter.setStretchFactor(index, 1 if widget is column else 0)
        central = _column("central", top, self.splitter)
        self.setCentralWidget(central)
        self.folder = PanelFolder(self.sidebar, self.side_panel, self.panel_button, column)
        # The panels fold away before the chat gets too narrow (resizeEvent), so the window
        # may be narrower than all three side by side.
        central.setMinimumSize(MIN_WIDTH, 360)

        self.status_bar = bar = StatusBar(self.worker, self)
        self.setStatusBar(bar)
        # Its fields' widgets, for tests to read (each field is their only writer).
        self.model_label, self.context_label = bar.model.name, bar.context.label
        self.server_label, self.lanes_label = bar.server.label, bar.lanes.label
        self.memory_label = bar.memory.label
        # Tab's way round the window (window/tab_order.py); True: by place on screen.
        self._tab_parts = ((top, False), (self.sidebar, False), (self.banner, False),
                           (self.find_bar, False), (self.chat, True),
                           (self.queue_notice, False), (self.composer, False),
                           (self.side_panel, False))

    def _wire(self) -> None:
        chats, models, side, history = self.chats, self.models, self.side, self.history
        settings = self.app_settings
        self._wire_status_bar()
        self.menus = window_menus(self)
        self.command_actions = commands.build(self, self.menus)
        for name in ("search", "exportChat", "exportAll", "importChats", None, "models",
                     "modelDefaults"):
            self.menu_button.menu().addAction(self.command_actions[name]) if name else \
                self.menu_button.menu().addSeparator()
        self.models_button.clicked.connect(models.show_dialog)
        models.defaults_requested.connect(side.edit_model_defaults)
        models.projector_chosen.connect(side.remember_projector)
        self.panel_button.setChecked(settings.value.side_panel_visible)
        self.folder.wanted.update(side_panel=settings.value.side_panel_visible,
                                  sidebar=settings.value.sidebar_visible)
        self.folder.fit(self.width())
        self.panel_button.toggled.connect(
            lambda on: self.folder.want("side_panel", on, self.width()))
        self.panel_button.toggled.connect(self._remember_panels)
        self.panel.reload_requested.connect(models.reload)
        self.tuning = Tuning(self.worker, self.panel, lambda: models.model is not None,
                             models.reload, self)
        self.panel.speed.forget_requested.connect(self._forget_states)
        settings.changed.connect(self._setting_changed)
        settings.save_failed.connect(self.banner.show_message)
        if settings.value.api_enabled:
            self.server.start()
        side.store_failed.connect(self.banner.show_message)
        side.defaults_saved.connect(models.defaults_saved)
        models.loading.connect(chats.model_loading)
        models.ready.connect(self._model_ready)
        models.ready.connect(side.model_loaded)  # the thinking switch, the tools' support
        self.panel.reply_section.tools_requested.connect(chats.show_tools)
        self.panel.knowledge_section.manage_requested.connect(self.show_knowledge)
        self.panel.knowledge_section.chosen_changed.connect(lambda _c: chats.show_context())
        self.knowledge.changed.connect(lambda: side.show_collections(self.knowledge.names()))
        side.show_collections(self.knowledge.names())
        self.knowledge.start_watching()  # and a catch-up run for what changed while closed
        models.failed.connect(self._model_failed)
        models.lost.connect(self._engine_lost)
        models.unloaded.connect(self._model_unloaded)
        self.composer.load_requested.connect(models.load_again)
        models.engine_started.connect(side.engine_started)
        history.open_requested.connect(chats.open)
        history.hit_chosen.connect(chats.open)
        history.new_requested.connect(chats.new_chat)
        history.deleting.connect(chats.stop_conversation)
        history.deleted.connect(lambda conv_id: self.worker.forget(f"{OWNER_PREFIX}{conv_id}"))
        history.deleted.connect(chats.conversation_deleted)
        history.imported.connect(side.refresh_presets)
        chats.session_changed.connect(side.bind)
        chats.session_changed.connect(self.chat_models.shown)
        chats.session_changed.connect(lambda s: self.sidebar.select(s.conv_id))
        chats.session_changed.connect(lambda _s: self.finder.chat_changed())
        chats.conversations_changed.connect(history.refresh)
        chats.activity_changed.connect(self.sidebar.set_activity)
        chats.unread_changed.connect(self.sidebar.set_unread)
        self.sidebar.set_unread(chats.unread.ids)  # as the store kept them
        chats.reply_started.connect(self.reply_started)
        chats.reply_finished.connect(self.reply_finished)
        self.chat.empty.welcome_dismissed.connect(self.side.welcomed)

    def _wire_status_bar(self) -> None:
        """Each field of the status bar follows its concern (window/status_bar.py)."""
        bar, models = self.status_bar, self.models
        self.worker.model_loading.connect(bar.model.loading)
        models.ready.connect(bar.model.loaded)  # before the chat's own model is shown beside
        for gone in (models.failed, models.lost, models.unloaded):
            gone.connect(bar.model.gone)
        self.chat_models.model_shown.connect(bar.model.show_chat_model)
        self.chats.reply.status_changed.connect(bar.reply.show)
        self.chats.voice.said.connect(bar.voice.show)
        self.chats.notice.connect(bar.notice.show)
        self.server.shown.connect(bar.server.show)

    # ---- commands of the menus -----------------------------------------------------------
    def toggle_sidebar(self) -> None:
        self.folder.want("sidebar", self.sidebar.isHidden(), self.width())
        self._remember_panels()

    def focusNextPrevChild(self, next: bool) -> bool:
        return tab_step(self, self._tab_parts, next)

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self.folder.fit(event.size().width())

    def show_preferences(self) -> None:
        self.panel_button.setChecked(True)
        self.panel.setFocus()

    def show_knowledge(self) -> None:
        """Chat → Knowledge… (the dialog acts on the controller; the controller knows no
        dialog)."""
        dialog = KnowledgeDialog(self.knowledge, self)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.open()

    def focus_composer(self) -> None:
        self.composer.edit.setFocus()

    def show_shortcuts(self) -> None:
        ShortcutsDialog([*commands.shortcut_rows(self.menus), *commands.KEYS], self).open()

    def _gpu_supported(self) -> bool:
        ready = self.worker.ready
        return ready is not None and ready.gpu_offload_supported

    def show_about(self) -> None:
        ready = self.worker.ready
        AboutDialog(ready.gpu_offload_supported if ready else None, self).open()

    # ---- reactions that span controllers -------------------------------------------------
    def _model_ready(self, info: ModelInfo) -> None:
        self.app_settings.set("last_model", info.path)
        self.chat_models.ready(info.path)  # the chat on screen is answered by it
        preset = self.side.model_defaults(info.path).preset
        if preset and not self.chats.session.path:  # a model's preset applies to a new chat
            self.side.apply_preset_named(preset)
        self.chat.empty.label.setText(f"{info.name} is ready. Ask it anything.")
        self.composer.model_changed()  # images' costs; whether it can see them
        self.chats.set_can_send(True)  # sends a message typed while it loaded
        self.composer.set_loading(False)
        self.chats.show_context()
        self.panel.limit_sampling(self.worker.accepted_sampling)
        self.composer.edit.setFocus()
        self.model_ready.emit(info)

    def _model_failed(self, path: str, _message: str) -> None:
        self.chat.empty.label.setText("Choose a model above to start.")
        self.chats.set_can_send(False)
        self.composer.set_loading(False)
        if self.app_settings.value.last_model == path:
            self.app_settings.set("last_model", "")  # never retry a failing model next time

    def _model_unloaded(self) -> None:
        self.chat.empty.label.setText("Choose a model above to start.")
        self.composer.offer_load(self.models.unloaded_name)
        self.composer.model_changed()
        self.chats.set_can_send(False)
        self.composer.set_loading(False)

    def _engine_lost(self, message: str) -> None:
        self.chats.set_can_send(False)
        self.composer.set_loading(False)
        self.engine_lost.emit(message)

    # ---- settings and lifetime -----------------------------------------------------------
    def _setting_changed(self, name: str) -> None:
        if name == "theme":
            theme.manager().set_mode(self.app_settings.value.theme)
        elif name == "text_zoom":
            self.chat.set_zoom(self.app_settings.value.text_zoom)
        elif name == "read_replies_aloud":
            self.chats.read_aloud.follow_replies = self.app_settings.value.read_replies_aloud
            if self.chats.read_aloud.follow_replies:
                self.chats.read_aloud.reader.prepare()
        elif name in ("speech_model", "speech_voice", "speech_language"):
            value = self.app_settings.value
            speech_catalog.choose(value.speech_model, value.speech_voice, value.speech_language)

    def _forget_states(self) -> None:
        """Settings' Forget cached states: the engine drops them off the GUI thread."""
        self.worker.forget_states()
        self.status_bar.notice.show("Cached chat states forgotten: chats read their text again.")

    def _remember_panels(self) -> None:
        self.app_settings.update(side_panel_visible=self.folder.wanted["side_panel"],
                                 sidebar_visible=self.folder.wanted["sidebar"])

    def save_settings(self) -> None:
        """Save now, with the panel's load options and the window's sizes as they are."""
        self.side.store_load_options()
        self.app_settings.update(
            window_geometry=bytes(self.saveGeometry().toBase64().data()).decode(),
            splitter_state=bytes(self.splitter.saveState().toBase64().data()).decode())
        self.app_settings.save_now()  # merged with what another window saved meanwhile

    def showEvent(self, event) -> None:
        super().showEvent(event)
        if not self._shown_once:
            self._shown_once = True
            self.composer.edit.setFocus()  # who types at once types a message
            self.shown.emit()

    def closeEvent(self, event: QCloseEvent) -> None:
        self.shutdown()
        super().closeEvent(event)

    def shutdown(self) -> None:
        """Save what is in flight and stop the engine; safe to call more than once."""
        if self._closed:
            return
        self._closed = True
        self.chats.shutdown()
        self.composer.mic.dictation.close()  # voice work under way ends before the process
        self.chats.voice.turns.close()
        self.tools.close()  # calls still running are abandoned; their cards read "not run"
        self.knowledge.close()  # a run stops at its next file; join_writers waits for it
        self.side.flush()
        self.history.close()  # a chat deleted with Undo still offered is purged now
        self.save_settings()
        self.downloads.close()  # pauses running downloads; their partial files are kept
        self.server.stop()  # its replies first, then the engine they share
        self.worker.close()
        tasks.join_writers()  # imports and quantizing, with a bounded wait (ui/tasks.py)
        if self._owns_store:
            self.store.close()  # checkpoints the WAL; a caller's store is the caller's to close


def _column(name: str, *widgets: QWidget) -> QWidget:
    """A vertical stack without margins; the chat view or splitter gets the spare height."""
    column = QWidget()
    column.setObjectName(name)
    layout = QVBoxLayout(column)
    layout.setContentsMargins(0, 0, 0, 0)
    layout.setSpacing(0)
    for widget in widgets:
        stretch = 1 if isinstance(widget, (ChatView, QSplitter, SamplingPanel)) else 0
        layout.addWidget(widget, stretch)
    return column
