"""What is loaded: the status bar's lanes (replies written at once, of how many), and a dialog
listing every loaded model (the window's, and those API requests named) with its memory, its
replies running and its idle time, each of them with Unload."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from inglenook.core.load import LoadParams
from inglenook.core.units import describe_size, gigabytes
from inglenook.engine import protocol as p
from inglenook.engine.router import LoadedModel
from inglenook.engine.scheduler import QueueState
from inglenook.engine.worker import EngineWorker
from inglenook.ui.app_settings import AppSettings
from inglenook.ui.models.memory_view import parts_text
from inglenook.ui.plain import plain_label, plain_tip
from inglenook.ui.widgets.content_height import fit_to_content

REFRESH_MS = 1000  # idle times tick while the dialog is open


def lanes_text(state: QueueState) -> str:
    """'2 of 4 replies at once' while replies are written and more than one lane exists or
    replies wait; '' else (idle, "0 of 4" says nothing worth the room)."""
    busy = len(state.busy)
    waiting = sum(1 for _owner, rid in state.waiting if rid is not None)
    if (state.lanes <= 1 and not waiting) or not (busy or state.running or waiting):
        return ""
    text = f"{busy} of {state.lanes} replies at once"
    return text + (f", {waiting} waiting" if waiting else "")


class LanesIndicator:
    """Keeps a status bar label showing the window's busy lanes."""

    def __init__(self, worker: EngineWorker, label: QLabel) -> None:
        self.label = label
        label.setObjectName("statusLanes")
        label.setToolTip("Replies the model writes at the same time, for your chats and API "
                         "clients (Replies at once, in Model loading). Click: what is loaded.")
        label.hide()
        worker.queue_changed.connect(self.show)

    def show(self, state: QueueState) -> None:
        text = lanes_text(state)
        self.label.setText(text)
        self.label.setVisible(bool(text))


class LoadedModelsDialog(QDialog):
    """Signals:
    idle_minutes_changed(int): the idle time-out for models the API loaded (-1: never).
    """

    idle_minutes_changed = Signal(int)

    def __init__(self, worker: EngineWorker, idle_minutes: int,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("loadedModelsDialog")
        self.setWindowTitle("Loaded models")
        self.worker = worker
        intro = plain_label("Models in memory now. A model an API request named, or a chat's "
                            "own model, is loaded beside the window's and unloaded when idle; "
                            "the window's model stays until you choose another.", self)
        intro.setWordWrap(True)
        self.rows = QWidget(self)
        self.grid = QGridLayout(self.rows)
        self.grid.setContentsMargins(0, 8, 0, 8)
        self.grid.setColumnStretch(1, 1)
        self.idle = QSpinBox(self)
        self.idle.setObjectName("idleMinutes")
        self.idle.setRange(-1, 7 * 24 * 60)
        self.idle.setSpecialValueText("never")
        self.idle.setSuffix(" min")
        self.idle.setValue(idle_minutes)
        self.idle.setAccessibleName("Unload a model the API loaded after it is idle for")
        self.idle.setToolTip("A request's keep_alive overrides it for its model")
        self.idle.valueChanged.connect(self.idle_minutes_changed)
        idle_row = QHBoxLayout()
        idle_row.addWidget(QLabel("Unload a model the API loaded when idle for", self))
        idle_row.addWidget(self.idle)
        idle_row.addStretch(1)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(intro)
        layout.addWidget(self.rows)
        layout.addLayout(idle_row)
        layout.addWidget(buttons)
        self._timer = QTimer(self, interval=REFRESH_MS)
        self._timer.timeout.connect(self.refresh)
        worker.models_changed.connect(self.refresh)
        worker.memory_reported.connect(self._on_memory)
        self._keys: list[str] | None = None
        self._facts: list[QLabel] = []
        self._memory: dict[str, p.MemoryReport] = {}  # the engines' last reports, by key
        self.refresh()
        self._height = fit_to_content(self, 680)

    def showEvent(self, event) -> None:
        super().showEvent(event)
        self._timer.start()
        self.refresh()

    def hideEvent(self, event) -> None:
        self._timer.stop()
        super().hideEvent(event)

    def refresh(self) -> None:
        models = self.worker.loaded_models()
        keys = [m.key for m in models]
        if keys != self._keys:  # new rows (the dialog grows to fit them)
            self._keys = keys
            self._build(models)
        for model, facts in zip(models, self._facts, strict=True):
            facts.setText(_facts(model, self._memory.get(model.key)))
        if self.isVisible():
            self.worker.request_memory()  # answered by _on_memory, off this thread

    def _on_memory(self, reports: dict[str, p.MemoryReport]) -> None:
        self._memory = reports
        for model, facts in zip(self.worker.loaded_models(), self._facts, strict=False):
            facts.setText(_facts(model, reports.get(model.key)))

    def _build(self, models: list[LoadedModel]) -> None:
        while self.grid.count():
            item = self.grid.takeAt(0)
            if item is not None and item.widget() is not None:
                item.widget().deleteLater()  # type: ignore[union-attr]
        self._facts = []
        if not models:
            self._cell(QLabel("No model is loaded."), 0, 0)
        for row, model in enumerate(models):
            name = plain_label(model.name)  # a file name is data, never markup
            name.setToolTip(plain_tip(model.path))
            facts = plain_label(_facts(model))
            facts.setWordWrap(True)
            unload = QPushButton("Unload")
            unload.setObjectName(f"unload_{row}")
            unload.setToolTip("Free its memory; a reply running on it ends first")
            unload.clicked.connect(lambda _=False, key=model.key: self.worker.unload_model(key))
            self._cell(name, row, 0)
            self._cell(facts, row, 1)
            self._cell(unload, row, 2)
            self._facts.append(facts)

    def _cell(self, widget: QWidget, row: int, column: int) -> None:
        widget.setParent(self.rows)
        self.grid.addWidget(widget, row, column)


def _facts(model: LoadedModel, report: p.MemoryReport | None = None) -> str:
    """Who loaded it, its memory (the engine's own figures once it has reported them, else the
    fit planner's estimate), its replies and idle time."""
    who = "the window's" if model.by_window else "beside it (a chat's own, or the API's)"
    memory = gigabytes(model.memory_bytes) if model.memory_bytes else "—"
    parts = ""
    if report is not None and report.weights_bytes:
        memory = f"engine {describe_size(report.rss_bytes)} (planned {memory})"
        parts = f"\n{parts_text(report)}"
    running = f"{model.busy} of {model.lanes} replies"
    idle = "" if model.busy else f", idle {_duration(model.idle_s)}"
    if not model.by_window and model.keep_alive_s >= 0:
        idle += f" (unloads after {_duration(model.keep_alive_s)})"
    return (f"{who} · {memory}{' · sees images' if model.vision else ''} · {running}{idle}"
            f"{parts}")


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


class LoadedModels(QObject):
    """The window's part in several models: the router loads a model an API request names with
    this window's load options (`load_params`) and unloads it after the idle time-out of the
    settings; the dialog shows what is loaded (the status bar's LanesIndicator, the lanes).

    The idle time-out follows the settings' model_idle_minutes.
    """

    def __init__(self, worker: EngineWorker, app_settings: AppSettings,
                 load_params: Callable[[str], LoadParams], parent: QWidget) -> None:
        super().__init__(parent)
        self.worker, self._parent, self.app = worker, parent, app_settings
        worker.set_api_params(load_params)
        self._apply("model_idle_minutes")
        app_settings.changed.connect(self._apply)
        self._dialog: LoadedModelsDialog | None = None

    def _apply(self, name: str) -> None:
        if name == "model_idle_minutes":
            minutes = self.app.value.model_idle_minutes
            self.worker.set_idle_unload(-1.0 if minutes < 0 else minutes * 60.0)

    def _idle_changed(self, minutes: int) -> None:
        self.app.set("model_idle_minutes", minutes)

    def show_dialog(self) -> None:
        if self._dialog is None:
            self._dialog = LoadedModelsDialog(self.worker, self.app.value.model_idle_minutes,
                                              self._parent)
            self._dialog.idle_minutes_changed.connect(self._idle_changed)
        self._dialog.show()
        self._dialog.activateWindow()
