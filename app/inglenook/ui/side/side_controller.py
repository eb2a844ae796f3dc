"""The side panel bound to the chat on screen: its preset, system prompt and sampling, its
thinking switch, effort, tools and knowledge collections (saved with that chat), and the
app's load options and per-model defaults (settings.json, through AppSettings)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QWidget

from inglenook.chat.session import ChatSession, ChatSettings
from inglenook.core.load import LoadParams, LoadRefusal, ModelDefaults, ModelInfo
from inglenook.core.settings import SettingsValueError
from inglenook.engine import protocol as p
from inglenook.store import Preset, Store, StoreError
from inglenook.ui import tasks
from inglenook.ui.app_settings import AppSettings
from inglenook.ui.models.defaults_dialog import ModelDefaultsDialog
from inglenook.ui.side.preset_bar import PresetBar
from inglenook.ui.side.sampling_panel import SamplingPanel

SAVE_DELAY_MS = 500
CHAT_FIELDS = ("sampling", "system_prompt", "overflow")  # the panel shows the chat's; see _use
CPU_ONLY = ("This build of llama.cpp runs on the CPU only, so there is nothing to offload. "
            "See docs/building.md to build with CUDA, Metal or Vulkan.")


class SideController(QObject):
    """Signals:
    store_failed(str): a chat's settings or a preset could not be saved; the message.
    defaults_saved(str): new defaults for this model path were saved.
    """

    store_failed = Signal(str)
    defaults_saved = Signal(str)

    def __init__(self, panel: SamplingPanel, bar: PresetBar, store: Store,
                 app_settings: AppSettings, gpu_supported: Callable[[], bool],
                 parent: QWidget) -> None:
        super().__init__(parent)
        self.panel, self.bar, self.store = panel, bar, store
        self.app = app_settings
        self._gpu_supported = gpu_supported
        self._parent = parent
        # The model loaded last: the defaults dialog says what Automatic chose for it.
        self.loaded: ModelInfo | None = None
        self.session: ChatSession | None = None
        self._save_chat = tasks.debounce(SAVE_DELAY_MS, self.flush, self)
        # One user action may pass through states the settings refuse (flash attention off
        # before the KV cache type follows): the panel's load options are taken once it settles.
        self._load_edited = tasks.debounce(0, self.store_load_options, self)
        panel.set_settings(app_settings.value)
        # The panel shows the settings' load options: changed from elsewhere too (a fix on a
        # refused load, another window's save), it follows.
        app_settings.changed.connect(self._setting_changed)
        panel.sampling_changed.connect(lambda _s: self._edited())
        panel.system_prompt_changed.connect(lambda _s: self._edited())
        panel.overflow_changed.connect(lambda _s: self._edited())
        panel.reply_section.thinking_changed.connect(lambda on: self._chat_change(thinking=on))
        panel.reply_section.effort_changed.connect(
            lambda effort: self._chat_change(reasoning_effort=effort))
        panel.knowledge_section.chosen_changed.connect(self._use_collections)
        self.collection_names: list[str] = []
        panel.reply_format_section.format_changed.connect(
            lambda on, schema: self._chat_change(reply_json=on, reply_schema=schema))
        panel.settings_changed.connect(self._load_edited.call)
        bar.preset_chosen.connect(self.apply_preset)
        bar.save_requested.connect(self.save_preset)
        bar.delete_requested.connect(self.delete_preset)
        self.presets: list[Preset] = []
        self.refresh_presets()

    # ---- which chat ---------------------------------------------------------------------
    def new_chat_settings(self) -> ChatSettings:
        """What a new chat starts with: the values last chosen (settings.json)."""
        settings = self.app.value
        chosen = ChatSettings(settings.system_prompt, settings.sampling,
                              overflow=settings.overflow)  # type: ignore[arg-type]
        return chosen.replace(preset=chosen.matching_preset(self.presets))

    def bind(self, session: ChatSession) -> None:
        """Show this chat's settings; edits go to it from now on."""
        self.flush()
        self.session = session
        chat = session.settings
        self.panel.set_settings(dataclasses.replace(
            self.app.value, sampling=chat.sampling, system_prompt=chat.system_prompt))
        self.panel.set_overflow(chat.overflow)
        self.panel.reply_section.show_chat(chat)
        self.panel.knowledge_section.show_collections(self.collection_names, chat.knowledge)
        self.panel.reply_format_section.show_chat(chat)
        self.bar.show_current(chat.matching_preset(self.presets))

    def model_loaded(self, info: ModelInfo) -> None:
        """Show the switches this model's template reads, and whether it can call tools."""
        self.loaded = info
        self.panel.reply_section.show_model(info.traits, info.tool_format)
        self.panel.speed.show_state_budget(info.kv_state_ram_budget, info.kv_state_disk_budget)
        self.panel.show_slots_in_use(info.n_slots)

    def show_collections(self, names: list[str]) -> None:
        """The knowledge collections there are now (made, deleted)."""
        if names == self.collection_names:
            return  # a folder added or a run ended: the same boxes
        self.collection_names = names
        chosen = self.session.settings.knowledge if self.session is not None else ()
        self.panel.knowledge_section.show_collections(names, chosen)

    def _use_collections(self, chosen: tuple[str, ...]) -> None:
        if self.session is not None:
            self.session.set_settings(self.session.settings.replace(knowledge=chosen))
            self._save_chat.call()

    def _chat_change(self, **changes: object) -> None:
        if self.session is not None:
            self.session.set_settings(self.session.settings.replace(**changes))
            self.panel.reply_section.show_chat(self.session.settings)
            self._save_chat.call()

    def flush(self) -> None:
        """Save the bound chat's settings now (on switching, closing, and after edits), and
        take the panel's load options."""
        self._save_chat.cancel()
        self.store_load_options()
        session = self.session
        if session is not None and session.settings_dirty:
            try:
                session.save_settings()
            except StoreError as exc:
                self.store_failed.emit(f"Could not save this chat's settings: {exc}")

    def _edited(self) -> None:
        """The user changed the prompt or a sampling value: the chat keeps them (Custom unless
        they match a preset again), and new chats start from them."""
        values = ChatSettings(self.panel.system_prompt(), self.panel.sampling(),
                              overflow=self.panel.overflow())  # type: ignore[arg-type]
        values = values.replace(preset=values.matching_preset(self.presets))
        self._use(values)

    def _use(self, values: ChatSettings) -> None:
        if self.session is not None:  # a preset or an edit leaves switches, tools, knowledge
            chat = self.session.settings
            values = values.replace(thinking=chat.thinking, tools=chat.tools,
                                    reasoning_effort=chat.reasoning_effort,
                                    knowledge=chat.knowledge, reply_json=chat.reply_json,
                                    reply_schema=chat.reply_schema, model=chat.model)
        self._change(sampling=values.sampling, system_prompt=values.system_prompt,
                     overflow=values.overflow)
        if self.session is not None:
            self.session.set_settings(values)
            self._save_chat.call()
        self.bar.show_current(values.preset)

    def _change(self, **changes: object) -> None:
        try:
            self.app.update(**changes)
        except SettingsValueError as exc:  # nothing changed; the panel still shows it
            self.store_failed.emit(str(exc))

    # ---- presets ------------------------------------------------------------------------
    def refresh_presets(self) -> None:
        try:
            self.presets = self.store.presets()
        except StoreError as exc:
            self.store_failed.emit(f"Could not read presets: {exc}")
            return
        current = self.session.settings if self.session else self.new_chat_settings()
        self.bar.set_presets(self.presets, current.matching_preset(self.presets))

    def apply_preset(self, preset: Preset) -> None:
        """Put a preset's system prompt and sampling in the panel; the chat remembers it."""
        values = ChatSettings.of_preset(preset).replace(overflow=self.panel.overflow())
        self.panel.set_settings(dataclasses.replace(
            self.panel.apply_to(self.app.value), sampling=values.sampling,
            system_prompt=values.system_prompt))
        self._use(values)

    def apply_preset_named(self, name: str) -> bool:
        preset = next((p for p in self.presets if p.name == name), None)
        if preset is not None:
            self.apply_preset(preset)
        return preset is not None

    def save_preset(self, name: str) -> None:
        preset = Preset(name, self.panel.system_prompt(), self.panel.sampling())
        try:
            self.store.save_preset(preset)
        except (StoreError, ValueError) as exc:
            self.store_failed.emit(f"Could not save the preset: {exc}")
            return
        self.refresh_presets()
        self._use(ChatSettings.of_preset(preset).replace(overflow=self.panel.overflow()))

    def delete_preset(self, name: str) -> None:
        try:
            self.store.delete_preset(name)
        except StoreError as exc:
            self.store_failed.emit(str(exc))
            return
        if self.session is not None and self.session.settings.preset == name:
            self.session.set_settings(self.session.settings.replace(preset=None))
            self._save_chat.call()
        self.refresh_presets()

    # ---- loading ------------------------------------------------------------------------
    def engine_started(self, ready: p.Ready) -> None:
        """A new engine process says what this build can do."""
        self.panel.set_gpu_offload_supported(ready.gpu_offload_supported, CPU_ONLY)
        self.panel.set_physical_cores(ready.physical_cores)

    def load_params(self, path: str) -> LoadParams:
        """What this model loads with, read from the settings (Settings.load_params: the
        options for every model, its own over them); the panel's last edit is taken first
        when it has not settled yet (a fix offered on a refused load sets it, then reloads).
        The vision projector beside the model is looked for off the GUI thread
        (models/projector.py's with_projector, which ModelController.load applies)."""
        if self._load_edited.pending:
            self.store_load_options()
        return self.app.value.load_params(path)

    def load_fix(self, refusal: LoadRefusal | None) -> tuple[str, Callable[[], None]] | None:
        """For a load refused as too large or beyond the trained length: the change that
        makes it load, as a banner action (it sets the panel's options, then reloads). Fewer
        replies at once are offered first: the context the chat sees stays as it is."""
        if refusal is None:
            return None
        if refusal.reason == "beyond_trained":
            return "Allow it", lambda: self.panel.set_context(self.panel.n_ctx_spin.value(), True)
        if refusal.largest_slots:
            slots = refusal.largest_slots
            label = "Write 1 reply at a time" if slots == 1 else f"Write {slots} replies at once"
            return label, lambda: self.panel.set_slots(slots)
        if refusal.largest_context:
            n_ctx = refusal.largest_context
            return f"Use {n_ctx:,} tokens", lambda: self.panel.set_context(n_ctx)
        return None

    def model_defaults(self, path: str) -> ModelDefaults:
        return self.app.value.defaults_for(path)

    def edit_model_defaults(self, path: str) -> None:
        """Per-model context, GPU layers, preset and template; applied on the next load."""
        if not path:
            return
        loaded = self.loaded
        dialog = ModelDefaultsDialog(path, self.app.value.defaults_for(path),
                                     [p.name for p in self.presets], self._gpu_supported(),
                                     self._parent,
                                     loaded if loaded is not None and loaded.path == path
                                     else None)
        dialog.accepted.connect(lambda: self._save_model_defaults(path, dialog.result_defaults))
        dialog.open()

    def remember_projector(self, path: str, projector: str) -> None:
        """The vision projector the user opened this model with: its own from now on."""
        own = self.app.value.defaults_for(path)
        defaults = dataclasses.replace(own, load={**own.load, "mmproj_path": projector})
        self.app.set_model_defaults(path, defaults)

    def _save_model_defaults(self, path: str, defaults: ModelDefaults) -> None:
        self.app.set_model_defaults(path, defaults)
        self.defaults_saved.emit(path)

    def welcomed(self) -> None:
        """The first-run welcome was shown: not shown again."""
        self._change(welcomed=True)

    def _setting_changed(self, name: str) -> None:
        if name == "load":
            self.panel.load.show_options(self.app.value.load)

    def store_load_options(self) -> None:
        """Keep the load options the panel shows in the settings (they apply at the next
        load). The panel's prompt and sampling belong to the chat on screen: the defaults
        for new chats change only by editing them (_use)."""
        self._load_edited.cancel()
        self._change(load=self.panel.apply_to(self.app.value).load)
