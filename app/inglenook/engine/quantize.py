"""A smaller copy of a local model: llama.cpp's own quantizer (llama_model_quantize), run in an
engine host process of its own, the result checked before it is placed in the models folder.

Why a host of its own: llama.cpp stays in engine/host/ (the only package importing llama_cpp,
and what the frozen app runs as `--engine-host`); a quantization takes minutes, reads whatever
file it is given and has no cancel of its own. In its own process the chat engine keeps
serving, a cancel ends that process, and a crash costs only the copy.

  1. planned first (models/quantize_plan.py): the source's header, the type, that the copy
     does not exist yet, its size from the source's tensors, and free disk space for it;
  2. written as `<copy>.gguf.<pid>.quantizing` in the models folder (not .gguf: the Library
     does not list it; same folder: the final rename is atomic), with progress read from
     llama.cpp's log, one line per tensor, counted in the source's tensor bytes;
  3. checked: its header read (tensor data inside the file, the file type asked for), loaded by
     the host, and a short greedy reply generated;
  4. renamed to `<copy>.gguf`. A failure or a cancel deletes the partial file.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil

from inglenook import paths
from inglenook.core.load import LoadParams
from inglenook.core.messages import GenerationRequest, Message
from inglenook.core.sampling import SamplingParams
from inglenook.engine import protocol as p
from inglenook.engine.client import EngineClient, EngineError
from inglenook.models.gguf import GGUFError, read_header
from inglenook.models.quantize_plan import (  # re-exported: the planning half of a copy
    TYPES,
    Plan,
    QuantizeError,
    estimate_bytes,
    plan,
    read_headers,
)

__all__ = [
    "SUFFIX",
    "TYPES",
    "Plan",
    "Progress",
    "QuantizeCancelled",
    "QuantizeError",
    "Quantizer",
    "estimate_bytes",
    "plan",
    "read_headers",
    "remove_stale",
]

SUFFIX = ".quantizing"
CHECK_PROMPT = (Message("user", "Say hello."),)


class QuantizeCancelled(QuantizeError):
    pass


@dataclass(frozen=True)
class Progress:
    """stage: "quantizing" (tensors_done of tensors_total, `fraction` of the source's tensor
    bytes), "checking" (reading, loading, a short reply) or "done"."""

    stage: str
    fraction: float = 0.0
    tensors_done: int = 0
    tensors_total: int = 0
    written_bytes: int = 0
    elapsed_s: float = 0.0
    eta_s: float | None = None  # None until a few percent are done


class Quantizer:
    """One copy: `run()` on a worker thread (it blocks for the whole job), `cancel()` from
    any thread."""

    def __init__(self, plan: Plan, *, threads: int = 0, log_path: Path | None = None,
                 command: list[str] | None = None) -> None:
        self.plan = plan
        self.threads = threads
        self._client = EngineClient(log_path=log_path or paths.log_dir() / "quantize.log",
                                    command=command)
        self._cancelled = threading.Event()
        self.partial = plan.output.with_name(f"{plan.output.name}.{os.getpid()}{SUFFIX}")
        self.seconds = 0.0  # llama.cpp's quantizing alone, once done

    def cancel(self) -> None:
        self._cancelled.set()
        self._client.kill()  # llama.cpp cannot be interrupted: its process is ended

    def run(self, on_progress: Callable[[Progress], None] | None = None) -> Path:
        """Quantize, check, place; the copy's path. Raises QuantizeError (QuantizeCancelled)."""
        report = on_progress or (lambda _progress: None)
        remove_stale(self.plan.output.parent)
        started = time.perf_counter()
        try:
            done = self._client.quantize(
                p.Quantize(str(self.plan.source), str(self.partial), TYPES[self.plan.type][0],
                           self.threads, self.plan.requantize),
                lambda event: report(self._progress(event, started)))
            if done.error:
                raise QuantizeError(done.error)
            self.seconds = done.seconds
            report(Progress("checking", 1.0, elapsed_s=time.perf_counter() - started,
                            written_bytes=_size(self.partial)))
            self._check()
            os.replace(self.partial, self.plan.output)
        except (EngineError, OSError) as exc:
            if self._cancelled.is_set():
                raise QuantizeCancelled("Cancelled; nothing was kept.") from None
            raise QuantizeError(f"The copy was not made: {exc}") from None
        finally:
            self._client.close()
            with contextlib.suppress(OSError):
                self.partial.unlink()
        report(Progress("done", 1.0, elapsed_s=time.perf_counter() - started,
                        written_bytes=_size(self.plan.output)))
        return self.plan.output

    def _progress(self, event: p.QuantizeProgress, started: float) -> Progress:
        elapsed = time.perf_counter() - started
        eta = elapsed * (1 - event.fraction) / event.fraction if event.fraction > 0.02 else None
        return Progress("quantizing", event.fraction, event.done, event.total,
                        _size(self.partial), elapsed, eta)

    def _check(self) -> None:
        try:
            header = read_header(self.partial)
        except GGUFError as exc:
            raise QuantizeError(f"llama.cpp wrote a file that does not read back: {exc}") from None
        if header.quantization != self.plan.type:
            raise QuantizeError(f"llama.cpp wrote a {header.quantization or 'different'} file, "
                                f"not {self.plan.type}.")
        self._client.load(LoadParams(str(self.partial), n_ctx=512, prompt_lookup=False))
        events = list(self._client.generate(GenerationRequest(
            1, CHECK_PROMPT, SamplingParams(temperature=0.0, seed=1, max_tokens=8))))
        finish = next(e for e in events if isinstance(e, p.Finished)).finish
        stats = next((e.stats for e in events if isinstance(e, p.ReplyStats)), None)
        if finish.reason == "error" or stats is None or stats.generated_tokens == 0:
            raise QuantizeError(f"The copy loads but does not answer: {finish.message or 'no'} "
                                "reply.")
        self._client.unload()


def remove_stale(folder: Path) -> None:
    """Partial copies of quantizers whose process is gone (a crash, a kill)."""
    for partial in folder.glob(f"*{SUFFIX}"):
        pid = partial.name.removesuffix(SUFFIX).rsplit(".", 1)[-1]
        if pid.isdigit() and not psutil.pid_exists(int(pid)):
            with contextlib.suppress(OSError):
                partial.unlink()


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0
