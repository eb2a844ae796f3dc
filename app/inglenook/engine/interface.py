"""What every engine offers the worker, the API server and the CLI: the local host's client
(client.EngineClient), a remote server's (remote.RemoteClient) and the router in front of them
(router.EngineRouter). What one can do is declared, not probed: `can_tune`, `keeps_states`,
`can_inspect`, `can_embed` and `accepted_sampling` say it, and a method an engine cannot serve
raises EngineError with the reason.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol

from inglenook.core.load import LoadParams, ModelInfo
from inglenook.core.messages import GenerationRequest
from inglenook.engine import protocol as p


class Engine(Protocol):
    # ---- capabilities ----------------------------------------------------------------------
    @property
    def can_tune(self) -> bool:
        """tune() measures threads and batch size (a local engine); else it raises."""
        ...

    @property
    def keeps_states(self) -> bool:
        """The engine keeps conversations' KV states (drop_state() means something)."""
        ...

    @property
    def can_inspect(self) -> bool:
        """inspect() shows the exact prompt (a remote server applies its own template)."""
        ...

    @property
    def can_embed(self) -> bool:
        """embed() gives vectors from the loaded model (a local engine); else it raises."""
        ...

    @property
    def accepted_sampling(self) -> frozenset[str] | None:
        """The sampling settings the engine takes: None for all."""
        ...

    # ---- state -----------------------------------------------------------------------------
    @property
    def ready(self) -> p.Ready | None:
        """The host's facts about this machine, once started."""
        ...

    on_exit: Callable[[], None] | None  # called from any thread when a host process ends

    @property
    def model(self) -> ModelInfo | None: ...

    @property
    def alive(self) -> bool: ...

    @property
    def pid(self) -> int | None: ...

    def lanes(self) -> int:
        """How many replies it decodes at once."""
        ...

    # ---- the model -------------------------------------------------------------------------
    def start(self) -> p.Ready: ...

    def check(self) -> None:
        """Raise EngineCrashed if the engine died while a model was loaded."""
        ...

    def load(self, params: LoadParams,
             on_progress: Callable[[float], None] | None = None) -> ModelInfo:
        """Raises client.LoadRefused (with the fix) or EngineError."""
        ...

    def unload(self) -> None: ...

    # ---- replies and the rest --------------------------------------------------------------
    def generate(self, request: GenerationRequest) -> Iterator[Any]:
        """The request's events (protocol.Started … Finished), exactly one Finished."""
        ...

    def cancel(self, request_id: int) -> None:
        """Stop a request; any thread, returns at once."""
        ...

    def inspect(self, request: GenerationRequest) -> p.PromptView: ...

    def embed(self, texts: Sequence[str] | Sequence[Sequence[int]],
              truncate: bool = True) -> p.Embedded:
        """Unit vectors, one per text (protocol.Embedded.vectors()); EngineError when none."""
        ...

    def drop_state(self, conversation: str, principal: str = "") -> None: ...

    def state_report(self) -> p.StateReport: ...

    def memory_report(self) -> p.MemoryReport:
        """What the engine process holds now (all 0 for a remote engine)."""
        ...

    def tune(self, request_id: int, seconds_per_trial: float = 0.5, apply: bool = True,
             on_progress: Callable[[int, int], None] | None = None) -> p.TuneResult: ...

    def kill(self) -> None: ...

    def close(self) -> None: ...
