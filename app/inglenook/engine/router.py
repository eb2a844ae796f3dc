"""Every engine behind one object (engine.interface.Engine): the window's model, a local file in
an engine host of its own or a remote server's (providers.py), and the models API requests
name, loaded just in time from the library, each in an engine host of its own (a crash costs
that model, never another).

The worker, the scheduler and the API server talk to this object; a job's `group` says which
engine it runs on: "" is the window's model, a file's path one the API loaded (resolve()).
Loading a remote model for the window unloads the local one (its memory is freed; the host
process stays for the next local model), and loading a file closes the remote client. A failed
load leaves no model loaded, so what the window shows ("no model") is what the API serves.

Models the API loaded are kept within a memory budget (the least recently used idle one is
unloaded to make room) and unloaded after an idle time-out (`keep_alive`, as Ollama's API has
it); the window's model stays until the window changes it.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from inglenook import paths
from inglenook.core.load import LoadParams, ModelInfo
from inglenook.core.messages import WINDOW, GenerationRequest
from inglenook.core.units import gigabytes
from inglenook.engine import protocol as p
from inglenook.engine.client import EngineClient, EngineError, default_host_command
from inglenook.engine.interface import Engine
from inglenook.engine.providers import ProviderStore, parse_model_ref
from inglenook.engine.remote import RemoteClient
from inglenook.engine.remote_api import Endpoint
from inglenook.engine.remote_keys import KeyStoreError

DEFAULT_KEEP_ALIVE_S = 300.0  # a model the API loaded, idle this long, is unloaded
BUDGET_SHARE = 0.8  # the automatic budget for loaded models: of the machine's RAM
_REAP_S = 1.0


@dataclass(frozen=True)
class LoadedModel:
    """A model loaded now, as the window lists it."""

    key: str  # "" the window's, else its file
    name: str
    path: str
    by_window: bool
    memory_bytes: int  # the fit planner's estimate (0: unknown, a remote model)
    lanes: int
    busy: int  # replies running on it now
    idle_s: float  # since its last reply ended (0 while one runs)
    keep_alive_s: float  # unloaded when idle this long (-1: never)
    vision: bool = False  # loaded with a projector: it sees images


class _Hosted:
    """A model the API loaded, in a host of its own."""

    def __init__(self, key: str, client: EngineClient, keep_alive: float) -> None:
        self.key, self.client, self.keep_alive = key, client, keep_alive
        self.lock = threading.Lock()  # one load at a time
        self.busy = 0
        self.last_used = time.monotonic()
        self.estimate = 0  # the fit planner's estimate when it was loaded

    @property
    def memory_bytes(self) -> int:
        model = self.client.model
        return (model.memory_bytes if model is not None else 0) or self.estimate


class EngineRouter:
    """`local` runs the window's files; remote references are resolved through `providers`.
    `library()` lists (name, path) of the models an API request may name; `api_params(path)`
    says how to load one; `budget()` is the memory (bytes) models the API loaded may take
    together with the window's (0: BUDGET_SHARE of RAM); `command` runs each engine host."""

    def __init__(self, local: EngineClient | None = None,
                 providers: ProviderStore | None = None, *,
                 library: Callable[[], list[tuple[str, str]]] | None = None,
                 api_params: Callable[[str], LoadParams] | None = None,
                 budget: Callable[[], int] | None = None,
                 keep_alive_s: float = DEFAULT_KEEP_ALIVE_S,
                 command: list[str] | None = None) -> None:
        self._command = command or (local.command if local is not None
                                    else default_host_command())
        self.local = local or EngineClient(command=self._command)
        self.providers = providers or ProviderStore()
        self.remote: RemoteClient | None = None
        self._remote_key: tuple[str, Endpoint] | None = None
        self._active: EngineClient | RemoteClient = self.local
        self._library = library or _installed
        # How a model an API request names is loaded (the window sets its own options).
        self.api_params: Callable[[str], LoadParams] = api_params or (lambda p: LoadParams(p))
        self._budget = budget or (lambda: 0)
        self.keep_alive_s = keep_alive_s
        self._lock = threading.Lock()
        self._hosted: dict[str, _Hosted] = {}
        self._window_busy = 0
        self._window_used = time.monotonic()
        self._requests: dict[int, Engine] = {}  # request id -> the engine running it
        self._closed = threading.Event()
        self._reaper: threading.Thread | None = None  # started with the first API model
        self.on_change: Callable[[], None] | None = None  # what is loaded changed (any thread)

    # ---- capabilities (engine.interface.Engine) ------------------------------------------------
    @property
    def is_remote(self) -> bool:
        return self._active is not self.local

    @property
    def can_tune(self) -> bool:
        return self._active.can_tune

    @property
    def keeps_states(self) -> bool:
        return self._active.keeps_states

    @property
    def can_inspect(self) -> bool:
        return self._active.can_inspect

    @property
    def can_embed(self) -> bool:
        return self._active.can_embed

    @property
    def accepted_sampling(self) -> frozenset[str] | None:
        """The sampling settings the window's engine takes: None for all (a local one)."""
        return self._active.accepted_sampling

    # ---- what the worker and the API server read -------------------------------------------
    @property
    def ready(self) -> p.Ready | None:
        return self.local.ready  # GPU offload and cores: facts about this machine

    @property
    def alive(self) -> bool:
        return self._active.alive

    @property
    def model(self) -> ModelInfo | None:
        return self._active.model

    @property
    def pid(self) -> int | None:
        return self.local.pid

    @property
    def on_exit(self) -> Callable[[], None] | None:
        return self.local.on_exit

    @on_exit.setter
    def on_exit(self, callback: Callable[[], None] | None) -> None:
        self.local.on_exit = callback  # the window's host; the API's are the router's business

    def lanes(self, group: str = "") -> int:
        """Replies an engine runs at once: the window's ("") or a model the API loaded (one
        until it is loaded)."""
        if not group:
            return self._active.lanes()
        hosted = self._hosted.get(group)
        return hosted.client.lanes() if hosted is not None else 1

    # ---- the window's model ----------------------------------------------------------------
    def start(self) -> p.Ready:
        return self.local.start()

    def check(self) -> None:
        if not self.is_remote:
            self.local.check()

    def load(self, params: LoadParams,
             on_progress: Callable[[float], None] | None = None) -> ModelInfo:
        ref = parse_model_ref(params.model_path)
        try:
            if ref is None:
                self._drop_remote()
                self._active = self.local
                self._drop_hosted(params.model_path)  # the window's engine runs it now
                return self.local.load(params, on_progress)
            remote = self._remote_for(ref[0])
            self._active = remote
            with contextlib.suppress(EngineError):  # a host already gone has nothing loaded
                self.local.unload()
            return remote.load(params, on_progress)
        finally:
            self._changed()

    def _remote_for(self, provider_id: str) -> RemoteClient:
        provider = self.providers.get(provider_id)
        if provider is None:
            raise EngineError("This remote model's endpoint is no longer in Remote engines; "
                              "add it again or choose another model.")
        try:
            endpoint = self.providers.endpoint(provider)
        except KeyStoreError as exc:
            raise EngineError(str(exc)) from None
        key = (provider.id, endpoint)
        if self.remote is None or self._remote_key != key:
            self._drop_remote()
            self.remote, self._remote_key = RemoteClient(endpoint), key
        self.remote.marked = frozenset(provider.vision_models)  # as saved now
        return self.remote

    def _drop_remote(self) -> None:
        remote, self.remote, self._remote_key = self.remote, None, None
        if remote is not None:
            remote.close()

    def unload(self) -> None:
        self._active.unload()
        self._changed()

    # ---- the models API requests name --------------------------------------------------------
    def resolve(self, name: str) -> str:
        """The group an API request naming `name` runs on: "" (the window's model) for its
        name, an empty or unknown one, else the library's file of that name."""
        wanted = name.strip().lower()
        model = self.model
        if not wanted or (model is not None and wanted in (model.name.lower(),
                                                           Path(model.path).name.lower())):
            return ""
        for entry_name, path in self._library():
            if wanted in (entry_name.lower(), Path(path).name.lower()):
                return "" if model is not None and model.path == path else path
        return ""

    def names(self) -> list[str]:
        """What /v1/models lists: what is loaded first, then the rest of the library."""
        loaded = [m.name for m in self.loaded_models()]
        return loaded + [n for n, _path in self._library() if n not in loaded]

    def library(self) -> list[tuple[str, str]]:
        """(name, path) of every model an API request may name (loaded or not)."""
        return self._library()

    def preload(self, group: str, keep_alive: float | None = None) -> None:
        """Load the model of `group` now, as a reply would (Ollama's load idiom: a request
        with no prompt). EngineError when it cannot be; nothing for the window's model."""
        if not group:
            return
        self._hosted_for(group)
        hosted = self._hosted.get(group)
        if hosted is not None:
            if keep_alive is not None:
                hosted.keep_alive = keep_alive
            hosted.last_used = time.monotonic()

    def configure(self, *, api_params: Callable[[str], LoadParams] | None = None,
                  keep_alive_s: float | None = None) -> None:
        """The window's settings for models API requests name: how one is loaded, and how long
        one stays when idle (-1: until asked). Any thread."""
        with self._lock:
            if api_params is not None:
                self.api_params = api_params
            if keep_alive_s is not None:
                self.keep_alive_s = keep_alive_s

    def set_keep_alive(self, group: str, seconds: float) -> None:
        """How long a model the API loaded stays when idle (a request's keep_alive)."""
        hosted = self._hosted.get(group)
        if hosted is not None:
            hosted.keep_alive = seconds

    def _hosted_for(self, group: str) -> EngineClient:
        """The engine of a model the API named, loading it now if it is not loaded."""
        with self._lock:
            hosted = self._hosted.get(group)
            if hosted is None:
                log = paths.log_dir() / f"engine-{Path(group).stem[:60]}.log"
                hosted = _Hosted(group, EngineClient(log_path=log, command=self._command),
                                 self.keep_alive_s)
                self._hosted[group] = hosted
                if self._reaper is None:
                    self._reaper = threading.Thread(target=self._reap, daemon=True,
                                                    name="engine-idle")
                    self._reaper.start()
        with hosted.lock:
            if hosted.client.model is None or not hosted.client.alive:
                params = own_context(self.api_params(group))
                hosted.estimate = self._make_room(group, params)
                try:
                    hosted.client.load(params)
                except EngineError:
                    with self._lock:
                        self._hosted.pop(group, None)
                    hosted.client.close()
                    raise
                finally:
                    self._changed()
        return hosted.client

    def _make_room(self, group: str, params: LoadParams) -> int:
        """Unload idle models the API loaded, least recently used first, until the new one's
        estimate fits the budget (returned); refuse when it cannot."""
        need = _estimate(params)
        budget = self._budget() or int(psutil.virtual_memory().total * BUDGET_SHARE)
        while True:
            with self._lock:
                others = [h for k, h in self._hosted.items() if k != group
                          and h.client.model is not None]
            used = sum(h.memory_bytes for h in others)
            window = self.model.memory_bytes if self.model is not None else 0
            if used + window + need <= budget or need == 0:
                return need
            idle = sorted((h for h in others if h.busy == 0), key=lambda h: h.last_used)
            if not idle:
                raise EngineError(
                    f"{Path(group).stem} needs about {gigabytes(need)}, more than the "
                    f"{gigabytes(budget)} left for models while the others are in use.")
            self.unload_model(idle[0].key)

    def unload_model(self, key: str) -> None:
        """Unload a model the API loaded ("" : the window's)."""
        if not key:
            self.unload()
            return
        with self._lock:
            hosted = self._hosted.pop(key, None)
        if hosted is not None:
            hosted.client.close()
            self._changed()

    def _drop_hosted(self, path: str) -> None:
        """The window now runs this file: the API's host of it goes (its requests move)."""
        if path in self._hosted and self._hosted[path].busy == 0:
            self.unload_model(path)

    def group_of(self, path: str) -> str:
        """The group that runs the model at path: "" when it is the window's, else its own
        (loaded beside the window's model on first use)."""
        model = self.model
        return "" if model is not None and model.path == path else path

    def engine_of(self, group: str) -> EngineClient | None:
        """The engine host of a model the API loaded (None when it is not loaded)."""
        hosted = self._hosted.get(group)
        return hosted.client if hosted is not None else None

    def loaded_models(self) -> list[LoadedModel]:
        now = time.monotonic()
        shown = []
        model = self.model
        if model is not None:
            shown.append(LoadedModel("", model.name, model.path, True, model.memory_bytes,
                                     self._active.lanes(), self._window_busy,
                                     0.0 if self._window_busy else now - self._window_used,
                                     -1.0, model.vision))
        with self._lock:
            hosted = list(self._hosted.values())
        for h in hosted:
            info = h.client.model
            if info is not None:
                shown.append(LoadedModel(h.key, info.name, info.path, False, h.memory_bytes,
                                         info.n_slots, h.busy,
                                         0.0 if h.busy else now - h.last_used, h.keep_alive,
                                         info.vision))
        return shown

    def _reap(self) -> None:
        """Unload models the API loaded once idle past their keep_alive."""
        while not self._closed.wait(_REAP_S):
            now = time.monotonic()
            with self._lock:
                expired = [h.key for h in self._hosted.values() if h.busy == 0
                           and h.keep_alive >= 0 and now - h.last_used > h.keep_alive
                           and not h.lock.locked()]
            for key in expired:
                self.unload_model(key)

    # ---- replies ---------------------------------------------------------------------------
    def generate(self, request: GenerationRequest, group: str = "",
                 keep_alive: float | None = None) -> Iterator[Any]:
        """The events of a reply on the window's engine or a model the API named (loaded
        first when needed: EngineError when it cannot be; `keep_alive` seconds: how long it
        stays once idle)."""
        engine: Engine = self._hosted_for(group) if group else self._active
        hosted = self._hosted.get(group) if group else None
        if hosted is not None and keep_alive is not None:
            hosted.keep_alive = keep_alive
        rid = request.request_id
        self._use(hosted, +1)
        with self._lock:
            self._requests[rid] = engine
        try:
            yield from engine.generate(request)
        finally:
            with self._lock:
                self._requests.pop(rid, None)
            self._use(hosted, -1)

    def _use(self, hosted: _Hosted | None, delta: int) -> None:
        with self._lock:
            if hosted is None:
                self._window_busy += delta
                self._window_used = time.monotonic()
            else:
                hosted.busy += delta
                hosted.last_used = time.monotonic()

    def cancel(self, request_id: int) -> None:
        with self._lock:
            engine = self._requests.get(request_id, self._active)
        engine.cancel(request_id)

    def inspect(self, request: GenerationRequest) -> p.PromptView:
        return self._active.inspect(request)

    def count_images(self, sizes: Sequence[tuple[int, int]]) -> p.ImagesCounted:
        """What images of these sizes cost with the window's model (client.count_images); any
        thread. A remote engine cannot say: EngineError, and the window estimates."""
        engine = self._active
        if not isinstance(engine, EngineClient):
            raise EngineError("A remote engine does not say what an image costs.")
        return engine.count_images(sizes)

    def embed(self, texts: Sequence[str] | Sequence[Sequence[int]], truncate: bool = True,
              group: str = "", keep_alive: float | None = None) -> p.Embedded:
        """Vectors from the window's engine or a model the API named (loaded first, as for a
        reply); EngineError when the engine has none to give."""
        engine: Engine = self._hosted_for(group) if group else self._active
        hosted = self._hosted.get(group) if group else None
        if hosted is not None and keep_alive is not None:
            hosted.keep_alive = keep_alive
        if not engine.can_embed:
            return engine.embed(texts, truncate)  # raises, saying why
        self._use(hosted, +1)
        try:
            return engine.embed(texts, truncate)
        finally:
            self._use(hosted, -1)

    def drop_state(self, conversation: str, principal: str = WINDOW) -> None:
        self.local.drop_state(conversation, principal)

    def state_report(self) -> p.StateReport:
        return self._active.state_report()

    def forget_states(self) -> None:
        """Forget cached states: every chat's KV state kept by the engines here, in memory
        and on disk, of every model (a remote server keeps its own)."""
        with self._lock:
            clients = [self.local, *(h.client for h in self._hosted.values())]
        for client in clients:
            if isinstance(client, EngineClient):
                client.forget_states()

    def memory_report(self) -> p.MemoryReport:
        return self._active.memory_report()

    def memory_reports(self) -> dict[str, p.MemoryReport]:
        """What each loaded model's engine holds, by LoadedModel.key (blocks on each host's
        answer: call it off the GUI thread). A host that died is left out."""
        engines: list[tuple[str, Engine]] = [("", self._active)] if self.model else []
        with self._lock:
            engines += [(h.key, h.client) for h in self._hosted.values()]
        reports = {}
        for key, engine in engines:
            with contextlib.suppress(EngineError):
                reports[key] = engine.memory_report()
        return reports

    def tune(self, request_id: int, seconds_per_trial: float = 0.5, apply: bool = True,
             on_progress: Callable[[int, int], None] | None = None) -> p.TuneResult:
        """Tune the window's engine (a remote one raises EngineError: it tunes itself)."""
        return self._active.tune(request_id, seconds_per_trial, apply, on_progress)

    # ---- the end ---------------------------------------------------------------------------
    def kill(self) -> None:
        self._active.kill()

    def close(self) -> None:
        self._closed.set()
        self._drop_remote()
        self._active = self.local
        with self._lock:
            hosted, self._hosted = list(self._hosted.values()), {}
        for h in hosted:
            h.client.close()
        self.local.close()

    def _changed(self) -> None:
        if self.on_change is not None:
            with contextlib.suppress(Exception):  # a listener's bug must not stop a load
                self.on_change()


def _installed() -> list[tuple[str, str]]:
    from inglenook.models.library import installed_models

    return [(m.name, m.path) for m in installed_models()]


def own_context(params: LoadParams) -> LoadParams:
    """An embedding model (its header names a pooling) loads at its own trained context when
    the options ask for more, as the window loads one: a server started with `--ctx 8192` must
    not have its 512-token embedder refused as beyond its training. Chat models keep the
    options' context (a longer one is refused, unless allowed, as the window refuses it)."""
    from inglenook.models.gguf import GGUFError, read_header

    try:
        header = read_header(params.model_path)
    except (GGUFError, OSError):
        return params  # the load says why
    trained = header.context_length
    if (f"{header.architecture}.pooling_type" not in header.metadata or trained <= 0
            or params.allow_beyond_trained or params.n_ctx <= trained):
        return params
    return params.replace(n_ctx=trained)


def _estimate(params: LoadParams) -> int:
    """The fit planner's estimate of a load (0 when the file cannot say), with its vision
    projector and its draft model, as the engine host counts them before it loads."""
    from inglenook.core.load import choose_context
    from inglenook.models import fit
    from inglenook.models.gguf import GGUFError, read_header
    from inglenook.models.projector import projector_info

    try:
        header = read_header(params.model_path)
    except (GGUFError, OSError):
        return 0
    projector_bytes, draft = 0, None
    try:  # one that cannot be read fails the load, which says why: counted without it
        if params.mmproj_path:
            projector = projector_info(read_header(params.mmproj_path))
            projector_bytes = projector.memory_bytes if projector is not None else 0
        if params.draft_model_path:
            draft = read_header(params.draft_model_path)
    except (GGUFError, OSError):
        pass
    try:
        shape, draft_shape = fit.load_shapes(header, projector_bytes, draft)
    except GGUFError:
        return 0
    n_ctx = choose_context(params.n_ctx, header.context_length)
    memory = fit.system_memory()
    pool = max(params.kv_pool, n_ctx) if params.kv_pool else 0
    slots = params.n_slots or fit.default_slots(shape, n_ctx, params.kv_cache_type, memory,
                                                draft_shape, pool)
    return fit.plan(shape, n_ctx, params.kv_cache_type, memory, draft_shape,
                    slots=slots, pool=pool, flash=params.flash_attn).total_bytes


def _is_an_engine(router: EngineRouter) -> Engine:
    """For the type checker: the router is an Engine, as the clients behind it are."""
    return router
