"""What the engine holds, as the engine process itself reports it (protocol.MemoryReport, read
off the GUI thread by EngineWorker.request_memory): the status bar's figure (the process's
resident memory) with its parts in the tooltip, and each loaded model's line in Models ›
Loaded models."""

from __future__ import annotations

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QLabel

from inglenook.core.units import describe_size
from inglenook.engine import protocol as p
from inglenook.engine.worker import EngineWorker


def parts_text(report: p.MemoryReport) -> str:
    """'weights 92 MB · KV 12 MB used of 720 MB · compute buffers 167 MB · saved chats 0 B in
    RAM, 0 B on disk'."""
    return (f"weights {describe_size(report.weights_bytes)} · KV "
            f"{describe_size(report.kv_used_bytes)} used of {describe_size(report.kv_bytes)}"
            f" · compute buffers {describe_size(report.compute_bytes)} · saved chats "
            f"{describe_size(report.states_ram_bytes)} in RAM, "
            f"{describe_size(report.states_disk_bytes)} on disk")


def engine_text(report: p.MemoryReport) -> str:
    """'Engine 893 MB': the process's resident memory ('' when it holds no local model)."""
    return f"Engine {describe_size(report.rss_bytes)}" if report.weights_bytes else ""


class MemoryIndicator(QObject):
    """Keeps a status bar label showing the engine process's memory for the window's model,
    asked again after a load, each reply and an unload. A child of the label, so the worker's
    signals stop reaching it when the label goes (a report can arrive after the window)."""

    def __init__(self, worker: EngineWorker, label: QLabel) -> None:
        super().__init__(label)
        self.worker, self.label = worker, label
        label.setObjectName("statusMemory")
        label.hide()
        for signal in (worker.model_loaded, worker.model_unloaded, worker.generation_finished):
            signal.connect(self._ask)
        worker.memory_reported.connect(self.show)

    def _ask(self, *_args: object) -> None:
        self.worker.request_memory()

    def show(self, reports: dict[str, p.MemoryReport]) -> None:
        report = reports.get("")
        text = engine_text(report) if report is not None else ""
        self.label.setText(text)
        self.label.setVisible(bool(text))
        if report is not None and text:
            self.label.setToolTip(
                "Memory the engine process holds now (resident, as the system counts it): "
                f"{parts_text(report)}. Models › Loaded models lists every model.")
