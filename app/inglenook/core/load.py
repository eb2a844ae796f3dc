"""How to load a model, and what the engine reports about the model it loaded."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Literal

from inglenook.core.reasoning import TemplateTraits

KvCacheType = Literal["f16", "q8_0", "q4_0"]
KV_CACHE_TYPES: tuple[str, ...] = ("f16", "q8_0", "q4_0")
DEFAULT_MAX_CTX = 8192
Speculation = Literal["", "prompt lookup", "draft model"]
MAX_LOOKUP_NGRAM = 8
LOOKUP_MIN_NGRAM = 3  # shorter matches guess wrong too often on prose (bench: 2 gave prose 0.97x)
MAX_SPECULATED = 64
MAX_SLOTS = 16  # replies decoded at once (llama.cpp's own limit is 256)
DEFAULT_SLOTS = 4  # the most that are chosen automatically (llama-server's default too)


class LoadParamsError(ValueError):
    """Load options that cannot work together; the message is shown to the user."""


@dataclass(frozen=True)
class LoadParams:
    model_path: str
    n_ctx: int = 0  # 0: min(trained context, 8192)
    n_gpu_layers: int = -1  # -1: all layers when the build can offload
    n_threads: int = 0  # decoding, one token at a time; 0: all physical cores
    n_batch: int = 512
    flash_attn: bool = False
    kv_cache_type: str = "f16"
    use_mmap: bool = True
    use_mlock: bool = False
    chat_template: str | None = None  # overrides the template in the GGUF file
    # A context longer than the model was trained on loads only when asked for explicitly:
    # replies past the trained length are often incoherent.
    allow_beyond_trained: bool = False
    # KV-cache states of conversations the engine keeps (engine/kv_states.py): RAM and disk
    # budgets in MiB; -1: derived from free memory / free disk (see ModelInfo for the result).
    kv_state_ram_mb: int = -1
    kv_state_disk_mb: int = -1
    # Prompt evaluation (and checking speculated tokens) works on batches, where hyperthreads
    # help; decoding one token at a time is bound by memory, where they only add contention.
    n_threads_batch: int = 0  # 0: all logical cores
    # Speculative decoding (engine/speculative.py): the reply is the same token for token, only
    # faster when guesses are accepted. Prompt lookup guesses the continuation of the longest
    # earlier match of the last `lookup_ngram` tokens (down to LOOKUP_MIN_NGRAM) in the prompt
    # and the reply, at most `lookup_tokens` at a time. A draft model (same vocabulary, much
    # smaller) guesses instead when set: at most `draft_tokens`, while its own confidence in
    # the next guess is at least `draft_p_min`. See host/loading.py on flash attention.
    prompt_lookup: bool = True
    lookup_ngram: int = 3
    lookup_tokens: int = 8
    draft_model_path: str = ""
    draft_tokens: int = 8
    draft_p_min: float = 0.5
    # Replies decoded at once (slots, "lanes"): each has a KV cache of n_ctx tokens of its own.
    # 0: automatic, up to DEFAULT_SLOTS as free memory allows (see models/fit.py).
    n_slots: int = 0

    def replace(self, **changes: object) -> LoadParams:
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    def validate(self) -> None:
        if self.kv_cache_type not in KV_CACHE_TYPES:
            raise LoadParamsError(f"Unknown KV cache type {self.kv_cache_type!r}.")
        if self.kv_cache_type != "f16" and not self.flash_attn:
            raise LoadParamsError(
                f"A {self.kv_cache_type} KV cache needs flash attention: llama.cpp can only "
                "quantize the V cache with it. Turn flash attention on or use f16."
            )
        if self.n_ctx < 0 or self.n_batch < 1 or self.n_threads < 0:
            raise LoadParamsError("Context length, batch size and threads must be positive.")
        if self.kv_state_ram_mb < -1 or self.kv_state_disk_mb < -1:
            raise LoadParamsError("Memory for chat states must be 0 or more (-1: automatic).")
        if self.n_threads_batch < 0:
            raise LoadParamsError("Threads must be positive.")
        if not 1 <= self.lookup_ngram <= MAX_LOOKUP_NGRAM:
            raise LoadParamsError(f"The n-gram size must be 1 to {MAX_LOOKUP_NGRAM}.")
        if not (1 <= self.lookup_tokens <= MAX_SPECULATED and 1 <= self.draft_tokens
                <= MAX_SPECULATED):
            raise LoadParamsError(f"Tokens proposed must be 1 to {MAX_SPECULATED}.")
        if not 0.0 <= self.draft_p_min <= 1.0:
            raise LoadParamsError("The draft model's confidence cutoff must be 0 to 1.")
        if not 0 <= self.n_slots <= MAX_SLOTS:
            raise LoadParamsError(f"Replies at once must be 0 (automatic) to {MAX_SLOTS}.")

    @property
    def speculation(self) -> Speculation:
        """What guesses tokens ahead: a draft model when one is set, else prompt lookup."""
        if self.draft_model_path:
            return "draft model"
        return "prompt lookup" if self.prompt_lookup else ""


@dataclass(frozen=True)
class ModelDefaults:
    """What one model loads with, over the panel's settings. Empty values defer to the panel."""

    n_ctx: int = 0  # 0: the panel's context length
    n_gpu_layers: int | None = None  # None: the panel's setting; -1: all
    preset: str = ""  # a preset applied when the model loads
    chat_template: str = ""  # overrides the template in the GGUF file
    # Speculative decoding for this model (see LoadParams): None / "" defer to the panel.
    prompt_lookup: bool | None = None
    draft_model_path: str = ""

    def apply(self, params: LoadParams) -> LoadParams:
        changes: dict[str, object] = {}
        if self.n_ctx > 0:
            changes["n_ctx"] = self.n_ctx
        if self.n_gpu_layers is not None:
            changes["n_gpu_layers"] = self.n_gpu_layers
        if self.chat_template.strip():
            changes["chat_template"] = self.chat_template
        if self.prompt_lookup is not None:
            changes["prompt_lookup"] = self.prompt_lookup
        if self.draft_model_path.strip():
            changes["draft_model_path"] = self.draft_model_path
        return params.replace(**changes)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: object) -> ModelDefaults:
        """From stored settings; anything malformed falls back to "use the panel"."""
        if not isinstance(data, dict):
            return cls()
        n_ctx, layers = data.get("n_ctx"), data.get("n_gpu_layers")
        preset, template = data.get("preset"), data.get("chat_template")
        lookup, draft = data.get("prompt_lookup"), data.get("draft_model_path")
        return cls(
            n_ctx=n_ctx if type(n_ctx) is int and n_ctx > 0 else 0,
            n_gpu_layers=layers if type(layers) is int and layers >= -1 else None,
            preset=preset if isinstance(preset, str) else "",
            chat_template=template if isinstance(template, str) else "",
            prompt_lookup=lookup if isinstance(lookup, bool) else None,
            draft_model_path=draft if isinstance(draft, str) else "")

    @property
    def empty(self) -> bool:
        return self == ModelDefaults()


def choose_context(requested: int, trained: int) -> int:
    """The context length to load with: the user's choice, else min(trained, 8192)."""
    if requested > 0:
        return requested
    return min(trained, DEFAULT_MAX_CTX) if trained > 0 else DEFAULT_MAX_CTX


@dataclass(frozen=True)
class ModelInfo:
    path: str
    name: str
    architecture: str
    size_bytes: int
    n_ctx: int
    n_ctx_train: int
    n_threads: int
    n_gpu_layers: int
    gpu_offload_supported: bool
    flash_attn: bool
    kv_cache_type: str
    template_source: Literal["gguf", "override", "chatml"]
    load_seconds: float = 0.0
    quantization: str = ""
    # What the engine may hold for the KV-cache states of conversations it keeps, in bytes.
    kv_state_ram_budget: int = 0
    kv_state_disk_budget: int = 0
    n_threads_batch: int = 0
    speculation: str = ""  # Speculation: what the engine guesses tokens with ("" none)
    draft_model: str = ""  # the draft model's name, with "draft model"
    # What the chat template does with reasoning (and its switches), and how it writes tool
    # calls (tools.formats.ToolFormat; "": it has no tool support we can read).
    traits: TemplateTraits = field(default_factory=TemplateTraits)
    tool_format: str = ""
    n_slots: int = 1  # replies decoded at once, each with a KV cache of n_ctx tokens
    kv_bytes: int = 0  # the KV cache of all slots together
    memory_bytes: int = 0  # the fit planner's estimate of all this model holds (0: unknown)


RefusalReason = Literal["memory", "beyond_trained"]


@dataclass(frozen=True)
class LoadRefusal:
    """Why a load was not tried, with what would make it load: the window offers those as
    one-click fixes. `message` is for the user.

    memory: the estimate needs more than the free memory; `largest_context` fits with these
    slots (0: not even the smallest), `largest_slots` fit at this context (0: not even one).
    beyond_trained: a context longer than the model was trained on (`trained_context`) was not
    allowed explicitly."""

    reason: RefusalReason
    message: str
    largest_context: int = 0
    largest_slots: int = 0
    trained_context: int = 0
