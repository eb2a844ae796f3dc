"""A chat engine on another machine: any OpenAI-compatible server, behind EngineClient's interface.

`RemoteClient` answers the calls the window's worker, the scheduler, the API server and the CLI
make on `EngineClient` (start, load, generate, cancel, inspect, close…), so a remote model is
chatted with like a local one. One thread drives it; `cancel()` and `kill()` may come from any
thread and take effect at once: they shut the reply's socket down, which wakes the reading
thread even while the server is still evaluating the prompt and sends nothing (the server sees
the client go and stops generating). Nothing is retried: a failure ends the reply with a message
saying what happened, and the text that arrived before it is kept.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import httpx2

from inglenook.core.images import ImageRefused
from inglenook.core.load import LoadParams, ModelInfo
from inglenook.core.messages import GenerationRequest
from inglenook.core.replies import Finish
from inglenook.engine import protocol as p
from inglenook.engine.providers import model_name_of
from inglenook.engine.remote_api import (
    LIST_TIMEOUT,
    REPLY_TIMEOUT,
    Endpoint,
    RemoteError,
    RemoteModel,
    http_client,
    list_models,
    network_error,
    reason,
    status_error,
)
from inglenook.engine.remote_dialects import GENERIC, chat_body, dialect, unsendable
from inglenook.engine.remote_stream import ReplyStream
from inglenook.engine.remote_vision import server_vision

NO_INSPECT = ("The exact prompt is not available for a remote engine: the server applies its "
              "own chat template.")
NO_EMBED = ("Embeddings come from a local model: a remote engine's are not used here. Load a "
            "local model (an embedding model is best).")
_MAX_EARLY_CANCELS = 64  # stops asked for requests not running yet (bounded: ids never reused)


class RemoteClient:
    """`endpoint` is the server (its name, if any, is used in messages). One reply at a time:
    the server batches requests of its own clients; this one is one of them."""

    can_tune = False  # engine.interface.Engine's capabilities
    keeps_states = False
    can_inspect = False
    can_embed = False

    def __init__(self, endpoint: Endpoint, marked: Iterable[str] = ()) -> None:
        self.endpoint = endpoint
        # Models the user marked as reading images, for servers that do not say (remote_vision)
        self.marked: frozenset[str] = frozenset(marked)
        self.vision_said: bool | None = None  # what the server said of the chosen model
        self.ready: p.Ready | None = None
        self.model: ModelInfo | None = None
        self.server = GENERIC.server  # the kind of server (remote_dialects), from the listing
        self.on_exit: Callable[[], None] | None = None  # a remote engine never exits by itself
        self._http: httpx2.Client | None = None
        self._lock = threading.Lock()
        self._running: int | None = None
        self._socket: socket.socket | None = None
        self._cancelled: dict[int, None] = {}  # ordered: the oldest are forgotten first
        self._closed = False

    # ---- the engine's life: nothing to start; "alive" until closed -------------------------
    @property
    def pid(self) -> int | None:
        return None

    @property
    def alive(self) -> bool:
        return not self._closed

    @property
    def accepted_sampling(self) -> frozenset[str]:
        """The SamplingParams fields this server gets; the others are not sent."""
        return dialect(self.server).accepted

    def lanes(self) -> int:
        return 1

    def start(self) -> p.Ready:
        self._closed = False
        if self.ready is None:
            self.ready = p.Ready(pid=0, gpu_offload_supported=False, physical_cores=0)
        return self.ready

    def check(self) -> None:
        """Nothing to check: a server that went away fails the next request, with a message."""

    def close(self) -> None:
        self._abort()
        self._closed = True
        self.model = None
        http, self._http = self._http, None
        if http is not None:
            http.close()

    def kill(self) -> None:
        """Abandon the running reply at once (the stop watchdog's last resort)."""
        self._abort()

    def _client(self) -> httpx2.Client:
        if self._http is None:
            self._http = http_client(self.endpoint, REPLY_TIMEOUT)
        return self._http

    # ---- the model -------------------------------------------------------------------------
    def load(self, params: LoadParams,
             on_progress: Callable[[float], None] | None = None) -> ModelInfo:
        """Choose a model the server offers (model_path: a remote reference or a bare model
        name; empty: the first one listed). Only the server's model list is read."""
        self.start()
        started = time.monotonic()
        listing = list_models(self.endpoint, LIST_TIMEOUT, client=self._client())
        chosen = _choose(model_name_of(params.model_path), listing.models, self.endpoint.who)
        self.server = listing.server
        said = chosen.vision
        if said is None:
            said = server_vision(self._client(), self.endpoint, self.server, chosen.id)
        self.vision_said = said
        vision = chosen.id in self.marked if said is None else said
        if on_progress:
            on_progress(1.0)
        self.model = ModelInfo(
            path=params.model_path or chosen.id, name=chosen.id,
            architecture=f"remote: {dialect(self.server).label} at {self.endpoint.host}",
            size_bytes=0, n_ctx=chosen.n_ctx, n_ctx_train=chosen.n_ctx, n_threads=0,
            n_gpu_layers=0, gpu_offload_supported=False, flash_attn=False, kv_cache_type="",
            template_source="gguf", load_seconds=time.monotonic() - started, vision=vision)
        return self.model

    def unload(self) -> None:
        self.model = None

    # ---- replies ---------------------------------------------------------------------------
    def generate(self, request: GenerationRequest) -> Iterator[Any]:
        """Yield Started, Deltas, ReplyStats and exactly one Finished for this request."""
        rid = request.request_id
        model = self.model
        with self._lock:
            self._running, self._socket = rid, None
            early = rid in self._cancelled
        try:
            if model is None or early:
                yield p.Finished(rid, Finish("cancelled") if early else Finish(
                    "error", "No remote model is chosen; choose one in the model picker."))
                return
            yield p.Started(rid)
            if unsent := unsendable(request):
                yield p.Finished(rid, Finish("error", f"A remote engine is not sent {unsent}: "
                                             "load a local model for it."))
                return
            reply = ReplyStream(rid, self.endpoint.who, time.monotonic())
            try:
                yield from self._stream(request, model, reply)
            except (RemoteError, ImageRefused) as exc:  # an image that cannot be sent: said
                reply.error = str(exc)
            except httpx2.SSEError as exc:
                reply.error = (f"{self.endpoint.who} did not stream the reply as an "
                               f"OpenAI-compatible server does ({reason(exc)}).")
            except (httpx2.HTTPError, httpx2.InvalidURL, OSError) as exc:
                if not self._is_cancelled(rid):
                    reply.error = str(network_error(exc, self.endpoint, "during the reply"))
            yield from reply.end(self._is_cancelled(rid), model.n_ctx, request.sampling.seed)
        finally:
            with self._lock:
                self._running, self._socket = None, None
                self._cancelled.pop(rid, None)

    def _stream(self, request: GenerationRequest, model: ModelInfo,
                reply: ReplyStream) -> Iterator[p.Delta]:
        rid = request.request_id
        body = chat_body(request, model.name, self.server)
        with self._client().stream("POST", self.endpoint.url("chat/completions"),
                                   json=body) as response:
            self._attach(rid, response)
            if response.status_code >= 300:
                raise status_error(response, self.endpoint, "the reply")
            yield from reply.read(httpx2.EventSource(response), lambda: self._is_cancelled(rid))

    def _attach(self, rid: int, response: httpx2.Response) -> None:
        """Keep the reply's socket for cancel(); a stop that came meanwhile takes effect now."""
        stream = response.extensions.get("network_stream")
        sock = stream.get_extra_info("socket") if stream is not None else None
        with self._lock:
            self._socket = sock
            if rid in self._cancelled:
                _shut(sock)

    def cancel(self, request_id: int) -> None:
        """Stop a request, running or about to run. Safe from any thread; returns at once."""
        with self._lock:
            self._cancelled[request_id] = None
            while len(self._cancelled) > _MAX_EARLY_CANCELS:
                del self._cancelled[next(iter(self._cancelled))]
            if self._running == request_id:
                _shut(self._socket)

    def _is_cancelled(self, rid: int) -> bool:
        with self._lock:
            return rid in self._cancelled

    def _abort(self) -> None:
        with self._lock:
            if self._running is not None:
                self._cancelled[self._running] = None
                _shut(self._socket)

    # ---- what only a local engine has ------------------------------------------------------
    def inspect(self, request: GenerationRequest) -> p.PromptView:
        raise RemoteError(NO_INSPECT)

    def embed(self, texts: Sequence[str] | Sequence[Sequence[int]],
              truncate: bool = True) -> p.Embedded:
        raise RemoteError(NO_EMBED)

    def drop_state(self, conversation: str, principal: str = "") -> None:
        """The server keeps (or not) its own caches; there is nothing here to forget."""

    def state_report(self) -> p.StateReport:
        return p.StateReport()

    def memory_report(self) -> p.MemoryReport:
        """Another machine's memory: nothing of it is here."""
        return p.MemoryReport()

    def tune(self, request_id: int, seconds_per_trial: float = 0.5, apply: bool = True,
             on_progress: Callable[[int, int], None] | None = None) -> p.TuneResult:
        raise RemoteError("Remote engines tune themselves.")


def _choose(wanted: str, models: tuple[RemoteModel, ...], label: str) -> RemoteModel:
    if not wanted:
        if not models:
            raise RemoteError(f"{label} lists no models: give the name of the one to use.")
        return models[0]
    for model in models:
        if model.id == wanted:
            return model
    if not models:  # some servers list nothing and take any name
        return RemoteModel(wanted)
    offered = ", ".join(m.id for m in models[:8]) + (" …" if len(models) > 8 else "")
    raise RemoteError(f"{label} does not offer the model {wanted!r}. It offers: {offered}.")


def _shut(sock: socket.socket | None) -> None:
    """Shut a socket down from any thread: a read blocked on it returns at once (closing it
    would not wake that read)."""
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)

