"""The loaded model: loading it, its file's fingerprint, and losing it (the status bar's
ModelStatus shows which it is and the load's progress)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QFileDialog, QWidget

from inglenook.core.load import LoadParams, LoadRefusal, ModelInfo
from inglenook.engine import protocol as p
from inglenook.engine.providers import is_remote_ref, model_name_of, parse_model_ref
from inglenook.engine.worker import EngineWorker
from inglenook.models import fit
from inglenook.models.fingerprint import sha256_of
from inglenook.models.projector import opened_files, with_projector
from inglenook.ui import tasks
from inglenook.ui.app_settings import AppSettings
from inglenook.ui.models.bridge import DownloadBridge
from inglenook.ui.models.dialog import ModelsDialog
from inglenook.ui.models.library import ask_import_mode
from inglenook.ui.models.picker import ModelPicker
from inglenook.ui.models.providers_dialog import ProvidersDialog
from inglenook.ui.widgets.banner import Banner


class ModelController(QObject):
    """Owns which model is loaded. `load_params(path)` gives the options to load a file with
    (the side panel's, with that model's own defaults applied).

    Signals:
        loading(str): a load of this path began (replies in flight should stop).
        ready(object): a model finished loading; its ModelInfo.
        failed(str, str): path and message; no model is loaded now.
        lost(str): the engine died; the message shown to the user.
        unloaded(): the model was unloaded as asked; none is loaded now.
        engine_started(object): protocol.Ready of a new engine process.
        defaults_requested(str): the user wants to edit this model's defaults.
        projector_chosen(str, str): the user opened this model with this vision projector.
    """

    loading = Signal(str)
    ready = Signal(object)
    failed = Signal(str, str)
    lost = Signal(str)
    unloaded = Signal()
    engine_started = Signal(object)
    defaults_requested = Signal(str)
    projector_chosen = Signal(str, str)

    def __init__(self, worker: EngineWorker, picker: ModelPicker, banner: Banner,
                 load_params: Callable[[str], LoadParams], downloads: DownloadBridge,
                 load_fix: Callable[[LoadRefusal | None], tuple[str, Callable[[], None]] | None],
                 parent: QWidget) -> None:
        super().__init__(parent)
        self.worker, self.picker, self.banner = worker, picker, banner
        self._load_params = load_params
        self._load_fix = load_fix
        self._downloads = downloads
        self._dialog: ModelsDialog | None = None
        self._hashing: tasks.Task | None = None  # the loaded model's fingerprint, being read
        self._preparing: tasks.Task | None = None  # files opened or a load, read off the GUI
        downloads.completed.connect(lambda _status: self.refresh())
        self._parent = parent
        self.app_settings: AppSettings | None = None  # the window's: the speech models chosen
        self.model: ModelInfo | None = None
        self.is_loading = False
        self.sha256 = ""
        self._restarting = False
        self.unloaded_path = ""  # the model unloaded as asked, offered to load again
        worker.engine_ready.connect(self.engine_started)
        worker.engine_ready.connect(self._on_engine_ready)
        worker.model_loading.connect(self._on_loading)
        worker.model_loaded.connect(self._on_loaded)
        worker.model_load_failed.connect(self._on_failed)
        worker.engine_crashed.connect(self._on_crashed)
        worker.model_unloaded.connect(self._on_unloaded)
        # What choosing a model does (the window gives it to the chat on screen: ChatModels).
        self.choose: Callable[[str], None] = self.load
        picker.model_chosen.connect(lambda path: self.choose(path))
        picker.open_requested.connect(self.open_file)
        picker.providers_requested.connect(self.show_providers)

    @property
    def path(self) -> str:
        """The model loaded, or the one chosen in the picker."""
        return self.model.path if self.model else self.picker.path()

    def open_file(self) -> None:
        chosen, _ = QFileDialog.getOpenFileNames(
            self._parent, "Open a model (and its vision projector)", str(Path.home()),
            "GGUF models (*.gguf);;All files (*)")
        if chosen:
            self.open_paths(chosen)

    def open_paths(self, chosen: list[str]) -> None:
        """A model, or a model and its projector (kept as that model's own default). Which
        file is which is read from their headers off the GUI thread (a 262k vocabulary's
        header took seconds to read there)."""
        self._preparing = tasks.run(opened_files, chosen, owner=self, name="opened files",
                                    on_done=self._opened, replaces=self._preparing,
                                    on_failed=lambda exc: self.banner.show_message(
                                        str(exc) if isinstance(exc, ValueError)
                                        else f"Could not open the file: {exc}"))

    def _opened(self, pair: tuple[str, str]) -> None:
        path, projector = pair
        if projector:
            self.projector_chosen.emit(path, projector)
        self.load(path)

    def load(self, path: str) -> None:
        """Load a model with the panel's options and its own defaults; the projector beside
        it is looked for off the GUI thread first (it reads GGUF headers)."""
        self.is_loading = True
        self.picker.select(path)
        self.loading.emit(path)
        params = self._load_params(path)
        self._preparing = tasks.run(with_projector, params, owner=self, name="find projector",
                                    on_done=self.worker.load, replaces=self._preparing,
                                    on_failed=lambda _exc: self.worker.load(params))

    def reload(self) -> None:
        if self.path:
            self.banner.clear()
            self.load(self.path)

    def refresh(self, last_model: str = "") -> None:
        self.picker.refresh(self.model.path if self.model else last_model or self.picker.path())

    def _library_changed(self) -> None:
        """The Models dialog listed the folder again: the picker shows the same listing."""
        listing = self._dialog.library.entries if self._dialog is not None else None
        self.picker.refresh(self.model.path if self.model else self.picker.path(), listing)

    def show_providers(self) -> None:
        """Remote engines: add, test and remove OpenAI-compatible endpoints."""
        dialog = ProvidersDialog(self.picker.providers, self._parent)
        dialog.providers_changed.connect(self.picker.refresh_remote)
        dialog.vision_marked.connect(self._vision_marked)
        dialog.open()

    def _vision_marked(self, provider_id: str) -> None:
        """The models of an endpoint that read images changed: the one in use is chosen again,
        so that the composer knows at once whether it sees."""
        ref = parse_model_ref(self.model.path) if self.model is not None else None
        if ref is not None and ref[0] == provider_id and not self.is_loading:
            self.reload()

    def defaults_saved(self, path: str) -> None:
        """New defaults for a model: offer to reload it now when it is the one loaded."""
        if self.model is not None and self.model.path == path:
            self.banner.show_message("Saved. Reload the model to use its new defaults.", "info",
                                     ("Reload model", self.reload))

    def import_dropped(self, path: str) -> None:
        """A .gguf dropped on the window: into the library (copy or link, as the user says),
        in the background, shown on the Library page."""
        mode = ask_import_mode(self._parent, Path(path).name)
        if mode is None:
            return
        self.show_dialog()
        assert self._dialog is not None
        self._dialog.show_page("library")
        self._dialog.library.import_file(path, mode)

    def show_dialog(self) -> None:
        """The Models dialog: one instance, refreshed each time it is shown."""
        if self._dialog is None:
            self._dialog = ModelsDialog(self._downloads, self._parent,
                                        self.picker.chosen_projector, self.app_settings)
            self._dialog.model_chosen.connect(lambda path: self.choose(path))
            self._dialog.models_changed.connect(self._library_changed)
            self._dialog.defaults_requested.connect(self.defaults_requested)
            self._dialog.library.set_loaded(self.model.path if self.model is not None else "")
        self._dialog.show()
        self._dialog.activateWindow()

    # ---- from the engine ------------------------------------------------------------------
    def _on_engine_ready(self, ready: p.Ready) -> None:
        if ready.gpu_offload_supported:
            vram = ready.vram_free
            fit.set_vram_probe(lambda: vram)  # free VRAM as the engine saw it when it started

    def _on_loading(self, _path: str, _fraction: float) -> None:
        self.is_loading = True

    def _on_loaded(self, info: ModelInfo) -> None:
        self.is_loading = False
        self.model = info
        self.unloaded_path = ""
        self._mark_loaded(info)
        self.sha256 = ""
        if self._restarting and self.banner.kind == "info":
            self.banner.clear()
        self._restarting = False
        if not is_remote_ref(info.path):  # a file: its fingerprint goes into provenance
            path = info.path
            self._hashing = tasks.run(sha256_of, path, owner=self, name="model-sha256",
                                      on_done=lambda digest: self._on_hashed(path, digest),
                                      on_failed=lambda _exc: None,  # the file went away
                                      replaces=self._hashing)
        self.ready.emit(info)

    def _on_hashed(self, path: str, digest: str) -> None:
        if self.model is not None and self.model.path == path:
            self.sha256 = digest

    def _on_failed(self, path: str, message: str, refusal: LoadRefusal | None) -> None:
        self.is_loading = False
        self.model = None
        self._mark_loaded(None)
        fix = self._load_fix(refusal)
        action: tuple[str, Callable[[], None]] | None = None
        if fix is not None:
            label, change = fix

            def fix_and_load() -> None:
                change()
                self.load(path)

            action = (label, fix_and_load)
        name = model_name_of(path) if is_remote_ref(path) else Path(path).name
        self.banner.show_message(f"Could not load {name}. {message}", "error", action)
        self.failed.emit(path, message)

    @property
    def unloaded_name(self) -> str:
        """The name of the model unloaded last ("" none)."""
        path = self.unloaded_path
        return model_name_of(path) if is_remote_ref(path) else Path(path).stem if path else ""

    def load_again(self) -> None:
        """The model unloaded last, loaded again (the composer's "Load <model>")."""
        if self.unloaded_path and self.model is None and not self.is_loading:
            self.load(self.unloaded_path)

    def _mark_loaded(self, info: ModelInfo | None, none_chosen: bool = False) -> None:
        """Which model is loaded, marked in the picker and the Library; `none_chosen`: the
        picker shows that none is (after Unload) rather than the model that failed."""
        path = info.path if info is not None else ""
        self.picker.set_loaded(path, info.quantization if info is not None else "", none_chosen)
        if self._dialog is not None:
            self._dialog.library.set_loaded(path)

    def _on_unloaded(self) -> None:
        self.is_loading = False
        if self.model is not None:
            self.unloaded_path = self.model.path
        self.model = None
        self._mark_loaded(None, none_chosen=True)
        self.unloaded.emit()

    def _on_crashed(self, message: str) -> None:
        self.model = None
        self._restarting = message.startswith("The engine was restarted")
        if self._restarting:
            self.banner.show_message(f"{message} The model is being loaded again.", "info")
        else:
            self.banner.show_message(f"{message} Your conversation is safe.", "error",
                                     ("Reload model", self.reload))
        self.lost.emit(message)
