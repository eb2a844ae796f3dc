"""The model chooser in the top bar: installed chat models (embedding models are for Knowledge),
remote engines' models, "Open a GGUF file…" and "Remote engines…".

Remote models are listed off the GUI thread (engine/remote_catalog.py) and shown under the
local files; an engine that cannot be reached shows as a greyed line saying why. A remote model's
item data is its reference (`remote://…`), which the engine router loads like a path.

A model that can see images (a projector chosen for it, or one beside it) says "vision": which
is found off the GUI thread (GGUF headers), and the list follows when it is known.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QStandardItemModel
from PySide6.QtWidgets import QComboBox, QSizePolicy, QWidget

from inglenook.core.units import describe_size
from inglenook.engine.providers import ProviderStore, parse_model_ref
from inglenook.engine.remote_catalog import ProviderListing, list_all
from inglenook.engine.remote_dialects import dialect
from inglenook.models.filenames import parse_quant
from inglenook.models.library import ModelEntry, installed_models
from inglenook.models.projector import known_projector, vision_projector
from inglenook.ui import tasks
from inglenook.ui.plain import plain_tip

OPEN_ITEM = "open"
REMOTE_ITEM = "remote-engines"
REMOTE_STALE_S = 60.0  # opening the picker lists remote models again after this long
_ACTIONS = (OPEN_ITEM, REMOTE_ITEM)
VISION_TAG = "vision"  # after a model that can see images, as LM Studio marks them
LOADED_MARK = "●"  # before the model loaded now


def find_projectors(chosen: dict[str, str]) -> dict[str, str]:
    """Off the GUI thread: each model's projector ("" none), `chosen` the ones its defaults
    name."""
    return {path: vision_projector(path, projector) for path, projector in chosen.items()}


class ModelPicker(QComboBox):
    """Lists the installed models, fresh each time it opens (files may have been added), and
    the models of the remote engines (listed again when older than a minute).

    Signals:
        model_chosen(str): the user picked a model other than the current one; its path or
            remote reference.
        open_requested(): the user picked "Open a GGUF file…".
        providers_requested(): the user picked "Remote engines…" (open ProvidersDialog).
        remote_listed(): remote models were listed again (the items are up to date).
    """

    model_chosen = Signal(str)
    open_requested = Signal()
    providers_requested = Signal()
    remote_listed = Signal()

    def __init__(self, parent: QWidget | None = None,
                 providers: ProviderStore | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("modelPicker")
        # Wide when there is room, down to ~14 characters in a narrow window (names elide).
        self.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.setMinimumContentsLength(14)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setMaximumWidth(480)
        self.setToolTip("The model to chat with")
        self._current = ""
        self._loaded = ""  # the model loaded now ("" none), marked with LOADED_MARK
        self._beside: frozenset[str] = frozenset()  # files loaded beside it: marked too
        self._quant: dict[str, str] = {}  # a file outside the library: its type, once loaded
        self._none_chosen = False  # after Unload: the picker shows that no model is loaded
        self.setPlaceholderText("No model loaded")
        self._providers = providers
        self._remote: list[ProviderListing] = []
        self._remote_at = -REMOTE_STALE_S  # never listed
        self._listing: tasks.Task | None = None  # the latest listing; older ones are dropped
        self._finding: tasks.Task | None = None  # projectors being looked for
        # The projector a model's defaults name ("" none): the window sets it.
        self.chosen_projector: Callable[[str], str] = lambda _path: ""
        self.activated.connect(self._on_activated)

    @property
    def providers(self) -> ProviderStore:
        if self._providers is None:
            self._providers = ProviderStore()  # paths are read when first needed
        return self._providers

    def refresh(self, select: str = "", listing: list[ModelEntry] | None = None) -> None:
        """List the models again (`listing`: installed_models() made off the GUI thread)."""
        self.blockSignals(True)
        self.clear()
        # Embedding models are for Knowledge (its dialog offers them), not to chat with.
        entries = [e for e in (installed_models() if listing is None else listing)
                   if not e.embedding]
        unknown = {}  # models whose projector is not known yet: path → the one chosen
        for entry in entries:
            chosen = self.chosen_projector(entry.path)
            projector = known_projector(entry.path, chosen)
            if projector is None:
                unknown[entry.path] = chosen
            label = f"{entry.name}  ·  {describe_size(entry.size_bytes)}"
            if entry.path == self._loaded or entry.path in self._beside:
                label = f"{LOADED_MARK} {label}"
            if entry.source == "bundled":
                label += "  ·  bundled"
            if projector:
                label += f"  ·  {VISION_TAG}"
            self.addItem(label, entry.path)
            self.setItemData(self.count() - 1, plain_tip(entry.path), Qt.ItemDataRole.ToolTipRole)
        self._add_remote_items()
        self.addItem("Open a GGUF file…", OPEN_ITEM)
        self.addItem("Remote engines…", REMOTE_ITEM)
        self.blockSignals(False)
        self.select(select or self._current)
        if unknown:
            self._finding = tasks.run(find_projectors, unknown, owner=self, replaces=self._finding,
                                      name="find projectors", on_done=self._found)

    def _found(self, found: object) -> None:
        """Tag the items in place (the list may be open)."""
        if not isinstance(found, dict):
            return
        for path, projector in found.items():
            index = self.findData(path)
            if projector and index >= 0 and not self.itemText(index).endswith(VISION_TAG):
                self.setItemText(index, f"{self.itemText(index)}  ·  {VISION_TAG}")

    def entries_seeing(self) -> list[str]:
        """Paths of the listed models marked as seeing images."""
        return [self.itemData(i) for i in range(self.count())
                if self.itemText(i).endswith(f"  ·  {VISION_TAG}")]

    def _add_remote_items(self) -> None:
        if not self._remote:
            return
        self.insertSeparator(self.count())
        for entry in self._remote:
            name = entry.provider.name
            if entry.listing is None:
                self.addItem(f"{name}: not reachable", None)
                self.setItemData(self.count() - 1, plain_tip(entry.error),
                                 Qt.ItemDataRole.ToolTipRole)
                self._disable(self.count() - 1)
                continue
            tip = plain_tip(f"{entry.provider.base_url} ({dialect(entry.listing.server).label})")
            for ref, model in entry.refs:
                seeing = f"  ·  {VISION_TAG}" if entry.sees(model) else ""
                self.addItem(f"{model}  ·  {name}{seeing}", ref)
                self.setItemData(self.count() - 1, tip, Qt.ItemDataRole.ToolTipRole)
        self.insertSeparator(self.count())

    def _disable(self, index: int) -> None:
        model = self.model()
        if isinstance(model, QStandardItemModel):
            model.item(index).setEnabled(False)

    def set_loaded(self, path: str, quantization: str = "", none_chosen: bool = False) -> None:
        """Mark the model loaded now ("" none); `none_chosen` (after Unload): show "No model
        loaded" rather than a model, and choosing any model (the last one too) loads it."""
        self._loaded = path
        if path and quantization:
            self._quant[path] = quantization
        self._none_chosen = none_chosen and not path
        if self._none_chosen:
            self._current = ""
        self.refresh(path)

    def set_beside(self, paths: frozenset[str]) -> None:
        """Mark the files loaded beside the window's model (a chat's own, the API's)."""
        if paths != self._beside:
            self._beside = paths
            self.refresh(self._current)

    def select(self, path: str) -> None:
        """Show `path` as the current model, adding it if it is not listed (a file outside the
        models folder, with its size and type; a remote model not listed yet)."""
        self._current = path
        if path:
            self._none_chosen = False
        elif self._none_chosen:
            self.setCurrentIndex(-1)  # the placeholder: no model loaded
            return
        index = self.findData(path) if path else 0
        if index < 0:
            ref = parse_model_ref(path)
            label = f"{ref[1]}  ·  remote" if ref else self._file_label(path)
            if path == self._loaded:
                label = f"{LOADED_MARK} {label}"
            self.insertItem(self.count() - len(_ACTIONS), label, path)
            self.setItemData(self.findData(path), plain_tip(path), Qt.ItemDataRole.ToolTipRole)
            index = self.findData(path)
        self.setCurrentIndex(max(index, 0))

    def _file_label(self, path: str) -> str:
        """A file opened from elsewhere: its name, size and type (the type from its header once
        loaded; until then from its name)."""
        try:
            size = describe_size(os.stat(path).st_size)
        except OSError:
            size = ""
        quant = self._quant.get(path) or parse_quant(Path(path).name)
        return "  ·  ".join(x for x in (Path(path).stem, size, quant) if x)

    def path(self) -> str:
        data = self.currentData()
        return data if isinstance(data, str) and data not in _ACTIONS else ""

    # ---- remote models ----------------------------------------------------------------------
    def refresh_remote(self) -> None:
        """List the remote engines' models in the background; the items follow when they
        arrive (remote_listed). Call after the providers changed, and at start."""
        self._remote_at = time.monotonic()
        self._listing = tasks.run(list_all, self.providers, on_done=self._on_remote_listed,
                                  owner=self, replaces=self._listing)

    def set_remote(self, listings: list[ProviderListing]) -> None:
        self._remote = list(listings)
        self.refresh()

    def _on_remote_listed(self, listings: object) -> None:
        if isinstance(listings, list):
            self.set_remote(listings)
            self.remote_listed.emit()

    def showPopup(self) -> None:
        self.refresh()
        if time.monotonic() - self._remote_at > REMOTE_STALE_S and self.providers.providers():
            self.refresh_remote()
        super().showPopup()

    def _on_activated(self, index: int) -> None:
        data = self.itemData(index)
        if data in _ACTIONS:
            self.select(self._current)  # until a file or a model is actually chosen
            (self.open_requested if data == OPEN_ITEM else self.providers_requested).emit()
        elif data and data != self._current:
            self.model_chosen.emit(data)
