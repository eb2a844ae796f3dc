"""Loading a model: options checked, the fit planner's estimate (weights, the KV caches of all
slots, compute buffers) against free memory, then llama.cpp, the chat template and what guesses
tokens ahead. llama.cpp would otherwise just try: a context of 10^9 grows the process until the
OOM killer ends it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from inglenook import paths
from inglenook.core.builtin_templates import Choice, choose, detect, is_base_model
from inglenook.core.families import MemoryFamily, MemoryKind
from inglenook.core.load import (
    LOOKUP_MIN_NGRAM,
    LoadParams,
    LoadParamsError,
    LoadRefusal,
    ModelInfo,
    choose_context,
)
from inglenook.core.messages import Message
from inglenook.core.template import TemplateError
from inglenook.engine import protocol as p
from inglenook.engine.host.drafting import DraftModel, vocab_mismatch
from inglenook.engine.host.llama import (
    Context,
    Model,
    SeqMemory,
    build_id,
    gpu_memory,
    gpu_offload_supported,
    max_sequences,
)
from inglenook.engine.host.machine import logical_cores, physical_cores
from inglenook.engine.host.mtmd import Projector, ProjectorError
from inglenook.engine.host.tokenizing import Tokenizer, has_token
from inglenook.engine.host.vision import Vision
from inglenook.engine.kv_reuse import SlotStates, copy_threshold
from inglenook.engine.kv_states import StateCache
from inglenook.engine.model_traits import stream_markers, template_traits
from inglenook.engine.speculative import PromptLookup, Proposer, draft_header_mismatch
from inglenook.engine.template_process import TemplateRenderer
from inglenook.models import fit
from inglenook.models.fingerprint import sha256_remembered
from inglenook.models.gguf import GGUFError, GGUFHeader, read_header
from inglenook.models.projector import ProjectorInfo, check_pair, projector_info

MIB = 1024 * 1024
MAX_STATE_BUDGET = 8 * 1024 * MIB  # the automatic budgets: a quarter of what is free, this at most


class LoadFailure(Exception):
    """The model was not loaded; `refusal` says what would make it load, when anything would."""

    def __init__(self, message: str, refusal: LoadRefusal | None = None) -> None:
        super().__init__(message)
        self.refusal = refusal


@dataclass
class LoadedModel:
    model: Model
    ctx: Context
    tokenizer: Tokenizer
    info: ModelInfo
    slots: SlotStates
    memories: list[SeqMemory]  # the slots' KV cells, by slot
    proposer: Proposer | None = None  # what guesses tokens ahead, at most `most` at a time
    most: int = 0
    draft: DraftModel | None = None
    vision: Vision | None = None  # the projector, when loaded with one (LoadParams.mmproj_path)

    def memory(self) -> p.MemoryReport:
        """What this model holds in the engine process (protocol.MemoryReport)."""
        pairs = [(self.model, self.ctx)] + (
            [(self.draft.model, self.draft.ctx)] if self.draft is not None else [])
        kv = sum(ctx.buffers.get("kv", 0) for _, ctx in pairs)
        cells = self.ctx.n_pool  # the pool's, or every stream's
        main_kv = self.ctx.buffers.get("kv", 0)
        used = sum(m.n for m in self.memories)
        states = self.slots.cache.usage()
        return p.MemoryReport(
            weights_bytes=sum(model.weights_bytes for model, _ in pairs), kv_bytes=kv,
            kv_used_bytes=main_kv * used // cells if cells else 0,
            compute_bytes=sum(ctx.buffers.get("compute", 0) for _, ctx in pairs),
            states_ram_bytes=states.ram_bytes, states_disk_bytes=states.disk_bytes,
            rss_bytes=psutil.Process().memory_info().rss)

    def close(self) -> None:
        self.slots.close()  # what the slots and the cache hold is kept for the next engine
        if self.vision is not None:
            self.vision.close()
        if self.draft is not None:
            self.draft.close()
        self.tokenizer.template.close()
        self.ctx.close()
        self.model.close()


def load(params: LoadParams, send: Callable[[Any], None], abort_cb: Any) -> LoadedModel:
    """Raises LoadFailure with a message for the user."""
    started = time.perf_counter()
    try:
        params.validate()
        header = read_header(params.model_path)
        draft_header = _draft_header(params, header)
        projector = _projector(params)
    except (LoadParamsError, GGUFError) as exc:
        raise LoadFailure(str(exc)) from None
    supported = gpu_offload_supported()
    n_gpu_layers = params.n_gpu_layers if supported else 0
    n_threads = params.n_threads or physical_cores()
    n_threads_batch = params.n_threads_batch or logical_cores()
    n_ctx = choose_context(params.n_ctx, header.context_length)
    pool = params.pool_tokens(n_ctx)  # 0: a KV stream per slot (kv_per_reply)
    offload = supported and n_gpu_layers != 0
    n_slots, refused, memory_bytes, kv_bytes = _check_memory(params, header, n_ctx, pool,
                                                              offload, draft_header, projector)
    if refused is not None:
        raise LoadFailure(refused.message, refused)
    # Checking guesses evaluates several tokens in one batch. On a CPU, llama.cpp's attention
    # without flash attention rounds a batch's rows differently from a lone token's, which
    # can flip a near-tie and change the reply; with it they match exactly, except that an
    # f16 cache of 512 cells or more sums a lone token's attention in per-thread chunks
    # (q8_0 and q4_0 caches always match). See tests/integration/test_speculative.py.
    # Speculation does not turn flash attention on for that: on a CPU it made a long
    # chat's next prompt 30-65% slower to read (bench: ttft_turn12_over_turn1), and an
    # f16 cache is not exact past 512 cells anyway. Who wants the exact reply turns it on.
    # A shared KV pool turns it on: without it the pool's attention sums run over every
    # cell, and a replayed request gave another reply (docs/memory.md).
    flash = params.flash_attn or bool(pool)
    last = [-1.0]

    def report(fraction: float) -> bool:
        if fraction - last[0] >= 0.02 or fraction >= 1.0:
            last[0] = fraction
            send(p.LoadProgress(fraction))
        return True

    try:
        model = Model(params.model_path, n_gpu_layers, params.use_mmap, params.use_mlock, report)
    except (ValueError, RuntimeError, OSError) as exc:
        raise LoadFailure(f"llama.cpp could not load this model: {exc}") from None
    threads = (n_threads, n_threads_batch, n_gpu_layers, flash)
    try:
        # In the pool a sliding-window model keeps only its window's cells in those layers,
        # as llama-server does (Gemma 3 at 4 × 8,192: 62 MiB of KV, not 576): what needs
        # cutting back checks that the window is still held (SeqMemory.can_keep), speculation
        # is off. A KV cache per reply keeps every cell (llama.cpp's full-size SWA cache).
        ctx = Context(model, n_ctx, n_slots, params.n_batch, n_threads, n_threads_batch, flash,
                      params.kv_cache_type, swa_full=not pool, n_pool=pool)
    except (ValueError, RuntimeError, OSError) as exc:
        model.close()
        raise LoadFailure(f"llama.cpp could not load this model: {exc}") from None
    tokenizer, vision = None, None
    try:
        tokenizer, choice, traits, tools = _template(params, header, model)
        vision = tokenizer.vision = _vision(params, model, n_threads_batch, offload)
        proposer, most, draft = _speculation(params, header, model, ctx, n_ctx, threads,
                                                abort_cb)
    except (TemplateError, _DraftError, ProjectorError) as exc:
        if vision is not None:
            vision.close()
        if tokenizer is not None:
            tokenizer.template.close()
        ctx.close()
        model.close()
        raise LoadFailure(f"This model's chat template cannot be used. {exc}"
                          if isinstance(exc, TemplateError) else str(exc)) from None
    ram, disk = _state_budgets(params)
    info = ModelInfo(
        path=params.model_path, name=Path(params.model_path).stem,
        architecture=header.architecture,
        size_bytes=header.file_size, n_ctx=ctx.n_ctx_seq, n_ctx_train=header.context_length,
        n_threads=n_threads, n_gpu_layers=n_gpu_layers, gpu_offload_supported=supported,
        flash_attn=flash, kv_cache_type=params.kv_cache_type,
        template_source=choice.kind, template_name=choice.label,
        template_reason=choice.reason,
        load_seconds=time.perf_counter() - started, quantization=header.quantization,
        n_threads_batch=n_threads_batch, n_batch=ctx.n_batch,
        speculation=params.speculation if proposer is not None else "",
        draft_model=Path(params.draft_model_path).stem if draft is not None else "",
        kv_state_ram_budget=ram, kv_state_disk_budget=disk, traits=traits, tool_format=tools,
        n_slots=n_slots, kv_bytes=kv_bytes, memory_bytes=memory_bytes,
        kv_pool=ctx.n_pool if ctx.pooled else 0,
        vision=vision is not None,
        image_tokens=vision.probe_positions() if vision is not None else 0,
        projector=params.mmproj_path if vision is not None else "",
        family=family(header, model, ctx))
    memories = [ctx.sequence(s) for s in range(n_slots)]
    cache = StateCache(ram, disk, paths.kv_state_dir, validity=_validity(params, ctx, flash),
                       key_file=paths.kv_state_key_path)
    slots = SlotStates(memories, cache, copy_threshold(ctx.n_ctx_seq, ctx.pooled),
                       together=not ctx.pooled, whole_only=info.family.states_whole,
                       restored_whole=info.family.restored_whole)
    return LoadedModel(model, ctx, tokenizer, info, slots, memories, proposer, most, draft,
                       vision)


def _validity(params: LoadParams, ctx: Context, flash: bool) -> str:
    """What a kept state is valid for (kv_states): the model file's bytes, this llama.cpp
    build and the KV layout. "" (states kept by this engine only) when the file cannot be
    read."""
    try:
        model = sha256_remembered(params.model_path, paths.kv_state_dir() / "sha256.json")
    except OSError:
        return ""
    layout = (f"kv={params.kv_cache_type} flash={int(flash)} unified={int(ctx.pooled)} "
              f"pool={ctx.n_pool} slots={ctx.n_seq} ctx={ctx.n_ctx_seq}")
    return hashlib.sha256(f"{model}\n{build_id()}\n{layout}".encode()).hexdigest()[:32]


def _template(params: LoadParams, header: GGUFHeader,
              model: Model) -> tuple[Tokenizer, Choice, Any, str]:
    def special(token: int) -> str:
        return model.piece(token, special=True).decode("utf-8", errors="replace") \
            if token >= 0 else ""

    choice = choose(header.chat_template, params.chat_template, params.template_name,
                    lambda: detect(lambda text: has_token(model, text), header.architecture,
                                   header.tokenizer_model,
                                   is_base_model(header.metadata, Path(header.path).name)))
    template = TemplateRenderer.for_model(choice, special(model.bos), special(model.eos))
    try:
        template.render_prompt([Message("system", "s"), Message("user", "Hi")])
        traits, tools = template_traits(template)
    except TemplateError:
        template.close()
        raise
    return Tokenizer(model, template, stream_markers(traits.reasoning, tools), choice.ends), \
        choice, traits, tools


def _check_memory(params: LoadParams, header: GGUFHeader, n_ctx: int, pool: int,
                  offload: bool, draft: GGUFHeader | None,
                  projector: ProjectorInfo | None = None
                  ) -> tuple[int, LoadRefusal | None, int, int]:
    """The slots to load with, why this load should not be tried (see fit.refusal) or None,
    and the estimates of all it holds and of its KV caches (0 when unknown)."""
    asked = min(params.n_slots, max_sequences()) if params.n_slots else 0
    try:
        shape, draft_shape = fit.load_shapes(
            header, projector.memory_bytes if projector is not None else 0, draft)
    except GGUFError:
        return asked or 1, None, 0, 0  # no shape: llama.cpp decides (it needs the same keys)
    available = psutil.virtual_memory()
    vram_free = gpu_memory()[0] if offload else 0
    memory = fit.Memory(ram_free=int(available.available), ram_total=int(available.total),
                        vram_free=vram_free, gpu_offload=offload)
    slots = asked or fit.default_slots(shape, n_ctx, params.kv_cache_type, memory, draft_shape,
                                       pool)
    slots = min(slots, max_sequences())
    refused = fit.refusal(shape, n_ctx, params.kv_cache_type, memory,
                          allow_beyond_trained=params.allow_beyond_trained, draft=draft_shape,
                          slots=slots, pool=pool)
    planned = fit.plan(shape, n_ctx, params.kv_cache_type, memory, draft_shape, slots, pool,
                       params.flash_attn)
    return slots, refused, planned.total_bytes, planned.kv_bytes


class _DraftError(Exception):
    """The draft model cannot be used; the message is for the user."""


def _draft_header(params: LoadParams, header: GGUFHeader) -> GGUFHeader | None:
    """The draft model's header, checked against the model's before either is loaded."""
    if not params.draft_model_path:
        return None
    try:
        draft = read_header(params.draft_model_path)
    except GGUFError as exc:
        raise GGUFError(f"The draft model cannot be used. {exc}") from None
    mismatch = draft_header_mismatch(header, draft)
    if mismatch:
        raise GGUFError(mismatch)
    return draft


def _speculation(params: LoadParams, header: GGUFHeader, model: Model, ctx: Context,
                 n_ctx: int,
                 threads: tuple[int, int, int, bool], abort_cb: Any
                 ) -> tuple[Proposer | None, int, DraftModel | None]:
    """What guesses tokens for this model, and how many at most. Raises _DraftError."""
    if not params.speculation or not family(header, model, ctx).can_speculate:
        return None, 0, None  # the cells cannot drop rejected guesses (core/families.py)
    most = min(ctx.n_batch - 1, params.draft_tokens if params.draft_model_path
               else params.lookup_tokens)
    if most < 1:
        return None, 0, None
    if not params.draft_model_path:
        return PromptLookup(params.lookup_ngram, LOOKUP_MIN_NGRAM), most, None
    name = Path(params.draft_model_path).name
    n_threads, n_threads_batch, n_gpu_layers, flash = threads
    try:
        draft_model = Model(params.draft_model_path, n_gpu_layers, params.use_mmap,
                            params.use_mlock)
    except (ValueError, RuntimeError, OSError) as exc:
        raise _DraftError(f"llama.cpp could not load the draft model {name}: {exc}") from exc
    mismatch = vocab_mismatch(model, draft_model)
    if draft_model.recurrent:
        mismatch = "its recurrent state cannot drop rejected guesses."
    if mismatch:
        draft_model.close()
        raise _DraftError(f"The draft model {name} cannot be used with this model: {mismatch}")
    try:
        draft_ctx = Context(draft_model, n_ctx, 1, params.n_batch, n_threads, n_threads_batch,
                            flash, params.kv_cache_type)
    except (ValueError, RuntimeError, OSError) as exc:
        draft_model.close()
        raise _DraftError(f"llama.cpp could not load the draft model {name}: {exc}") from exc
    draft = DraftModel(draft_model, draft_ctx, params.draft_p_min, model.n_vocab, abort_cb)
    return draft, most, draft


def _projector(params: LoadParams) -> ProjectorInfo | None:
    """The projector's header, refused before anything loads when it does not fit the model
    (GGUFError carries the reason)."""
    if not params.mmproj_path:
        return None
    reason = check_pair(params.model_path, params.mmproj_path)
    if reason is not None:
        raise GGUFError(f"The vision projector cannot be used: {reason}")
    return projector_info(read_header(params.mmproj_path))


def _vision(params: LoadParams, model: Model, n_threads: int, offload: bool) -> Vision | None:
    if not params.mmproj_path:
        return None
    name = Path(params.mmproj_path).name
    try:
        projector = Projector(params.mmproj_path, model, n_threads, use_gpu=offload)
    except ProjectorError as exc:
        raise ProjectorError(f"The vision projector {name} cannot be used: {exc}") from None
    return Vision(projector)


def _state_budgets(params: LoadParams) -> tuple[int, int]:
    """RAM and disk for the states of conversations: as asked, else a quarter of what is free
    now (the model is loaded), at most MAX_STATE_BUDGET each."""
    ram = params.kv_state_ram_mb * MIB if params.kv_state_ram_mb >= 0 else min(
        psutil.virtual_memory().available // 4, MAX_STATE_BUDGET)
    if params.kv_state_disk_mb >= 0:
        return ram, params.kv_state_disk_mb * MIB
    try:
        free = shutil.disk_usage(paths.cache_dir()).free
    except OSError:
        free = 0
    return ram, min(free // 4, MAX_STATE_BUDGET)


def with_threads(info: ModelInfo, n_threads: int, n_threads_batch: int) -> ModelInfo:
    return dataclasses.replace(info, n_threads=n_threads, n_threads_batch=n_threads_batch)


def family(header: GGUFHeader, model: Model, ctx: Context) -> MemoryFamily:
    """How the loaded model keeps its memory, as llama.cpp reports it."""
    kind: MemoryKind = ("hybrid" if model.hybrid else "recurrent" if model.recurrent
                        else "sliding-window" if model.n_swa else "dense")
    arch = header.architecture

    def number(key: str) -> int:
        value = header.metadata.get(f"{arch}.{key}")
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

    return MemoryFamily(kind, model.n_swa, model.n_swa > 0 and ctx.swa_full,
                        number("expert_count"), number("expert_used_count"))
