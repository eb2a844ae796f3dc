"""Will this model fit? Memory for weights + KV cache + compute buffers at a context length and
KV cache type, against free RAM (and VRAM when the build offloads), labelled fits / tight /
won't fit, with a recommended quantization and GPU-layer count.

The architecture numbers come from a GGUF header: a local file's, or a Hub file's read with
HTTP Range requests of its first megabytes (models/remote_header.py). The total is an
estimate of the engine process's resident memory at work (checked against the real engine by
tests/integration/test_fit_accuracy.py); the margin is in the labels: "fits" leaves a quarter of
free memory, since a "won't fit" that would just load is the cheaper mistake. Qt-free.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import psutil

from inglenook.core.load import DEFAULT_SLOTS, KV_CACHE_TYPES, LoadRefusal
from inglenook.core.units import gigabytes
from inglenook.models.filenames import parse_quant
from inglenook.models.gguf import ArrayInfo, GGUFError, GGUFHeader

# -- the model's shape ----------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelShape:
    n_layers: int
    n_embd: int
    n_head: int
    n_head_kv: int
    n_ctx_train: int
    weights_bytes: int
    architecture: str
    key_length: int | None = None  # per head; None: n_embd // n_head
    value_length: int | None = None  # per head; None: the key length
    # A vision projector loaded with the model (models/projector.py: its weights and buffers),
    # counted in RAM: libmtmd reads it into memory.
    projector_bytes: int = 0
    n_ff: int = 0  # the feed-forward width (0: unknown, counted as 4 × n_embd)
    n_vocab: int = 0  # tokens of the vocabulary (0: unknown, counted as DEFAULT_VOCAB)
    n_swa: int = 0  # the sliding window of most layers, in tokens (0: none)
    swa_every: int = 0  # one layer in this many attends to everything (0: unknown: all do)
    # A hybrid's layers with attention (0: all of them); the others hold recurrent state.
    kv_layers: int = 0
    # Recurrent state (Mamba's convolution and scan, LFM2's short convolution, RWKV's): f32
    # elements per sequence, all layers together (0: none). llama.cpp keeps one per slot.
    recurrent_elements: int = 0


def _int(header: GGUFHeader, key: str) -> int | None:
    """An integer entry; None when absent, or an array (per-layer counts in a few
    architectures, which the bounded reader skips rather than loads)."""
    value = header.metadata.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _most(header: GGUFHeader, key: str) -> int | None:
    """An integer entry, or the largest of a per-layer array of them (a hybrid's KV heads:
    0 in its recurrent layers)."""
    value = header.metadata.get(key)
    if isinstance(value, ArrayInfo) and value.values:
        return max(0, int(max(value.values)))
    return _int(header, key)


# Hybrids that mark their attention layers by an interval, not by per-layer KV heads
# (llama.cpp's default when the header does not say): one layer in this many.
FULL_ATTENTION_EVERY = {"qwen3next": 4, "qwen35": 4, "qwen35moe": 4}
# Hybrids whose every layer holds both attention and recurrent state.
PARALLEL_HYBRIDS = frozenset({"falcon-h1"})


def _layer_kinds(header: GGUFHeader, n_layers: int, n_head: int) -> tuple[int, int]:
    """Layers with a KV cache (0: all) and layers with recurrent state, as llama.cpp tells a
    hybrid's layers apart: a per-layer KV head count of 0, or one attention layer in every
    `full_attention_interval`."""
    arch = header.architecture
    recurrent = any(key in header.metadata for key in (
        f"{arch}.ssm.inner_size", f"{arch}.shortconv.l_cache", f"{arch}.wkv.head_size"))
    heads_kv = header.metadata.get(f"{arch}.attention.head_count_kv")
    every = _int(header, f"{arch}.full_attention_interval") or FULL_ATTENTION_EVERY.get(arch, 0)
    if isinstance(heads_kv, ArrayInfo) and heads_kv.values:
        kv_layers = sum(1 for n in heads_kv.values[:n_layers] if n > 0)
    elif recurrent and every:
        kv_layers = n_layers // every
    else:
        kv_layers = n_layers if n_head else 0
    if not recurrent:
        return 0, 0
    return kv_layers, n_layers if arch in PARALLEL_HYBRIDS else n_layers - kv_layers


def _recurrent_per_layer(header: GGUFHeader, n_embd: int) -> int:
    """f32 elements of one layer's recurrent state per sequence (llama.cpp's n_embd_r() +
    n_embd_s()): RWKV's token shifts and wkv state, LFM2's last inputs, or an SSM's
    convolution window and scan state."""
    arch = header.architecture
    if head_size := _int(header, f"{arch}.wkv.head_size"):
        shifts = _int(header, f"{arch}.token_shift_count") or 2
        return shifts * n_embd + n_embd * head_size
    if l_cache := _int(header, f"{arch}.shortconv.l_cache"):
        return n_embd * (l_cache - 1)
    d_inner = _int(header, f"{arch}.ssm.inner_size") or 0
    d_state = _int(header, f"{arch}.ssm.state_size") or 0
    d_conv = _int(header, f"{arch}.ssm.conv_kernel") or 0
    n_group = _int(header, f"{arch}.ssm.group_count") or 0
    return max(0, d_conv - 1) * (d_inner + 2 * n_group * d_state) + d_state * d_inner


def shape_from_header(header: GGUFHeader) -> ModelShape:
    """The numbers the planner needs, from `{arch}.block_count`, `.embedding_length`,
    `.attention.head_count(_kv)`, `.attention.key_length/value_length` and `.context_length`.

    weights_bytes is the tensor data this file describes (the file size when it describes none).
    For a model split across files that is only this part's: replace it with the whole model's
    size (`dataclasses.replace(shape, weights_bytes=model.size)`)."""
    arch = header.architecture
    if not arch:
        raise GGUFError("This GGUF file does not say which architecture it is "
                        "(general.architecture is missing).")
    n_layers = _int(header, f"{arch}.block_count")
    n_embd = _int(header, f"{arch}.embedding_length")
    if not n_layers or not n_embd:
        raise GGUFError(f"This GGUF file does not give the layer count and width of its {arch} "
                        "model, so its memory needs cannot be estimated.")
    # No attention heads (recurrent models such as Mamba or RWKV): no KV cache to speak of.
    n_head = _most(header, f"{arch}.attention.head_count") or 0
    n_head_kv = _most(header, f"{arch}.attention.head_count_kv")
    tokens = header.metadata.get("tokenizer.ggml.tokens")
    n_vocab = _int(header, f"{arch}.vocab_size") or (
        tokens.length if isinstance(tokens, ArrayInfo) else 0)
    kv_layers, recurrent_layers = _layer_kinds(header, n_layers, n_head)
    return ModelShape(
        n_layers=n_layers, n_embd=n_embd, n_head=n_head,
        n_head_kv=n_head if n_head_kv is None else n_head_kv,
        kv_layers=kv_layers,
        recurrent_elements=recurrent_layers * _recurrent_per_layer(header, n_embd),
        n_ctx_train=_int(header, f"{arch}.context_length") or 0,
        weights_bytes=header.tensor_bytes or header.file_size,
        architecture=arch,
        key_length=_int(header, f"{arch}.attention.key_length") or None,
        value_length=_int(header, f"{arch}.attention.value_length") or None,
        n_ff=_int(header, f"{arch}.feed_forward_length") or 0, n_vocab=n_vocab,
        n_swa=_int(header, f"{arch}.attention.sliding_window") or 0,
        swa_every=SWA_PATTERNS.get(arch, 0))


# -- memory estimates -----------------------------------------------------------------------------
# Bytes per KV element as (bytes, per this many elements): q8_0 and q4_0 store blocks of 32 values
# with one f16 scale (34 and 18 bytes per block).
_KV_TYPE_BYTES: dict[str, tuple[int, int]] = {"f16": (2, 1), "q8_0": (34, 32), "q4_0": (18, 32)}
assert set(_KV_TYPE_BYTES) == set(KV_CACHE_TYPES)


def load_shapes(header: GGUFHeader, projector_bytes: int = 0,
                draft: GGUFHeader | None = None) -> tuple[ModelShape, ModelShape | None]:
    """A load's shapes as the planner counts them: the model's with its vision projector's
    memory, and its draft model's (None without one). GGUFError when a header lacks the keys."""
    shape = dataclasses.replace(shape_from_header(header), projector_bytes=projector_bytes)
    return shape, shape_from_header(draft) if draft is not None else None


def kv_cache_bytes(shape: ModelShape, n_ctx: int, kv_type: str, window_cells: int = 0) -> int:
    """K and V for every layer and context position: n_layers × n_ctx × n_head_kv × (key length
    + value length) × bytes per element, i.e. 2 × … × head_dim × … when both are head_dim.
    With `window_cells`, the sliding-window layers of a model whose pattern is known hold only
    that many cells (llama.cpp's window-only cache: swa_full off)."""
    try:
        num, den = _KV_TYPE_BYTES[kv_type]
    except KeyError:
        raise ValueError(f"Unknown KV cache type {kv_type!r} "
                         f"(one of {', '.join(KV_CACHE_TYPES)}).") from None
    if n_ctx < 0:
        raise ValueError("The context length cannot be negative.")
    head_dim = shape.n_embd // shape.n_head if shape.n_head else 0
    k = shape.key_length or head_dim
    v = shape.value_length or k
    per_cell = shape.n_head_kv * (k + v)
    n_layers = shape.kv_layers or shape.n_layers
    if window_cells and shape.n_swa and shape.swa_every:
        n_full = n_layers // shape.swa_every
        elements = per_cell * (n_full * n_ctx + (n_layers - n_full) * min(n_ctx, window_cells))
    else:
        elements = n_layers * n_ctx * per_cell
    return -(-elements * num // den)


def recurrent_bytes(shape: ModelShape, slots: int) -> int:
    """A recurrent or hybrid model's state: one per slot, f32, whatever the context length
    (llama.cpp counts it with the KV cells: its "RS buffer")."""
    return shape.recurrent_elements * 4 * max(1, slots)


def window_cells(shape: ModelShape, slots: int) -> int:
    """Cells a window-only sliding-window layer keeps in a pool shared by `slots` sequences:
    each one's window, and a batch being read (llama.cpp: n_swa × n_seq_max + n_ubatch)."""
    return shape.n_swa * max(1, slots) + N_UBATCH if shape.n_swa else 0


# What the engine process holds beyond its weights and KV cells, as its resident memory grows
# at work (measured on the bundled SmolLM2 and Gemma 3 270M, a prompt filling the context: the
# plan is within 5 % of the peak; docs/memory.md). llama.cpp reserves its compute buffers for a
# batch of n_ubatch (512) tokens against the whole context, all of them with logits, but only
# what a step touches becomes resident:
# - the process itself before a model (Python, llama.cpp, the engine): 53 MiB measured;
# - each vocabulary entry as the tokenizer holds it, and a row of logits per slot;
# - f32 activations of a batch (about 8 rows of n_embd and 3 of the feed-forward width);
# - the attention masks and whatever else grows with the cells a batch attends to;
# - without flash attention the f32 attention scores, n_ctx × n_ubatch × n_head × 4 bytes (448
#   MiB for a 28-head 7B at 8192 tokens; llama.cpp logs ~500 MiB there). With it, none.
N_UBATCH = 512
ENGINE_BASE_BYTES = 56 * 2**20
VOCAB_ENTRY_BYTES = 200
DEFAULT_VOCAB = 128_000  # a vocabulary the header does not give (a remote header's first MB)
_ACTIVATIONS, _FF_ACTIVATIONS, _MASK_BYTES = 8, 3, 8
# Sliding-window architectures and their pattern (llama.cpp's set_swa_pattern): one layer in
# this many attends to the whole context; the others keep their window.
SWA_PATTERNS = {"gemma2": 2, "gemma3": 6, "gemma3n": 5, "cohere2": 4, "gpt-oss": 2,
                "exaone4": 4}


def overhead_bytes(shape: ModelShape, n_ctx: int, flash: bool = False, slots: int = 1) -> int:
    """The engine's memory beside the weights and KV cells at work (see above); n_ctx is the
    cells a batch may attend to (a pool's size)."""
    scores = 0 if flash else n_ctx * N_UBATCH * max(shape.n_head, 1) * 4
    n_ff = shape.n_ff or 4 * shape.n_embd
    activations = N_UBATCH * 4 * (_ACTIVATIONS * shape.n_embd + _FF_ACTIVATIONS * n_ff)
    vocab = (shape.n_vocab or DEFAULT_VOCAB) * (VOCAB_ENTRY_BYTES + 4 * max(1, slots))
    return ENGINE_BASE_BYTES + scores + n_ctx * N_UBATCH * _MASK_BYTES + activations + vocab


def draft_bytes(draft: ModelShape | None, n_ctx: int, kv_type: str,
                flash: bool = False) -> int:
    """A draft model for speculative decoding (LoadParams.draft_model_path): its weights, its own
    KV cache at the same context and its compute buffers, all counted in RAM (the engine
    process's base is already counted once)."""
    if draft is None:
        return 0
    return (max(0, draft.weights_bytes) + kv_cache_bytes(draft, n_ctx, kv_type)
            + overhead_bytes(draft, n_ctx, flash) - ENGINE_BASE_BYTES)


# -- the machine ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Memory:
    ram_free: int
    ram_total: int
    vram_free: int = 0  # 0: unknown (or none)
    gpu_offload: bool = False  # the engine build can offload layers to a GPU


VramProbe = Callable[[], int]
_vram_probe: VramProbe | None = None


def set_vram_probe(probe: VramProbe | None) -> None:
    """Where free VRAM comes from (bytes), e.g. the engine host reporting what its backend sees.
    Inglenook probes no GPU itself (no NVML, no vendor libraries); without a probe it is 0."""
    global _vram_probe
    _vram_probe = probe


def offload_available() -> bool:
    """Whether a probe was set, i.e. the engine reported a build that can offload to a GPU."""
    return _vram_probe is not None


def system_memory(gpu_offload: bool = False) -> Memory:
    """Free and total RAM now (psutil's "available": free plus reclaimable cache, which is also
    where memory-mapped weights go), and free VRAM when a probe knows it."""
    vm = psutil.virtual_memory()
    vram = 0
    if gpu_offload and _vram_probe is not None:
        try:
            vram = max(0, int(_vram_probe()))
        except Exception:  # a failing probe must not break the Models dialog: VRAM unknown
            vram = 0
    return Memory(ram_free=int(vm.available), ram_total=int(vm.total), vram_free=vram,
                  gpu_offload=gpu_offload)


# -- the plan -------------------------------------------------------------------------------------
Label = Literal["fits", "tight", "won't fit"]
FITS_SHARE = 0.75  # "fits": the plan needs at most this share of free memory
VRAM_SHARE = 0.90  # layers go to the GPU while they fill at most this share of free VRAM
# recommend(): a larger quantization than Q4_K_M only while it needs at most this share of free
# memory. Bigger quants decode slower on CPU, so only small models get upgraded.
COMFORTABLE_SHARE = 0.25


@dataclass(frozen=True)
class FitPlan:
    label: Label
    weights_bytes: int
    kv_bytes: int
    overhead_bytes: int
    total_bytes: int
    gpu_layers: int  # -1: all layers on the GPU; 0: none (CPU only)
    note: str  # one sentence for the user
    draft_bytes: int = 0  # a draft model's share of total_bytes (see draft_bytes())


def _plan(shape: ModelShape, n_ctx: int, kv_type: str, memory: Memory,
          draft: ModelShape | None = None, slots: int = 1,
          pool: int = 0, flash: bool = False) -> tuple[FitPlan, float]:
    """The plan, and the share of free RAM it needs. Without a pool (0) each slot (a reply
    decoded at once) has a KV cache of n_ctx of its own; with one, the slots share `pool`
    tokens (at least n_ctx). The compute buffers are sized for one batch either way."""
    weights = max(0, shape.weights_bytes)
    # A pool turns flash attention on, and keeps only the window of sliding-window layers.
    flash = flash or bool(pool)
    kv = (kv_cache_bytes(shape, max(pool, n_ctx), kv_type, window_cells(shape, slots)) if pool
          else kv_cache_bytes(shape, n_ctx, kv_type) * max(1, slots)) + recurrent_bytes(
        shape, slots)
    overhead = overhead_bytes(shape, max(pool, n_ctx), flash, slots)
    drafting = draft_bytes(draft, n_ctx, kv_type, flash)
    total = weights + kv + overhead + drafting + shape.projector_bytes
    gpu_layers, on_gpu = 0, 0
    split = memory.gpu_offload and memory.vram_free > 0 and shape.n_layers > 0
    if split:
        # Each repeating layer's share of the weights (embeddings and output counted in, so a
        # layer is over-estimated) and of the KV cache, which llama.cpp keeps with its layer.
        per_layer = -(-(weights + kv) // shape.n_layers)
        n = min(shape.n_layers, int(memory.vram_free * VRAM_SHARE) // max(per_layer, 1))
        on_gpu = weights + kv if n == shape.n_layers else n * per_layer
        gpu_layers = -1 if n == shape.n_layers else n
    elif memory.gpu_offload:
        gpu_layers = -1  # VRAM unknown: llama.cpp's default; judged against RAM alone
    ram_need = total - on_gpu
    share = ram_need / memory.ram_free if memory.ram_free > 0 else float("inf")
    label: Label = ("fits" if share <= FITS_SHARE else "tight" if share <= 1.0 else "won't fit")
    where = "free" if not memory.gpu_offload else "free RAM"
    if label == "won't fit":
        note = f"Needs {gigabytes(ram_need)} but only {gigabytes(memory.ram_free)} is {where}"
    else:
        note = f"Needs {gigabytes(ram_need)} of {gigabytes(memory.ram_free)} {where}"
    if split and gpu_layers == -1:
        note += f", with all {shape.n_layers} layers on the GPU ({gigabytes(on_gpu)})"
    elif split:
        note += f", with {gpu_layers} of {shape.n_layers} layers on the GPU ({gigabytes(on_gpu)})"
    elif memory.gpu_offload:
        note += " (GPU memory unknown: checked against RAM only)"
    if drafting:
        note += f", {gigabytes(drafting)} of it for the draft model"
    if shape.projector_bytes:
        note += f", {gigabytes(shape.projector_bytes)} of it for the vision projector"
    if label == "tight":
        note += "; close other programs, or choose a smaller quantization or context"
    return FitPlan(label, weights, kv, overhead, total, gpu_layers, note + ".",
                   drafting), share


def plan(shape: ModelShape, n_ctx: int, kv_type: str, memory: Memory,
         draft: ModelShape | None = None, slots: int = 1, pool: int = 0,
         flash: bool = False) -> FitPlan:
    """Weights + KV cache + compute buffers at n_ctx and kv_type, against free memory.

    fits: what RAM must hold is at most 75% of free RAM; tight: at most 100%; else won't fit.
    With gpu_offload and a known vram_free, as many layers (weights plus their KV share) as fill
    at most 90% of free VRAM go to the GPU (gpu_layers; -1 when all do) and the rest stays in RAM;
    the compute buffers (and a draft model, see draft_bytes) are counted in RAM either way."""
    return _plan(shape, n_ctx, kv_type, memory, draft, slots, pool, flash)[0]


# -- before loading -------------------------------------------------------------------------------
CONTEXT_STEP = 256  # llama.cpp pads the context to a multiple of 256


def largest_context(shape: ModelShape, kv_type: str, memory: Memory, upper: int,
                    draft: ModelShape | None = None, slots: int = 1) -> int:
    """The largest context, a multiple of CONTEXT_STEP and at most `upper`, whose plan does not
    need more than the free memory ("won't fit"); 0 when not even CONTEXT_STEP does. The need
    grows with the context, so this is a binary search: ~30 plans even for 10^9 tokens."""
    def fits(steps: int) -> bool:
        return _plan(shape, steps * CONTEXT_STEP, kv_type, memory, draft, slots)[1] <= 1.0

    lo, hi = 0, max(0, upper) // CONTEXT_STEP  # invariant: lo steps fit (0 trivially)
    if hi == 0 or not fits(1):
        return 0
    while lo < hi:
        middle = (lo + hi + 1) // 2
        if fits(middle):
            lo = middle
        else:
            hi = middle - 1
    return lo * CONTEXT_STEP


def most_slots(shape: ModelShape, n_ctx: int, kv_type: str, memory: Memory, upper: int,
               draft: ModelShape | None = None, share: float = 1.0) -> int:
    """The most slots, at most `upper`, whose plan at n_ctx needs at most `share` of the free
    memory; 0 when not even one does."""
    best = 0
    for slots in range(1, max(0, upper) + 1):
        if _plan(shape, n_ctx, kv_type, memory, draft, slots)[1] > share:
            break
        best = slots
    return best


def most_pool(shape: ModelShape, n_ctx: int, kv_type: str, memory: Memory, slots: int,
              upper: int, draft: ModelShape | None = None) -> int:
    """The largest pool, a multiple of CONTEXT_STEP from n_ctx to `upper`, that fits; 0 when
    not even n_ctx does."""
    def fits(cells: int) -> bool:
        return _plan(shape, n_ctx, kv_type, memory, draft, slots, cells)[1] <= 1.0

    if not fits(n_ctx):
        return 0
    lo, hi = n_ctx // CONTEXT_STEP, max(n_ctx, upper) // CONTEXT_STEP
    while lo < hi:
        middle = (lo + hi + 1) // 2
        if fits(middle * CONTEXT_STEP):
            lo = middle
        else:
            hi = middle - 1
    return max(n_ctx, lo * CONTEXT_STEP)


def default_slots(shape: ModelShape, n_ctx: int, kv_type: str, memory: Memory,
                  draft: ModelShape | None = None, pool: int = 0) -> int:
    """Replies decoded at once when the user left it automatic: as many as still "fit" (at most
    FITS_SHARE of free memory), up to DEFAULT_SLOTS; at least one. Slots sharing a pool cost
    no KV of their own: DEFAULT_SLOTS wherever the pool fits."""
    if pool:
        return DEFAULT_SLOTS
    return max(1, most_slots(shape, n_ctx, kv_type, memory, DEFAULT_SLOTS, draft, FITS_SHARE))


def refusal(shape: ModelShape, n_ctx: int, kv_type: str, memory: Memory, *,
            allow_beyond_trained: bool = False, draft: ModelShape | None = None,
            slots: int = 1, pool: int = 0) -> LoadRefusal | None:
    """Why loading this model at n_ctx (with `slots` KV caches of it, or `slots` replies sharing
    a KV pool of `pool` tokens, at least n_ctx) should not be tried; None when it may be.

    Refused: a plan that needs more than the free memory ("won't fit": llama.cpp would try to
    allocate it and be killed, or fail after a long wait), with the largest context that fits
    and the most slots that fit; and a context beyond the model's trained length unless
    `allow_beyond_trained`."""
    slots = max(1, slots)
    trained = shape.n_ctx_train
    beyond = 0 < trained < n_ctx and not allow_beyond_trained
    need, share = _plan(shape, n_ctx, kv_type, memory, draft, slots, pool)
    if share <= 1.0 and not beyond:
        return None
    where = "free RAM" if memory.gpu_offload else "free"
    if share <= 1.0:
        return LoadRefusal("beyond_trained", (
            f"This model was trained on a context of {trained:,} tokens; {n_ctx:,} is beyond "
            "that, where replies are often incoherent. Choose at most "
            f"{trained:,} tokens, or allow a context beyond the trained length explicitly."),
            trained_context=trained)
    pooled = pool > 0
    largest = largest_context(shape, kv_type, memory,
                              min(n_ctx, trained) if beyond else n_ctx, draft,
                              1 if pooled else slots)
    fewer = (most_slots(shape, n_ctx, kv_type, memory, slots - 1, draft)
             if slots > 1 and not pooled else 0)
    largest_pool = most_pool(shape, n_ctx, kv_type, memory, slots, pool, draft) if pooled else 0
    in_ram = share * memory.ram_free if memory.ram_free > 0 else need.total_bytes
    on_gpu = " beyond what fits on the GPU" if need.total_bytes - in_ram > 1e6 else ""
    drafting = f", {gigabytes(need.draft_bytes)} for the draft model" if need.draft_bytes else ""
    lanes = (f", {slots} replies at once in a pool of {pool:,} tokens," if pool > n_ctx
             else f", shared by {slots} replies at once," if pooled and slots > 1
             else f" for each of {slots} replies at once" if slots > 1 else "")
    needs = (f"A context of {n_ctx:,} tokens{lanes} needs about {gigabytes(in_ram)}{on_gpu} "
             f"({gigabytes(need.weights_bytes)} of weights, "
             f"{gigabytes(need.kv_bytes)} of KV cache, "
             f"{gigabytes(need.overhead_bytes)} of buffers{drafting}) but only "
             f"{gigabytes(memory.ram_free)} is {where}.")
    fix_slots = (f" At this context, {fewer} {'reply' if fewer == 1 else 'replies'} at once "
                 "would fit.") if fewer else ""
    if largest_pool:
        message = (f"{needs} The largest KV pool that fits is {largest_pool:,} tokens: give "
                   "the pool fewer tokens in the load settings.")
    elif largest == 0:
        message = (f"{needs} Not even a context of {CONTEXT_STEP} tokens fits: close other "
                   f"programs or choose a smaller quantization of this model.{fix_slots}")
    else:
        trained_note = (f" (this model was trained on {trained:,} tokens; a longer context "
                        "needs an explicit choice)") if beyond else ""
        message = (f"{needs} The largest context that fits is {largest:,} tokens"
                   f"{trained_note}.{fix_slots}")
    return LoadRefusal("memory", message, largest_context=largest, largest_slots=fewer,
                       trained_context=trained)


def load_refusal(shape: ModelShape, n_ctx: int, kv_type: str, memory: Memory, *,
                 allow_beyond_trained: bool = False,
                 draft: ModelShape | None = None, slots: int = 1) -> str | None:
    """refusal()'s message, or None."""
    found = refusal(shape, n_ctx, kv_type, memory, allow_beyond_trained=allow_beyond_trained,
                    draft=draft, slots=slots)
    return found.message if found is not None else None


# -- which quantization ---------------------------------------------------------------------------
_FLOAT = re.compile(r"^(?:F16|BF16|F32|FP16|FP32)$")
DEFAULT_QUANT = "Q4_K_M"


def _quant_key(quant: str) -> str:
    return (parse_quant(quant) or quant).upper()


def recommend(models: Sequence[tuple[str, int]], shape: ModelShape, n_ctx: int, kv_type: str,
              memory: Memory) -> str | None:
    """The quantization to download among one repository's (quant, size in bytes) options, or
    None when none fits. Weights scale with file size; the rest of the shape is the same.

    Q4_K_M when it fits; a larger (better) quantization instead when it still fits comfortably
    (at most half of free RAM, and no layer pushed off the GPU). Otherwise the largest that fits:
    smaller than Q4_K_M when that does not fit. Unquantized F16/BF16/F32 only when the
    repository has nothing else that fits."""
    options = []
    for quant, size in models:
        if size <= 0:
            continue
        p, share = _plan(dataclasses.replace(shape, weights_bytes=size), n_ctx, kv_type, memory)
        options.append((quant, size, p, share))
    fitting = [o for o in options if o[2].label == "fits"]
    if not fitting:
        return None
    quantized = [o for o in fitting if not _FLOAT.match(_quant_key(o[0]))] or fitting
    largest = max(quantized, key=lambda o: o[1])[0]
    anchor = next((o for o in fitting if _quant_key(o[0]) == DEFAULT_QUANT), None)
    if anchor is None:  # Q4_K_M does not fit (all that fit are smaller), or there is none
        return largest
    better = [o for o in quantized if o[1] >= anchor[1] and o[3] <= COMFORTABLE_SHARE
              and o[2].gpu_layers == anchor[2].gpu_layers]
    return max(better, key=lambda o: o[1])[0] if better else anchor[0]
