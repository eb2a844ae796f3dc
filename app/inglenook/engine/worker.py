"""The window's link to the engine: Qt signals over the Qt-free scheduler and client.

Every engine call runs on the scheduler's thread (engine/scheduler.py), one at a time, so the GUI
thread never waits. The signals below are emitted from that thread; Qt queues them to receivers
on the GUI thread. Stop is a direct call (`cancel`): a queued stop would sit behind the very
generation it should stop.
"""

from __future__ import annotations

import contextlib
import time

from PySide6.QtCore import QObject, Signal

from inglenook.core.load import LoadParams
from inglenook.core.messages import GenerationRequest
from inglenook.core.replies import Finish
from inglenook.engine import protocol as p
from inglenook.engine.client import EngineClient, EngineCrashed, EngineError
from inglenook.engine.remote_router import EngineRouter
from inglenook.engine.scheduler import Job, QueueState, Scheduler

DELTA_INTERVAL_S = 0.03  # the GUI repaints at most ~30 times a second
RESTARTED = "The engine was restarted to stop a reply that would not stop."


class EngineWorker(QObject):
    """Drives the engine host for the window.

    Signals:
        engine_ready(object): the host started (protocol.Ready: GPU offload support, cores).
        model_loading(str, float): path and load progress 0..1.
        model_loaded(object): ModelInfo of the model now loaded.
        model_load_failed(str, str): path and a message for the user.
        generation_started(int): request id; the engine began on it.
        prompt_progress(int, int, int): request id, prompt tokens evaluated, to evaluate.
        token_delta(int, str): request id and new text (whole characters, batched ~30 ms).
        generation_stats(int, object): request id and Stats.
        generation_finished(int, object): request id and Finish; exactly once per request,
            also for one cancelled while it waited.
        engine_crashed(str): the host died; the model must be loaded again.
        queue_changed(object): scheduler.QueueState: which request runs, which wait.
        prompt_inspected(int, object): request id and the protocol.PromptView (or a str: why
            there is none) asked for with inspect().
        tuned(object): protocol.TuneResult of tune() (or a str: why there is none).
    """

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
    queue_changed = Signal(object)
    prompt_inspected = Signal(int, object)
    tuned = Signal(object)

    def __init__(self, client: EngineClient | EngineRouter | None = None) -> None:
        super().__init__()
        # Local files and remote endpoints alike (a bare EngineClient in tests).
        self.client: EngineClient | EngineRouter = client or EngineRouter()
        self.client.on_exit = self._host_exited
        self.scheduler = Scheduler(self.client.cancel, self.queue_changed.emit)
        self._last_load: LoadParams | None = None
        self._crash_reported = False

    # ---- asking (any thread; returns at once) -------------------------------------------
    def load(self, params: LoadParams) -> None:
        self.scheduler.submit(Job(lambda: self._load(params), owner="engine", exclusive=True))

    def unload(self) -> None:
        self.scheduler.submit(Job(self._unload, owner="engine", exclusive=True))

    def generate(self, request: GenerationRequest, owner: str = "") -> None:
        """Queue a reply; `owner` (a conversation, an API client) takes turns with the others."""
        rid = request.request_id
        self.scheduler.submit(Job(
            lambda: self._generate(request), owner=owner, request_id=rid,
            dropped=lambda: self.generation_finished.emit(rid, Finish("cancelled"))))

    def inspect(self, request: GenerationRequest, owner: str = "") -> None:
        """Ask for the exact prompt a request would give, token by token (nothing generated)."""
        self.scheduler.submit(Job(lambda: self._inspect(request), owner=owner))

    def tune(self, request_id: int) -> None:
        """Measure threads and batch sizes with the loaded model; the fastest threads are used
        from now on. cancel(request_id) stops it."""
        def run() -> None:
            tune = getattr(self.client, "tune", None)  # a remote engine has nothing to tune
            try:
                result: object = tune(request_id) if tune else "Remote engines tune themselves."
            except EngineError as exc:
                result = str(exc)
            self.tuned.emit(result)
        def dropped() -> None:
            self.tuned.emit("it was cancelled before it started.")
        self.scheduler.submit(Job(run, owner="engine", request_id=request_id, dropped=dropped))

    def forget(self, conversation: str) -> None:
        """The engine may drop the KV-cache state it keeps for a conversation (deleted)."""
        drop = getattr(self.client, "drop_state", None)  # a remote engine keeps none
        if drop is not None:
            self.scheduler.submit(Job(lambda: drop(conversation), owner="engine"))

    def cancel(self, request_id: int) -> None:
        """Stop a reply, waiting or running; takes effect within one token."""
        self.scheduler.cancel(request_id)

    def queue(self) -> QueueState:
        return self.scheduler.state()

    def close(self) -> None:
        """Stop what runs, then the engine. Safe to call twice."""
        state = self.scheduler.state()
        if state.running and state.running[1] is not None:
            self.client.cancel(state.running[1])
        if not self.scheduler.close():
            self.client.kill()  # a load cannot be interrupted; don't wait for it
        self.client.on_exit = None
        self.client.close()

    # ---- on the engine thread -------------------------------------------------------------
    def _load(self, params: LoadParams) -> None:
        path = params.model_path
        self._last_load = params
        self.model_loading.emit(path, 0.0)
        try:
            if self.client.ready is None or not self.client.alive:
                self.engine_ready.emit(self.client.start())
                self._crash_reported = False
            info = self.client.load(params, lambda f: self.model_loading.emit(path, f))
        except EngineCrashed as exc:
            self.model_load_failed.emit(path, str(exc))
            self._crashed(str(exc))
        except EngineError as exc:
            self.model_load_failed.emit(path, str(exc))
        else:
            self.model_loaded.emit(info)

    def _unload(self) -> None:
        try:
            self.client.unload()
        except EngineCrashed as exc:
            self._crashed(str(exc))

    def _generate(self, request: GenerationRequest) -> None:
        rid = request.request_id
        pending: list[str] = []
        last_emit = 0.0
        finish = Finish("error", "The engine ended the reply without a reason.")
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
            self._crashed(str(exc))
        except EngineError as exc:
            finish = Finish("error", str(exc))
        except Exception as exc:  # generation_finished must fire whatever happens
            finish = Finish("error", f"Unexpected error: {exc}")
        if pending:
            self.token_delta.emit(rid, "".join(pending))
        if not self.client.alive and not self._crash_reported and self._last_load is not None:
            # The stop watchdog killed a stuck host: the reply is marked stopped (the client
            # says so) and the model comes back by itself.
            finish = Finish("cancelled", RESTARTED)
            self.generation_finished.emit(rid, finish)
            self.engine_crashed.emit(RESTARTED)
            self._crash_reported = True
            self._load(self._last_load)
            return
        self.generation_finished.emit(rid, finish)

    def _inspect(self, request: GenerationRequest) -> None:
        try:
            view: object = self.client.inspect(request)
        except EngineCrashed as exc:
            view = str(exc)
            self._crashed(str(exc))
        except EngineError as exc:
            view = str(exc)
        self.prompt_inspected.emit(request.request_id, view)

    def _host_exited(self) -> None:
        """From the client's reader thread: check on the engine thread once it is free."""
        with contextlib.suppress(RuntimeError):  # the scheduler closed: we are shutting down
            self.scheduler.submit(Job(self._check_alive, owner="engine", exclusive=True))

    def _check_alive(self) -> None:
        try:
            self.client.check()
        except EngineCrashed as exc:
            self._crashed(str(exc))

    def report_crash(self, message: str) -> None:
        """Another user of the client (the API server) saw the engine die: say so once."""
        self._crashed(message)

    def _crashed(self, message: str) -> None:
        if not self._crash_reported:
            self._crash_reported = True
            self.engine_crashed.emit(message)
