"""The engine process: requests from the pipe, the batch loop, events back.

Requests arrive on stdin, events leave on the process's original stdout; fd 1 is then pointed
at stderr so that anything llama.cpp prints cannot corrupt the protocol. A reader thread takes
Cancel requests as they arrive (the main thread is busy decoding), so a stop lands within one
step, and mid-prompt through llama.cpp's abort callback.

The main thread answers requests between steps of the batch loop. A reply waits in line when
every slot is busy (the window's scheduler sends no more than there are slots) or when the KV
pool has no room for its prompt beside the replies in progress, and one whose
prompt starts like a prompt another sequence is reading now waits for that reading, then copies
it (an API request for `n` choices is n requests of one prompt). A load, unload, tune or
quantize waits until no reply runs. An Embed is answered between two steps, in a context of its
own (embedding.py). A reply held to a grammar first has its sampler made on a thread of its own
(preparing.py), so that the replies decoding meanwhile keep going; it then waits for a slot.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import queue
import random
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import IO, Any

import psutil

from inglenook.core.context import ContextOverflow, Fit
from inglenook.core.load import LoadParams
from inglenook.core.messages import GenerationRequest, ImageRef
from inglenook.core.reasoning import ReasoningCount
from inglenook.core.replies import Finish
from inglenook.core.template import TemplateError
from inglenook.engine import protocol as p
from inglenook.engine.host.batch import BatchLoop
from inglenook.engine.host.embedding import Embedder, EmbedError
from inglenook.engine.host.grammar import RequestRefused, check_biases
from inglenook.engine.host.jobs import run_quantize, run_tune
from inglenook.engine.host.llama import Sampler, abort_callback, gpu_memory, gpu_offload_supported
from inglenook.engine.host.loading import LoadedModel, LoadFailure, load
from inglenook.engine.host.machine import physical_cores
from inglenook.engine.host.preparing import Prepared, SamplerMaker
from inglenook.engine.host.sequences import Sequence
from inglenook.engine.host.tool_grammar import reply_grammar
from inglenook.engine.host.vision import ImageError
from inglenook.engine.kv_reuse import principal_of, scoped
from inglenook.engine.kv_states import common_prefix, forget_kept_states, pack
from inglenook.engine.speculative import DraftLength, Guesser, Tally

_EXCLUSIVE = (p.Load, p.Unload, p.Tune, p.Quantize)  # wait until no reply runs
_RECENT = 4096  # finished request ids remembered, so that a late Cancel is dropped


@dataclasses.dataclass
class _Waiting:
    request: GenerationRequest
    tokens: list[int]
    fit: Fit
    received: float
    images: tuple[ImageRef, ...] = ()  # the prompt's images, in order
    seed: int = 0
    sampler: Sampler | None = None  # made beforehand (a grammar's: preparing.py), or at admission

    def close(self) -> None:
        if self.sampler is not None:
            self.sampler.close()
            self.sampler = None


class EngineHost:
    def __init__(self, out: IO[bytes]) -> None:
        self._out = out
        self.loaded: LoadedModel | None = None
        self.loop: BatchLoop | None = None
        self.embedder: Embedder | None = None  # made on the first Embed
        self.waiting: deque[_Waiting] = deque()
        self.preparing: dict[int, _Waiting] = {}  # their grammar's sampler being made
        self._inbox: queue.Queue[Any] | None = None
        self._maker: SamplerMaker | None = None
        self._lock = threading.Lock()
        self._cancels: set[int] = set()
        self._finished: deque[int] = deque(maxlen=_RECENT)
        self._finished_set: set[int] = set()
        self._stopping = False
        self._abortable_rid = -1  # a tune, or a prompt read alone: a stop aborts its batch
        # Kept alive for as long as a context may call it.
        self._abort_cb = abort_callback(self._should_abort)

    def send(self, message: Any) -> None:
        if isinstance(message, p.Finished):
            self._done(message.request_id)
        p.write_frame(self._out, message)

    @property
    def busy(self) -> bool:
        """Replies wait for a slot or decode: the batch loop has steps to take."""
        return bool(self.waiting or (self.loop is not None and self.loop.active))

    def _held(self, message: Any) -> bool:
        """A load, unload, tune or quantize waits for the replies, those being prepared too."""
        return isinstance(message, _EXCLUSIVE) and (self.busy or bool(self.preparing))

    # ---- stopping (the reader thread) ---------------------------------------------------------
    def cancel(self, request_id: int) -> None:
        with self._lock:
            if request_id not in self._finished_set:
                self._cancels.add(request_id)

    def abort_all(self) -> None:
        self._stopping = True

    def _should_abort(self) -> bool:
        if self._stopping:
            return True
        loop = self.loop
        seq = loop.abortable if loop is not None else None
        rid = seq.rid if seq is not None else self._abortable_rid
        return rid in self._cancels

    def _done(self, request_id: int) -> None:
        with self._lock:
            self._cancels.discard(request_id)
            if len(self._finished) == self._finished.maxlen:
                self._finished_set.discard(self._finished[0])
            self._finished.append(request_id)
            self._finished_set.add(request_id)

    # ---- the loop -----------------------------------------------------------------------------
    def run(self, inbox: queue.Queue[Any]) -> None:
        """Until Shutdown (or the end of the pipe)."""
        self._inbox = inbox
        backlog: deque[Any] = deque()
        while True:
            # What has arrived; wait for something only when there is nothing to do (a Load
            # waiting for a sampler being made is not something to do: its arrival is).
            held = bool(backlog) and self._held(backlog[0])
            if _collect(inbox, backlog, block=not self.busy and (held or not backlog)):
                return self._forget_before_exit(backlog)
            self._take_prepared(backlog)
            while backlog and not self._held(backlog[0]):
                self.handle(backlog.popleft())
                # Requests sent together arrive a frame at a time: those that came while one
                # was handled join the same first step rather than wait behind its prompt.
                if _collect(inbox, backlog, block=False):
                    return self._forget_before_exit(backlog)
                self._take_prepared(backlog)
            if self.busy:
                self.step()

    def _take_prepared(self, backlog: deque[Any]) -> None:
        """Made samplers are taken at once, ahead of the requests that came before them: a
        Load waits for them."""
        for prepared in [m for m in backlog if isinstance(m, Prepared)]:
            backlog.remove(prepared)
            self.prepared(prepared)

    def _forget_before_exit(self, backlog: deque[Any]) -> None:
        """Shutdown came: a deleted conversation's state must not be kept for the next engine
        (the rest of the backlog is dropped)."""
        for message in backlog:
            if isinstance(message, p.DropState):
                self.handle(message)

    def handle(self, message: Any) -> None:
        if isinstance(message, p.Load):
            self.load(message.params)
        elif isinstance(message, p.Unload):
            self.unload()
            self.send(p.Unloaded())
        elif isinstance(message, p.Generate):
            self.generate(message.request)
        elif isinstance(message, p.Inspect):
            self.inspect(message.request)
        elif isinstance(message, p.DropState):
            if message.everything:
                self.forget_states()
            elif self.loaded is not None:
                self.loaded.slots.forget(scoped(message.principal, message.conversation))
        elif isinstance(message, p.StateUsage):
            self.send(self.state_report())
        elif isinstance(message, p.MemoryUsage):
            self.send(self.loaded.memory() if self.loaded is not None else p.MemoryReport(
                rss_bytes=psutil.Process().memory_info().rss))
        elif isinstance(message, p.Tune):
            self.tune(message)
        elif isinstance(message, p.Quantize):
            run_quantize(message, self.send)
        elif isinstance(message, p.Embed):
            self.embed(message)
        elif isinstance(message, p.CountImages):
            self.count_images(message)

    def step(self) -> None:
        loop = self.loop
        if loop is None:
            return
        with self._lock:
            cancels = set(self._cancels)
        if self._stopping:  # the window went away
            cancels |= {s.rid for s in loop.active} | {
                w.request.request_id for w in self.waiting}
        for seq in loop.active:
            seq.cancelled = seq.cancelled or seq.rid in cancels
        for waiting in [w for w in self.waiting if w.request.request_id in cancels]:
            self.waiting.remove(waiting)
            waiting.close()
            rid = waiting.request.request_id
            self.send(p.Started(rid))
            self.send(p.Finished(rid, Finish("cancelled")))
        self._admit()
        try:
            loop.step()
        except Exception as exc:  # the replies fail; the host and the model stay up
            for seq in loop.active:
                seq.fail("error", f"The engine failed: {exc}")
            loop.step()

    # ---- loading ------------------------------------------------------------------------------
    def load(self, params: LoadParams) -> None:
        self.unload()
        try:
            loaded = load(params, self.send, self._abort_cb)
        except LoadFailure as exc:
            self.send(p.LoadFailed(str(exc), exc.refusal))
            return
        self.loaded = loaded
        self.loop = BatchLoop(loaded.ctx, loaded.slots, self.send, self._abort_cb,
                              loaded.most, loaded.draft, loaded.vision)
        self.send(p.Loaded(loaded.info))

    def unload(self) -> None:
        """Also forgets every kept conversation state: it belongs to this model and settings."""
        for waiting in [*self.waiting, *self.preparing.values()]:
            waiting.close()
            rid = waiting.request.request_id
            self.send(p.Started(rid))
            self.send(p.Finished(rid, Finish("cancelled", "The model was unloaded.")))
        self.waiting.clear()
        self.preparing.clear()  # a sampler made for one of them later is closed on arrival
        if self.loop is not None:
            self.loop.close()
            self.loop = None
        if self.embedder is not None:
            self.embedder.close()
            self.embedder = None
        if self.loaded is not None:
            self.loaded.close()
            self.loaded = None

    def forget_states(self) -> None:
        if self.loaded is not None:
            self.loaded.slots.reset()
            self.loaded.slots.cache.forget_all()
        else:
            forget_kept_states()

    def state_report(self) -> p.StateReport:
        if self.loaded is None:
            return p.StateReport()
        cache = self.loaded.slots.cache
        use = cache.usage()
        return p.StateReport(use.ram_bytes, use.disk_bytes, use.in_ram, use.on_disk,
                             cache.ram_budget, cache.disk_budget)

    # ---- replies ------------------------------------------------------------------------------
    def generate(self, request: GenerationRequest) -> None:
        rid, received = request.request_id, time.perf_counter()
        if self.loaded is None:
            self.send(p.Started(rid))
            self.send(p.Finished(rid, Finish("error", "No model is loaded.")))
            return
        try:
            check_biases(request.logit_bias, self.loaded.model.n_vocab)
            prompt, tokens, fit = self.loaded.tokenizer.fit(request, self.loaded.ctx.n_ctx_seq)
            failure = None if tokens else Finish(
                "error", "The chat template produced an empty prompt.")
        except ContextOverflow as exc:
            failure = Finish("error", str(exc), context_full=True)
        except (TemplateError, ImageError, RequestRefused) as exc:
            failure = Finish("error", str(exc))
        except Exception as exc:  # the reply fails; the host and the model stay up
            failure = Finish("error", f"The engine failed: {exc}")
        if failure is not None:
            self.send(p.Started(rid))
            self.send(p.Finished(rid, failure))
            return
        sp = request.sampling
        seed = sp.seed if sp.seed >= 0 else random.getrandbits(31)
        waiting = _Waiting(request, tokens, fit, received, prompt.images, seed)
        if not request.reply_format and request.forced_call is None:
            self.waiting.append(waiting)
            return
        loaded = self.loaded

        def make() -> Sampler:
            grammar = reply_grammar(request, loaded.info)
            return Sampler(loaded.model, sp, seed, grammar, request.logit_bias,
                           request.logprobs)

        if self._inbox is None:  # not running (a test's host): made here, at once
            self.preparing[rid] = waiting
            self._prepared_now(rid, make)
            return
        if self._maker is None:
            self._maker = SamplerMaker(self._inbox.put)
        self.preparing[rid] = waiting
        self._maker.submit(rid, make)

    def _prepared_now(self, rid: int, make: Callable[[], Sampler]) -> None:
        try:
            self.prepared(Prepared(rid, sampler=make()))
        except Exception as exc:
            self.prepared(Prepared(rid, error=exc))

    def prepared(self, prepared: Prepared) -> None:
        """A reply's sampler was made (or refused): it waits for a slot (or fails)."""
        waiting = self.preparing.pop(prepared.request_id, None)
        if waiting is None:  # unloaded meanwhile
            if prepared.sampler is not None:
                prepared.sampler.close()
            return
        if prepared.sampler is not None:
            waiting.sampler = prepared.sampler
            self.waiting.append(waiting)
            return
        exc = prepared.error
        rid = prepared.request_id
        self.send(p.Started(rid))
        self.send(p.Finished(rid, Finish("error", str(exc) if isinstance(
            exc, RequestRefused) else f"The engine failed: {exc}")))

    def _admit(self) -> None:
        """Waiting replies into free slots, in the order they came."""
        loaded, loop = self.loaded, self.loop
        if loaded is None or loop is None:
            return
        for waiting in list(self.waiting):
            busy = loop.busy
            if len(busy) >= len(loaded.slots.memories):
                return
            if busy and loaded.ctx.pooled and not self._pool_room(loaded, busy,
                                                                  len(waiting.tokens)):
                return  # it waits for room in the KV pool (and those after it, in order)
            if self._reading_alike(waiting):
                continue
            self.waiting.remove(waiting)
            try:
                loop.add(self._sequence(loaded, waiting, busy))
            except Exception as exc:  # the reply fails; the host and the model stay up
                waiting.close()
                rid = waiting.request.request_id
                self.send(p.Started(rid))
                self.send(p.Finished(rid, Finish("error", str(exc) if isinstance(
                    exc, RequestRefused) else f"The engine failed: {exc}")))

    @staticmethod
    def _pool_room(loaded: LoadedModel, busy: set[int], n_prompt: int) -> bool:
        """Whether the KV pool has room for a prompt beside the replies in progress (idle
        slots' cells are saved and freed when needed). Counted generously: a prefix another
        slot shares is counted twice."""
        held = sum(loaded.memories[s].n for s in busy)
        return held + n_prompt <= loaded.ctx.n_pool

    def _reading_alike(self, waiting: _Waiting) -> bool:
        """Whether a sequence of the same principal is reading a prompt that starts as this
        one's and has not read that far yet: then this one copies it when it has."""
        assert self.loop is not None and self.loaded is not None
        target = pack(waiting.tokens)
        principal = waiting.request.principal
        for seq in self.loop.active:
            if not seq.reading or seq.request.principal != principal:
                continue
            shared = min(common_prefix(pack(seq.prompt), target), len(waiting.tokens) - 1)
            if shared >= self.loaded.slots.min_copy and seq.read < shared:
                return True
        return False

    def _sequence(self, loaded: LoadedModel, waiting: _Waiting, busy: set[int]) -> Sequence:
        request, tokens, fit = waiting.request, waiting.tokens, waiting.fit
        sp, seed = request.sampling, waiting.seed
        if waiting.sampler is None:  # first: it may refuse
            waiting.sampler = Sampler(loaded.model, sp, seed, "", request.logit_bias,
                                      request.logprobs)
        sampler = waiting.sampler
        key = scoped(request.principal, request.conversation)
        # On failure the caller closes the sampler: the reply has no sequence to close it.
        slot, reuse = loaded.slots.admit(key, tokens, may_shift=fit.dropped > 0, busy=busy)
        assert principal_of(reuse.key) == request.principal
        boundary = loaded.tokenizer.system_prefix(request.messages, tokens)
        keep_at = boundary if loaded.slots.wants_prefix(slot, tokens, boundary,
                                                         reuse.cached) else 0
        guesser = None
        # No guesses with images: a guess copied from the prompt could be an image position.
        if loaded.proposer is not None and not waiting.images:
            guesser = Guesser(loaded.proposer, DraftLength(loaded.most), Tally())
        self.send(p.Started(request.request_id))
        seq = Sequence(request, tokens, fit, waiting.received, slot, loaded.memories[slot],
                       reuse, keep_at, sampler, seed, loaded.tokenizer,
                       loaded.model.is_eog, loaded.ctx.n_ctx_seq, guesser)
        if loaded.slots.wants_checkpoint(slot, tokens):
            seq.checkpoint_at = len(tokens) - 1
        if waiting.images and loaded.vision is not None:
            seq.images = loaded.vision.spans(tokens, waiting.images)
        if not request.raw and not request.prefill:  # a raw prompt, a continued reply: no
            seq.thought = ReasoningCount(loaded.info.traits.reasoning,  # leading block
                                         request.enable_thinking)
        return seq

    def inspect(self, request: GenerationRequest) -> None:
        """Answer with the prompt a Generate of this request would evaluate; generates nothing
        and leaves the KV cells as they are."""
        rid = request.request_id
        if self.loaded is None:
            self.send(p.PromptView(rid, error="No model is loaded."))
            return
        try:
            prompt, tokens, fit = self.loaded.tokenizer.fit(request, self.loaded.ctx.n_ctx_seq)
            self.send(self.loaded.tokenizer.view(rid, prompt, tokens, fit,
                                                 self.loaded.ctx.n_ctx_seq))
        except (TemplateError, ContextOverflow, ImageError, RequestRefused) as exc:
            self.send(p.PromptView(rid, error=str(exc)))
        except Exception as exc:  # the host and the model stay up
            self.send(p.PromptView(rid, error=f"The engine failed: {exc}"))

    # ---- embeddings ---------------------------------------------------------------------------
    def embed(self, request: p.Embed) -> None:
        """Between two steps of the replies: a request's texts are a few batches at most (the
        client sends a long list in parts), so replies pause for about as long."""
        rid = request.request_id
        if self.loaded is None:
            self.send(p.Embedded(rid, error="No model is loaded."))
            return
        try:
            if self.embedder is None:
                info = self.loaded.info
                self.embedder = Embedder(self.loaded.model, info.path, info.n_ctx,
                                         info.n_threads_batch)
            self.send(self.embedder.embed(request))
        except EmbedError as exc:
            self.send(p.Embedded(rid, error=str(exc), refused=True))
        except Exception as exc:  # the host and the model stay up
            self.send(p.Embedded(rid, error=f"The engine failed: {exc}"))

    def count_images(self, request: p.CountImages) -> None:
        """Between two steps, like an Embed: a few milliseconds an image size."""
        rid = request.request_id
        vision = self.loaded.vision if self.loaded is not None else None
        if vision is None:
            self.send(p.ImagesCounted(rid, error="The loaded model cannot see images."
                                      if self.loaded is not None else "No model is loaded."))
            return
        try:
            tokens = tuple(vision.count(w, h) for w, h in request.sizes)
        except ImageError as exc:
            self.send(p.ImagesCounted(rid, error=str(exc)))
            return
        except Exception as exc:  # the host and the model stay up
            self.send(p.ImagesCounted(rid, error=f"The engine failed: {exc}"))
            return
        self.send(p.ImagesCounted(rid, tokens, vision.projector.path))

    # ---- tuning -------------------------------------------------------------------------------
    def tune(self, request: p.Tune) -> None:
        rid = request.request_id
        if self.loaded is None:
            self.send(p.TuneResult(rid, error="No model is loaded."))
            return
        if rid in self._cancels:  # stopped before it began
            self.send(p.TuneResult(rid, cancelled=True))
            return
        self._abortable_rid = rid
        try:
            run_tune(self.loaded, request, self._abort_cb, lambda: rid in self._cancels,
                     self.send)
        finally:
            self._abortable_rid = -1
            self._done(rid)


def _collect(inbox: queue.Queue[Any], backlog: deque[Any], block: bool) -> bool:
    """Move what has arrived to the backlog; True when it holds Shutdown."""
    try:
        backlog.append(inbox.get(block=block))
        while True:
            backlog.append(inbox.get_nowait())
    except queue.Empty:
        pass
    return any(isinstance(m, p.Shutdown) for m in backlog)


def _read_requests(stream: IO[bytes], host: EngineHost, inbox: queue.Queue[Any]) -> None:
    while True:
        try:
            message = p.read_frame(stream)
        except p.ProtocolError:
            message = None
        if message is None:  # the window went away: stop what we are doing, then exit
            host.abort_all()
            inbox.put(p.Shutdown())
            return
        if isinstance(message, p.Cancel):
            host.cancel(message.request_id)
        else:
            inbox.put(message)


def main() -> int:
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    host = EngineHost(out)
    inbox: queue.Queue[Any] = queue.Queue()
    threading.Thread(target=_read_requests, args=(sys.stdin.buffer, host, inbox),
                     daemon=True, name="requests").start()
    host.send(p.Ready(os.getpid(), gpu_offload_supported(), physical_cores(), *gpu_memory()))
    with contextlib.suppress(KeyboardInterrupt):
        host.run(inbox)
    # The replies still running end as stopped; a window already gone cannot read that.
    with contextlib.suppress(OSError, ValueError):
        host.unload()
        out.flush()
    # The reader thread is blocked inside a buffered read of stdin; a normal exit would abort on
    # that buffer's lock. Nothing is left to clean up, so leave at once.
    os._exit(0)
