"""The window's link to the engines: Qt signals over the Qt-free scheduler and router.

Every engine call runs on a scheduler thread (engine/scheduler.py): replies on lanes, several at
once, loads alone; the GUI thread never waits. The signals below are emitted from those threads;
Qt queues them to receivers on the GUI thread. Stop is a direct call (`cancel`): a queued stop
would sit behind the very generation it should stop.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Sequence

from PySide6.QtCore import QObject, Signal

from inglenook.core.load import LoadParams, LoadRefusal, ModelInfo
from inglenook.core.messages import GenerationRequest
from inglenook.core.replies import Finish
from inglenook.engine import protocol as p
from inglenook.engine.client import EngineClient, EngineCrashed, EngineError, LoadRefused
from inglenook.engine.embedder import RoutedEmbedder
from inglenook.engine.router import EngineRouter, LoadedModel
from inglenook.engine.scheduler import Job, QueueState, Scheduler

log = logging.getLogger(__name__)

DELTA_INTERVAL_S = 0.03  # the GUI repaints at most ~30 times a second
# A reply stopped while it waited for a lane: nothing was written, and "Stopped." would say
# the model had begun.
DROPPED = "Cancelled before it started: taken out of the queue."
RESTARTED = "The engine was restarted to stop a reply that would not stop."


class EngineWorker(QObject):
    """Drives the engine host for the window.

    Signals:
        engine_ready(object): the host started (protocol.Ready: GPU offload support, cores).
        model_loading(str, float): path and load progress 0..1.
        model_loaded(object): ModelInfo of the model now loaded.
        model_load_failed(str, str, object): path, a message for the user, and the
            core.load.LoadRefusal of a load that was not tried (what would make it load), or
            None.
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
        tune_progress(int, int): trials measured so far, of how many.
        models_changed(): what is loaded changed (a model the API loaded, or unloaded).
        model_unloaded(): the window's model was unloaded (as asked: no model now).
        memory_reported(object): {LoadedModel.key: protocol.MemoryReport} asked for with
            request_memory(), read from the engine hosts on a thread of its own.
    """

    engine_ready = Signal(object)
    model_loading = Signal(str, float)
    model_loaded = Signal(object)
    model_load_failed = Signal(str, str, object)
    generation_started = Signal(int)
    prompt_progress = Signal(int, int, int)
    token_delta = Signal(int, str)
    generation_stats = Signal(int, object)
    generation_finished = Signal(int, object)
    engine_crashed = Signal(str)
    queue_changed = Signal(object)
    prompt_inspected = Signal(int, object)
    tuned = Signal(object)
    tune_progress = Signal(int, int)
    models_changed = Signal()
    model_unloaded = Signal()
    memory_reported = Signal(object)

    def __init__(self, client: EngineRouter | EngineClient | None = None) -> None:
        super().__init__()
        # Local files, remote endpoints and the models API requests name (an EngineClient is
        # the window's local engine).
        router = client if isinstance(client, EngineRouter) else EngineRouter(client)
        self.client: EngineRouter = router
        router.on_exit = self._host_exited
        router.on_change = self.models_changed.emit
        self.scheduler = Scheduler(router.cancel, self.queue_changed.emit, router.lanes)
        self._last_load: LoadParams | None = None
        self._crash_reported = False
        self._restarting = threading.Lock()
        self._memory_asked = threading.Lock()  # held while a request_memory() is under way

    # ---- asking (any thread; returns at once) -------------------------------------------
    def load(self, params: LoadParams) -> None:
        self.scheduler.submit(Job(lambda: self._load(params), owner="engine", exclusive=True))

    def unload(self) -> None:
        self.scheduler.submit(Job(self._unload, owner="engine", exclusive=True))

    def generate(self, request: GenerationRequest, owner: str = "", group: str = "") -> None:
        """Queue a reply; `owner` (a conversation, an API client) takes turns with the others
        for a lane of its engine: the window's model (`group` ""), or the model of that file
        loaded beside it (the router loads it first when it is not: a chat's own model)."""
        rid = request.request_id
        self.scheduler.submit(Job(
            lambda: self._generate(request, group), owner=owner, request_id=rid, group=group,
            dropped=lambda: self.generation_finished.emit(rid, Finish("cancelled", DROPPED))))

    def preload(self, path: str) -> None:
        """Load the model at `path` beside the window's, as a reply to it would (a chat's own
        model); replies to it wait for the load. A failure is the first reply's to tell."""
        def run() -> None:
            try:
                self.client.preload(path)
            except EngineError as exc:
                log.info("Loading %s beside the window's model failed: %s", path, exc)

        self.scheduler.submit(Job(run, owner="engine", exclusive=True, group=path))

    def unload_model(self, key: str) -> None:
        """Unload a model the API loaded ("": the window's), once its replies ended."""
        if not key:
            self.unload()
            return
        self.scheduler.submit(Job(lambda: self.client.unload_model(key), owner="engine",
                                  exclusive=True, group=key))

    def inspect(self, request: GenerationRequest, owner: str = "") -> None:
        """Ask for the exact prompt a request would give, token by token (nothing generated)."""
        self.scheduler.submit(Job(lambda: self._inspect(request), owner=owner))

    def tune(self, request_id: int, apply: bool = True) -> None:
        """Measure threads and batch sizes with the loaded model; with `apply`, the fastest
        threads are used from now on (else the user decides: a reload applies them).
        cancel(request_id) stops it."""
        def run() -> None:
            try:
                result: object = self.client.tune(
                    request_id, apply=apply, on_progress=self.tune_progress.emit) \
                    if self.client.can_tune else "Remote engines tune themselves."
            except EngineError as exc:
                result = str(exc)
            self.tuned.emit(result)

        def dropped() -> None:
            self.tuned.emit("it was cancelled before it started.")
        # Alone on the engine: it waits for the replies running now, and measures undisturbed.
        self.scheduler.submit(Job(run, owner="engine", request_id=request_id, dropped=dropped,
                                  exclusive=True))

    def forget(self, conversation: str) -> None:
        """The engine may drop the KV-cache state it keeps for a conversation (deleted)."""
        if self.client.keeps_states:
            self.scheduler.submit(Job(lambda: self.client.drop_state(conversation),
                                      owner="engine"))

    def forget_states(self) -> None:
        """Forget cached states (Settings): on the scheduler, off the GUI thread."""
        self.scheduler.submit(Job(self.client.forget_states, owner="engine"))

    def cancel(self, request_id: int) -> None:
        """Stop a reply, waiting or running; takes effect within one token."""
        self.scheduler.cancel(request_id)

    def queue(self) -> QueueState:
        return self.scheduler.state()

    # ---- the window's questions and settings (the GUI's only door into the engines) -------
    # The router and the scheduler stay the worker's: views read through these, and what
    # they set goes through the router's lock, never into its attributes.
    @property
    def model(self) -> ModelInfo | None:
        """The window's model, once loaded."""
        return self.client.model

    def model_of(self, path: str) -> ModelInfo | None:
        """The model at `path` loaded beside the window's (None while it is not)."""
        engine = self.client.engine_of(path)
        return engine.model if engine is not None else None

    @property
    def ready(self) -> p.Ready | None:
        """The host's facts about this machine (GPU offload, cores), once it started."""
        return self.client.ready

    @property
    def accepted_sampling(self) -> frozenset[str] | None:
        """The sampling settings the active engine takes: None for all."""
        return self.client.accepted_sampling

    def loaded_models(self) -> list[LoadedModel]:
        """The window's model and those the API loaded, with their memory and last use."""
        return self.client.loaded_models()

    def request_memory(self) -> None:
        """Ask every loaded model's engine what it holds; memory_reported follows. Not behind
        the scheduler's jobs (the hosts answer beside the replies they write); one at a time:
        a request while one is under way is dropped (its answer is as fresh)."""
        if not self._memory_asked.acquire(blocking=False):
            return

        def run() -> None:
            try:
                reports = self.client.memory_reports()
            except EngineError:
                reports = {}
            finally:
                self._memory_asked.release()
            self.memory_reported.emit(reports)

        threading.Thread(target=run, name="memory-report", daemon=True).start()

    def set_api_params(self, params: Callable[[str], LoadParams]) -> None:
        """How a model an API request names is loaded (the window's options for that file)."""
        self.client.configure(api_params=params)

    def set_idle_unload(self, seconds: float) -> None:
        """How long a model the API loaded stays when idle (-1: until asked)."""
        self.client.configure(keep_alive_s=seconds)

    def count_images(self, sizes: Sequence[tuple[int, int]]) -> p.ImagesCounted:
        """Off the GUI thread (it asks the engine): what images of these sizes cost with the
        loaded projector. EngineError when it cannot say."""
        return self.client.count_images(sizes)

    def embed(self, texts: Sequence[str], model: str) -> p.Embedded:
        """Off the GUI thread (it may load `model`): unit vectors from an embedding model,
        loaded beside the chat model (the window's own engine when it is the window's)."""
        return self.client.embed(list(texts), True, group=self.client.group_of(model))

    def embedder(self, model: str) -> RoutedEmbedder:
        """A knowledge embedder for `model`'s vectors, through embed()."""
        return RoutedEmbedder(self.embed, model)

    def api_engine(self) -> tuple[Scheduler, EngineRouter]:
        """What the API server shares with the window: the scheduler its replies queue on
        and the engines behind it. Handed over whole; the window itself calls neither."""
        return self.scheduler, self.client

    def close(self) -> None:
        """Stop what runs, then the engines. Safe to call twice."""
        for rid in self.scheduler.running_ids():
            self.client.cancel(rid)
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
            self.model_load_failed.emit(path, str(exc), None)
            self._crashed(str(exc))
        except LoadRefused as exc:
            refusal: LoadRefusal = exc.refusal
            self.model_load_failed.emit(path, str(exc), refusal)
        except EngineError as exc:
            self.model_load_failed.emit(path, str(exc), None)
        else:
            self.model_loaded.emit(info)

    def _unload(self) -> None:
        try:
            self.client.unload()
        except EngineCrashed as exc:
            self._crashed(str(exc))
        self.model_unloaded.emit()

    def _generate(self, request: GenerationRequest, group: str = "") -> None:
        rid = request.request_id
        pending: list[str] = []
        last_emit = 0.0
        finish = Finish("error", "The engine ended the reply without a reason.")
        try:
            for event in self.client.generate(request, group):
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
        if not self.client.alive and self._last_load is not None and \
                "restarting the engine" in finish.message:
            # The stop watchdog killed a stuck host: the reply is marked stopped (the client
            # says so) and the model comes back by itself, once (other replies on that host
            # end the same way).
            self.generation_finished.emit(rid, Finish("cancelled", RESTARTED))
            if self._restarting.acquire(blocking=False):
                if not self._crash_reported:
                    self._crash_reported = True
                    self.engine_crashed.emit(RESTARTED)
                    params = self._last_load
                    self.scheduler.submit(Job(lambda: self._reload(params), owner="engine",
                                              exclusive=True))
                self._restarting.release()
            return
        self.generation_finished.emit(rid, finish)

    def _reload(self, params: LoadParams) -> None:
        self._load(params)

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
