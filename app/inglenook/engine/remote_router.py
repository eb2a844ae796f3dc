"""One engine for the window whichever model is chosen: the local host for a file, a remote
server for a remote reference (providers.py), behind EngineClient's interface.

The worker, the scheduler and the API server keep talking to one object; `load()` decides
where the model lives. Loading a remote model unloads the local one (its memory is freed; the
host process stays for the next local model), and loading a file closes the remote client. A
failed load leaves no model loaded, as a failed local load does, so what the window shows ("no
model") is what the API server serves.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from inglenook.core.load import LoadParams, ModelInfo
from inglenook.core.messages import GenerationRequest
from inglenook.engine import protocol as p
from inglenook.engine.client import EngineClient, EngineError
from inglenook.engine.providers import ProviderStore, parse_model_ref
from inglenook.engine.remote import RemoteClient
from inglenook.engine.remote_api import Endpoint
from inglenook.engine.remote_keys import KeyStoreError


class EngineRouter:
    """`local` runs files; remote references are resolved through `providers`."""

    def __init__(self, local: EngineClient | None = None,
                 providers: ProviderStore | None = None) -> None:
        self.local = local or EngineClient()
        self.providers = providers or ProviderStore()
        self.remote: RemoteClient | None = None
        self._remote_key: tuple[str, Endpoint] | None = None
        self._active: EngineClient | RemoteClient = self.local

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
        self.local.on_exit = callback  # only the host process can exit

    @property
    def is_remote(self) -> bool:
        return self._active is not self.local

    @property
    def accepted_sampling(self) -> frozenset[str] | None:
        """The sampling settings the engine takes: None for all (the local engine)."""
        return self.remote.accepted_sampling if self.is_remote and self.remote else None

    # ---- the model -------------------------------------------------------------------------
    def start(self) -> p.Ready:
        return self.local.start()

    def check(self) -> None:
        if not self.is_remote:
            self.local.check()

    def load(self, params: LoadParams,
             on_progress: Callable[[float], None] | None = None) -> ModelInfo:
        ref = parse_model_ref(params.model_path)
        if ref is None:
            self._drop_remote()
            self._active = self.local
            return self.local.load(params, on_progress)
        remote = self._remote_for(ref[0])
        self._active = remote
        with contextlib.suppress(EngineError):  # a host already gone has nothing loaded
            self.local.unload()
        return remote.load(params, on_progress)

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
        return self.remote

    def _drop_remote(self) -> None:
        remote, self.remote, self._remote_key = self.remote, None, None
        if remote is not None:
            remote.close()

    def unload(self) -> None:
        self._active.unload()

    # ---- replies ---------------------------------------------------------------------------
    def generate(self, request: GenerationRequest) -> Iterator[Any]:
        return self._active.generate(request)

    def cancel(self, request_id: int) -> None:
        self._active.cancel(request_id)

    def inspect(self, request: GenerationRequest) -> p.PromptView:
        return self._active.inspect(request)

    def drop_state(self, conversation: str) -> None:
        self.local.drop_state(conversation)

    def state_report(self) -> p.StateReport:
        return self._active.state_report()

    # ---- the end ---------------------------------------------------------------------------
    def kill(self) -> None:
        self._active.kill()

    def close(self) -> None:
        self._drop_remote()
        self._active = self.local
        self.local.close()
