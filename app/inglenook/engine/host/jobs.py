"""Work that is not a reply: tuning threads and batch size on the loaded model (engine/tune.py
decides what to measure), and quantizing a model file with llama.cpp's quantizer."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from typing import Any

from inglenook.engine import protocol as p
from inglenook.engine.host.llama import (
    LOG_ERROR,
    Batch,
    Context,
    Model,
    SeqMemory,
    log_to,
    quantize,
)
from inglenook.engine.host.loading import LoadedModel, with_threads
from inglenook.engine.host.machine import logical_cores, physical_cores
from inglenook.engine.tune import tune
from inglenook.models.gguf import GGUFError, read_header

_BENCH_TEXT = b"The keeper climbed the stairs of the lighthouse and lit the lamp. " * 400


def run_tune(loaded: LoadedModel, request: p.Tune, abort_cb: Any,
             cancelled: Callable[[], bool], send: Callable[[Any], None]) -> None:
    """Tune the loaded model (slot 0's conversation saved first, as when another chat takes
    it), apply the result if asked, and answer with a TuneResult."""
    rid, info = request.request_id, loaded.info
    loaded.slots.park(0)
    bench = TuneBench(loaded.model, loaded.ctx, abort_cb)
    try:
        tuned = tune(bench, physical_cores(), logical_cores(), loaded.ctx.n_batch,
                     max(0.05, request.seconds_per_trial), cancelled,
                     (info.n_threads, info.n_threads_batch or info.n_threads),
                     lambda done, total: send(p.TuneProgress(rid, done, total)))
    except Exception as exc:  # Stopped, or llama.cpp's abort: a stop; else a failure
        tuned = None
        if not cancelled():
            send(p.TuneResult(rid, error=f"The engine failed: {exc}"))
            return
    finally:
        bench.restore(info.n_threads, info.n_threads_batch)
        bench.close()
    if tuned is None:
        send(p.TuneResult(rid, cancelled=True))
        return
    if request.apply:
        bench.restore(tuned.n_threads, tuned.n_threads_batch)
        if loaded.draft is not None:
            loaded.draft.set_threads(tuned.n_threads, tuned.n_threads_batch)
        loaded.info = with_threads(info, tuned.n_threads, tuned.n_threads_batch)
    send(p.TuneResult(
        rid, tuned.n_threads, tuned.n_threads_batch, tuned.n_batch, tuned.decode_tok_s,
        tuned.prompt_tok_s, tuple(p.TuneTrial(t.kind, t.n_threads, t.n_batch, t.tok_s)
                                  for t in tuned.trials), applied=request.apply,
        before_n_threads=info.n_threads, before_n_threads_batch=info.n_threads_batch,
        before_n_batch=loaded.ctx.n_batch, before_decode_tok_s=tuned.before_decode_tok_s,
        before_prompt_tok_s=tuned.before_prompt_tok_s))


class TuneBench:
    """tune.Bench on the loaded model: a fixed text evaluated from an empty sequence 0. Prompt
    trials run with the abort callback, so that a stop ends one mid-batch; decoding trials are
    short, and the callback would slow them."""

    def __init__(self, model: Model, ctx: Context, abort_cb: Any) -> None:
        self.ctx = ctx
        self.memory: SeqMemory = ctx.sequence(0)
        self.abort_cb = abort_cb
        self.batch = Batch(ctx.n_batch)
        self.tokens = model.tokenize(_BENCH_TEXT, special=False)[: max(64, ctx.n_ctx_seq - 64)]

    def _eval(self, tokens: Sequence[int]) -> None:
        batch, memory = self.batch, self.memory
        batch.clear()
        for i, token in enumerate(tokens):
            batch.add(token, memory.next_pos + i, 0, i == len(tokens) - 1)
        status = self.ctx.decode(batch)
        if status != 0:
            memory.keep(memory.n)
            raise RuntimeError(f"llama_decode returned {status}")
        memory.appended(tokens)

    def decode_rate(self, n_threads: int, seconds: float) -> float:
        self.memory.clear()
        self.ctx.set_threads(n_threads, n_threads)
        self._eval(self.tokens[:16])
        n, started = 0, time.perf_counter()
        while n < 16 or time.perf_counter() - started < seconds:
            self._eval(self.tokens[16 + n: 17 + n])
            n += 1
            if 17 + n >= len(self.tokens):
                break
        return n / (time.perf_counter() - started)

    def prompt_rate(self, n_threads: int, n_batch: int, seconds: float) -> float:
        self.memory.clear()
        self.ctx.set_threads(n_threads, n_threads)
        self.ctx.set_abort(self.abort_cb)
        try:
            n, started = 0, time.perf_counter()
            while n == 0 or time.perf_counter() - started < seconds:
                chunk = self.tokens[n: n + n_batch]
                if len(chunk) < n_batch:
                    break
                self._eval(chunk)
                n += len(chunk)
            return n / (time.perf_counter() - started)
        finally:
            self.ctx.set_abort(None)

    def restore(self, n_threads: int, n_threads_batch: int) -> None:
        self.ctx.set_threads(n_threads, n_threads_batch)

    def close(self) -> None:
        self.memory.clear()
        self.batch.close()


class QuantizeLog:
    """Progress of llama_model_quantize, read from its log: it names each tensor as it starts
    ("[  12/ 272] blk.0.attn_k.weight - …"); the share done is counted in the source's tensor
    bytes. Its last error line is kept for the message."""

    _TENSOR = re.compile(r"\[\s*(\d+)/\s*(\d+)\]\s+(\S+)")

    def __init__(self, source: str, send: Callable[[Any], None]) -> None:
        self.send = send
        self.error = ""
        try:
            tensors = read_header(source).tensors
        except GGUFError:
            tensors = ()
        self._sizes = {t.name: t.nbytes for t in tensors}
        self._total = sum(self._sizes.values())
        self._done_bytes = 0
        self._last = ("", 0)  # the tensor started last, and its size

    def line(self, level: int, text: str) -> None:
        if level == LOG_ERROR and text.strip():
            self.error = text.strip()
        found = self._TENSOR.search(text)
        if found is None:
            return
        index, total, name = int(found[1]), int(found[2]), found[3]
        self._done_bytes += self._last[1]
        self._last = (name, self._sizes.get(name, 0))
        fraction = self._done_bytes / self._total if self._total else (index - 1) / total
        self.send(p.QuantizeProgress(index - 1, total, min(1.0, fraction), name))


def run_quantize(request: p.Quantize, send: Callable[[Any], None]) -> None:
    """llama.cpp's quantizer; engine/quantize.py runs it in a host process of its own (it has
    no cancel of its own: that host is ended) and checks what it wrote."""
    progress = QuantizeLog(request.source, send)
    started = time.perf_counter()
    with log_to(progress.line):
        code = quantize(request.source, request.output, request.ftype,
                        request.threads or logical_cores(), request.allow_requantize)
    why = f": {progress.error}" if progress.error else ""
    error = "" if code == 0 else f"llama.cpp could not quantize this model{why} (code {code})."
    send(p.Quantized(request.output, time.perf_counter() - started, error))
