"""The window's link to the engine: a QObject on its own QThread that drives EngineClient.

Requests arrive as queued signals, so they run one after another on the worker thread and the
GUI thread never waits. Stop is a direct call (`cancel`): a queued stop would sit behind the very
generation it should stop.
"""

from __future__ import annotations

import time

from PySide6.QtCore import QObject, QThread, Signal, Slot

from inglenook.core.load import LoadParams
from inglenook.core.messages import GenerationRequest
from inglenook.core.replies import Finish
from inglenook.engine import protocol as p
from inglenook.engine.client import EngineClient, EngineCrashed, EngineError

DELTA_INTERVAL_S = 0.03  # the GUI repaints at most ~30 times a second


class EngineWorker(QObject):
    """Drives the engine host for the window.

    Signals:
        engine_ready(object): the host started (protocol.Ready: GPU offload support, cores).
        model_loading(str, float): path and load progress 0..1.
        model_loaded(object): ModelInfo of the model now loaded.
        model_load_failed(str, str): path and a message for the user.
        generation_started(int): request id.
        prompt_progress(int, int, int): request id, prompt tokens evaluated, to evaluate.
        token_delta(int, str): request id and new text (whole characters, batched ~30 ms).
        generation_stats(int, object): request id and Stats.
        generation_finished(int, object): request id and Finish; exactly once per request.
        engine_crashed(str): the host died; the model must be loaded again.
    """

    load_requested = Signal(object)
    unload_requested = Signal()
    generate_requested = Signal(object)

    engine_ready = Signal(object)
    model_loading = Signal(str, float)
    model_loaded = Signal(object)
    model_load_failed = Signal(str, str)
    generation_started = Signal(int)
    prompt_progress = Signal(int, int, int)
    token_delta = Signal(int, str)
    generation_stats = Signal(int, object)
    generation_finished = Signal(int, object)
    engine_crashed = Signal(str)

    def __init__(self, client: EngineClient | None = None) -> None:
        super().__init__()
        self.client = client or EngineClient()
        self.load_requested.connect(self._load)
        self.unload_requested.connect(self._unload)
        self.generate_requested.connect(self._generate)

    def cancel(self, request_id: int) -> None:
        """Direct call from the GUI thread; takes effect within one token."""
        self.client.cancel(request_id)

    @Slot(object)
    def _load(self, params: LoadParams) -> None:
        path = params.model_path
        self.model_loading.emit(path, 0.0)
        try:
            if self.client.ready is None or not self.client.alive:
                self.engine_ready.emit(self.client.start())
            info = self.client.load(params, lambda f: self.model_loading.emit(path, f))
        except EngineCrashed as exc:
            self.model_load_failed.emit(path, str(exc))
            self.engine_crashed.emit(str(exc))
        except EngineError as exc:
            self.model_load_failed.emit(path, str(exc))
        else:
            self.model_loaded.emit(info)

    @Slot()
    def _unload(self) -> None:
        try:
            self.client.unload()
        except EngineCrashed as exc:
            self.engine_crashed.emit(str(exc))

    @Slot(object)
    def _generate(self, request: GenerationRequest) -> None:
        rid = request.request_id
        pending: list[str] = []
        last_emit = 0.0
        finish = Finish("error", "The engine ended the reply without a reason.")
        crashed = False
        try:
            for event in self.client.generate(request):
                if isinstance(event, p.Delta):
                    pending.append(event.text)
                    now = time.monotonic()
                    if now - last_emit >= DELTA_INTERVAL_S:
                        self.token_delta.emit(rid, "".join(pending))
                        pending.clear()
                        last_emit = now
                    continue
                if pending:
                    self.token_delta.emit(rid, "".join(pending))
                    pending.clear()
                if isinstance(event, p.Started):
                    self.generation_started.emit(rid)
                elif isinstance(event, p.PromptProgress):
                    self.prompt_progress.emit(rid, event.done, event.total)
                elif isinstance(event, p.ReplyStats):
                    self.generation_stats.emit(rid, event.stats)
                elif isinstance(event, p.Finished):
                    finish = event.finish
        except EngineCrashed as exc:
            finish = Finish("error", str(exc))
            crashed = True
            self.engine_crashed.emit(str(exc))
        except EngineError as exc:
            finish = Finish("error", str(exc))
        except Exception as exc:  # generation_finished must fire whatever happens
            finish = Finish("error", f"Unexpected error: {exc}")
        if pending:
            self.token_delta.emit(rid, "".join(pending))
        self.generation_finished.emit(rid, finish)
        if not crashed and not self.client.alive:
            # The stop watchdog killed a stuck host: the model is gone.
            self.engine_crashed.emit("The engine was restarted to stop the reply.")


class EngineThread:
    """Owns the worker's QThread: start it, and stop it cleanly when the window closes."""

    def __init__(self, worker: EngineWorker) -> None:
        self.worker = worker
        self.thread = QThread()
        self.thread.setObjectName("engine-worker")
        worker.moveToThread(self.thread)

    def start(self) -> None:
        self.thread.start()

    def stop(self, current_request: int | None = None) -> None:
        if current_request is not None:
            self.worker.cancel(current_request)
        self.thread.quit()
        if not self.thread.wait(10_000):
            self.worker.client.kill()
            self.thread.wait(5_000)
        self.worker.client.close()
