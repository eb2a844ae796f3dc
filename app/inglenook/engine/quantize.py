"""A smaller copy of a local model: llama.cpp's own quantizer (llama_model_quantize), run in an
engine host process of its own, the result checked before it is placed in the models folder.

Why a host of its own: llama.cpp stays in engine/host/ (the only package importing llama_cpp,
and what the frozen app runs as `--engine-host`); a quantization takes minutes, reads whatever
file it is given and has no cancel of its own. In its own process the chat engine keeps
serving, a cancel ends that process, and a crash costs only the copy.

  1. checked first: the source's header, the type, that the copy does not exist yet, and free
     disk space for an estimate of its size that errs on the large side;
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
import re
import shutil
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
from inglenook.models.filenames import parse_quant, split_name
from inglenook.models.gguf import GGUFError, GGUFHeader, read_header
from inglenook.models.library import split_parts

# llama_ftype (llama.h) and bits per weight for the size estimate. Types that need an importance
# matrix (IQ1/IQ2/IQ3) are left out: Inglenook has no way to make one.
TYPES: dict[str, tuple[int, float]] = {
    "F16": (1, 16.0), "BF16": (32, 16.0), "Q8_0": (7, 8.5), "Q6_K": (18, 6.5625),
    "Q5_K_M": (17, 5.5), "Q5_K_S": (16, 5.5), "Q5_1": (9, 6.0), "Q5_0": (8, 5.5),
    "Q4_K_M": (15, 4.5), "Q4_K_S": (14, 4.5), "Q4_1": (3, 5.0), "Q4_0": (2, 4.5),
    "IQ4_NL": (25, 4.5), "IQ4_XS": (30, 4.25), "Q3_K_L": (13, 3.4375),
    "Q3_K_M": (12, 3.4375), "Q3_K_S": (11, 3.4375), "Q2_K": (10, 2.625),
}
# Sources precise enough to quantize from; anything else loses quality twice.
_PRECISE = {"F32", "F16", "BF16", "Q8_0"}
_FALLBACK_BITS = 8.5  # k-quants of rows not a multiple of 256 fall back to up to Q8_0
_MIXES = 1.25  # _M/_L mixes and the output tensor keep some tensors at higher precision
_SLACK = 32 * 2**20
SUFFIX = ".quantizing"
CHECK_PROMPT = (Message("user", "Say hello."),)


class QuantizeError(Exception):
    """Why a copy cannot be made, or was not kept; the message is for the user."""


class QuantizeCancelled(QuantizeError):
    pass


@dataclass(frozen=True)
class Plan:
    source: Path
    type: str
    output: Path  # where the checked copy goes
    estimate_bytes: int  # an upper estimate of its size
    free_bytes: int  # on the models folder's disk
    requantize: bool  # the source is already quantized


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


def read_headers(source: Path) -> list[GGUFHeader]:
    """The headers of every part of a model (QuantizeError when one cannot be read)."""
    try:
        return [read_header(part) for part in split_parts(source)]
    except GGUFError as exc:
        raise QuantizeError(str(exc)) from None


def plan(source: Path, type_name: str, *, allow_requantize: bool = False,
         models_dir: Path | None = None, headers: list[GGUFHeader] | None = None) -> Plan:
    """Check everything that can be checked before starting; raises QuantizeError. `headers`:
    the source's, already read (read_headers), for planning several types."""
    kind = type_name.upper()
    if kind not in TYPES:
        raise QuantizeError(f"Unknown type {type_name!r}; one of {', '.join(TYPES)}.")
    headers = headers if headers is not None else read_headers(source)
    have = headers[0].quantization or parse_quant(source.name).upper()
    if have == kind:
        raise QuantizeError(f"{source.name} is already {kind}.")
    requantize = have not in ("F32", "F16", "BF16")
    if have not in _PRECISE and not allow_requantize:
        raise QuantizeError(
            f"{source.name} is already quantized ({have or 'of unknown type'}): a copy made "
            "from it loses quality twice. Quantize from an F16, BF16 or Q8_0 file, or allow "
            "requantizing explicitly.")
    folder = models_dir or paths.models_dir()
    output = folder / f"{_base_name(source, have)}-{kind}.gguf"
    if output.exists():
        raise QuantizeError(f"{output} already exists.")
    estimate = estimate_bytes(headers, kind)
    free = shutil.disk_usage(folder).free
    if free < estimate:
        raise QuantizeError(
            f"Not enough disk space: the {kind} copy may need up to {estimate / 1e9:.1f} GB "
            f"but {folder} has {free / 1e9:.1f} GB free.")
    return Plan(source, kind, output, estimate, free, requantize)


def estimate_bytes(headers: list[GGUFHeader], kind: str) -> int:
    """An upper estimate of the copy's size: 1-D tensors stay F32, the rest at the type's bits,
    or a fallback type's where a k-quant cannot take the row length."""
    bits = TYPES[kind][1]
    k_quant = "_K" in kind or kind == "IQ4_XS"
    total = 0.0
    for header in headers:
        for tensor in header.tensors:
            if len(tensor.shape) < 2 or tensor.shape[1] == 1:
                total += tensor.n_elements * 4
            elif k_quant and tensor.shape[0] % 256:
                total += tensor.n_elements * _FALLBACK_BITS / 8
            else:
                total += tensor.n_elements * bits / 8
        total += header.data_offset  # metadata, tokenizer included
    return int(total * _MIXES) + _SLACK


def _base_name(source: Path, quant: str) -> str:
    split = split_name(source.name)
    stem = split.base.rsplit("/", 1)[-1] if split else source.name.removesuffix(".gguf")
    if quant:
        stem = re.sub(rf"[-._]?{re.escape(quant)}$", "", stem, flags=re.IGNORECASE) or stem
    return stem


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
