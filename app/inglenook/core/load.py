"""How to load a model, and what the engine reports about the model it loaded."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Literal, Self

from inglenook.core.builtin_templates import AUTOMATIC, TEMPLATE_NAMES
from inglenook.core.families import MemoryFamily
from inglenook.core.reasoning import TemplateTraits
from inglenook.core.sampling import ParamSpec
from inglenook.core.values import Number, check_number, check_text, show

KvCacheType = Literal["f16", "q8_0", "q4_0"]
KV_CACHE_TYPES: tuple[str, ...] = ("f16", "q8_0", "q4_0")
DEFAULT_MAX_CTX = 8192
Speculation = Literal["", "prompt lookup", "draft model"]
MAX_LOOKUP_NGRAM = 8
LOOKUP_MIN_NGRAM = 3  # shorter matches guess wrong too often on prose (bench: 2 gave prose 0.97x)
MAX_SPECULATED = 64
MAX_SLOTS = 16  # replies decoded at once (llama.cpp's own limit is 256)
DEFAULT_SLOTS = 4  # the most that are chosen automatically (llama-server's default too)
MAX_CTX = 1 << 20  # 1,048,576 tokens: beyond what any model is trained for
MAX_GPU_LAYERS = 999  # more than any model has: "all" by count (llama.cpp clamps it)
MAX_THREADS = 512
MAX_PATH = 4096


class LoadParamsError(ValueError):
    """Load options that cannot work together; the message is shown to the user."""


@dataclass(frozen=True, kw_only=True)
class LoadOptions:
    """The load options a user sets, one field per LOAD_SPECS entry (its default is the
    option's): the same type for every model (Settings.load, the side panel, the flags of
    `inglenook chat`) and for one model (ModelDefaults.load names those it sets). A new option
    is a field here and a LoadSpec below; the settings file, the panel, the per-model dialog
    and the CLI follow from those."""

    n_ctx: int = 0  # 0: min(trained context, 8192)
    n_gpu_layers: int = -1  # -1: all layers when the build can offload
    n_threads: int = 0  # decoding, one token at a time; 0: all physical cores
    n_batch: int = 512
    flash_attn: bool = False
    kv_cache_type: str = "f16"
    use_mmap: bool = True
    use_mlock: bool = False
    # Which template when chat_template is not given (core/builtin_templates.py): "auto" (the
    # file's own, else a built-in chosen from its vocabulary), "file", or a built-in's name.
    template_name: str = AUTOMATIC
    # A context longer than the model was trained on loads only when asked for explicitly:
    # replies past the trained length are often incoherent.
    allow_beyond_trained: bool = False
    # Prompt evaluation (and checking speculated tokens) works on batches, where hyperthreads
    # help; decoding one token at a time is bound by memory, where they only add contention.
    n_threads_batch: int = 0  # 0: all logical cores
    # Speculative decoding (engine/speculative.py): the reply is the same token for token, only
    # faster when guesses are accepted. Prompt lookup guesses the continuation of the longest
    # earlier match of the last tokens in the prompt and the reply; a draft model (same
    # vocabulary, much smaller) guesses instead when set. See host/loading.py on flash attention.
    prompt_lookup: bool = True
    draft_model_path: str = ""
    # Replies decoded at once (slots, "lanes"). Without a pool each has a KV cache of n_ctx
    # tokens of its own; with one, they draw cells from it. 0: automatic, up to DEFAULT_SLOTS
    # as free memory allows (see models/fit.py).
    n_slots: int = 0
    # A KV pool of this many tokens that all replies share (llama.cpp's unified KV cache, with
    # flash attention): memory follows the tokens in flight, not the slots. Never less than
    # the context length (one long chat may use all of it). 0: the context length (as
    # llama-server's -c with its slots). Settings of versions before the pool was the default
    # stored 0 for "off": they read as this default, which is what a user who never set it
    # expects (docs/memory.md).
    kv_pool: int = 0
    # A KV cache of the context length per reply instead of the pool: a reply written beside
    # others is the one written alone, bit for bit, at the memory of a context per slot.
    kv_per_reply: bool = False
    # A vision projector (mmproj GGUF) read with the model: its images become embeddings
    # (engine/host/mtmd.py); models/projector.py pairs and checks it before loading.
    mmproj_path: str = ""

    def replace(self, **changes: object) -> Self:
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    def pool_tokens(self, n_ctx: int) -> int:
        """The shared KV pool's size at this context length; 0: a KV cache per reply."""
        return 0 if self.kv_per_reply else max(self.kv_pool, n_ctx)

    def to_dict(self) -> dict[str, object]:
        return {name: getattr(self, name) for name in _OPTION_NAMES}

    @classmethod
    def parse(cls, data: object, where: str = "") -> tuple[LoadOptions, list[str]]:
        """Stored options (settings.json): each checked by its LoadSpec, repaired with a
        sentence when it cannot be used; absent ones keep their defaults, unknown names are
        ignored (a newer version's). A quantized KV cache turns flash attention on."""
        if not isinstance(data, dict):
            return LoadOptions(), [f"{where or 'load'}: {show(data)} is not a set of load "
                                   "options (reset to the defaults)"]
        values: dict[str, object] = {}
        problems: list[str] = []
        for name, spec in LOAD_SPECS.items():
            if name in data:
                values[name], problem = spec.check(where + name, data[name], spec.default)
                if problem:
                    problems.append(problem)
        options = LoadOptions(**values)  # type: ignore[arg-type]  # each checked above
        if options.kv_cache_type != "f16" and not options.flash_attn and options.kv_per_reply:
            # A quantized V cache needs flash attention (a pool turns it on); the user asked
            # for the cache type.
            options = options.replace(flash_attn=True)
            problems.append(f"{where}flash_attn: a {options.kv_cache_type} KV cache needs "
                            "flash attention (turned on)")
        return options, problems


_OPTION_NAMES = tuple(f.name for f in dataclasses.fields(LoadOptions))


@dataclass(frozen=True)
class LoadParams(LoadOptions):
    """What the engine is asked to load: a model file with the user's options, and what the
    engine tunes itself (not user options: no panel, flag or setting)."""

    model_path: str
    chat_template: str | None = None  # overrides the template in the GGUF file
    # KV-cache states of conversations the engine keeps (engine/kv_states.py): RAM and disk
    # budgets in MiB; -1: derived from free memory / free disk (see ModelInfo for the result).
    kv_state_ram_mb: int = -1
    kv_state_disk_mb: int = -1
    # Prompt lookup matches the last `lookup_ngram` tokens (down to LOOKUP_MIN_NGRAM) and
    # proposes at most `lookup_tokens`; a draft model at most `draft_tokens`, while its own
    # confidence in the next guess is at least `draft_p_min`.
    lookup_ngram: int = 3
    lookup_tokens: int = 8
    draft_tokens: int = 8
    draft_p_min: float = 0.5

    @classmethod
    def of(cls, model_path: str, options: LoadOptions,
           chat_template: str | None = None) -> LoadParams:
        return cls(model_path, chat_template, **options.to_dict())  # type: ignore[arg-type]

    def validate(self) -> None:
        for spec in LOAD_SPECS.values():  # each option's range or choices
            if problem := spec.problem(getattr(self, spec.name)):
                raise LoadParamsError(problem)
        if self.kv_cache_type != "f16" and not self.flash_attn and self.kv_per_reply:
            raise LoadParamsError(
                f"A {self.kv_cache_type} KV cache needs flash attention: llama.cpp can only "
                "quantize the V cache with it. Turn flash attention on or use f16.")
        # The engine's own tuning (not user options: no panel, flag or setting).
        if self.kv_state_ram_mb < -1 or self.kv_state_disk_mb < -1:
            raise LoadParamsError("Memory for chat states must be 0 or more (-1: automatic).")
        if not 1 <= self.lookup_ngram <= MAX_LOOKUP_NGRAM:
            raise LoadParamsError(f"The n-gram size must be 1 to {MAX_LOOKUP_NGRAM}.")
        if not (1 <= self.lookup_tokens <= MAX_SPECULATED and 1 <= self.draft_tokens
                <= MAX_SPECULATED):
            raise LoadParamsError(f"Tokens proposed must be 1 to {MAX_SPECULATED}.")
        if not 0.0 <= self.draft_p_min <= 1.0:
            raise LoadParamsError("The draft model's confidence cutoff must be 0 to 1.")

    @property
    def speculation(self) -> Speculation:
        """What guesses tokens ahead: a draft model when one is set, else prompt lookup."""
        if self.draft_model_path:
            return "draft model"
        return "prompt lookup" if self.prompt_lookup else ""


# ---- the load options a user sets -------------------------------------------------------------
# Each is declared once, here; from these the side panel's "Model loading" section
# (ui/side/load_section.py), the per-model defaults dialog, the settings file's checks,
# LoadParams.validate and the flags of `inglenook chat`, `prompt` and `serve` are built.
# LoadParams' field default is the option's default.

LoadKind = Literal["int", "bool", "choice", "path"]
# The panel's part: loading, or speed (speed_options.py); "model": never the panel, only one
# model's defaults (Defaults for this model…) and the command line, for what belongs to one
# model file (its vision projector: another model's would be refused).
LoadGroup = Literal["load", "speed", "model"]



def _number_text(value: float) -> str:
    """1,048,576 rather than 1.04858e+06; 0.5 as it is."""
    return f"{int(value):,}" if float(value).is_integer() else f"{value:g}"


@dataclass(frozen=True)
class LoadSpec(ParamSpec):
    """One load option. `special_value_text` is how "automatic" is spelled: the value at the
    minimum (0 or -1) means it, and the CLI's help says it in `auto_help`'s words."""

    kind: LoadKind = "int"
    choices: tuple[str, ...] = ()
    help: str = ""  # the CLI's short help
    auto_help: str = ""  # the CLI's words for the automatic value; "": special_value_text
    per_model: bool = False  # offered in the per-model defaults dialog (ModelDefaults)
    group: LoadGroup = "load"

    @property
    def default(self) -> object:
        return _DEFAULTS[self.name]

    @property
    def automatic(self) -> int | None:
        """The value that means "automatic" (or "all"), if any."""
        return int(self.minimum) if self.special_value_text else None

    @property
    def rule(self) -> Number:
        return Number(int, self.minimum, self.maximum)

    def describe_default(self) -> str:
        if self.kind == "int" and self.default == self.automatic:
            return self.auto_help or self.special_value_text.lower()
        if self.kind == "path":
            return "none"
        if self.kind == "bool":
            return "on" if self.default else "off"
        return str(self.default)

    def problem(self, value: object) -> str | None:
        """Why `value` cannot be this option, in a sentence for the user; None if it can."""
        if self.kind == "bool":
            return None if isinstance(value, bool) else f"{self.label}: on or off, not {value!r}."
        if self.kind == "choice":
            return None if value in self.choices else f"Unknown {self.label} {value!r}."
        if self.kind == "path":
            return None if isinstance(value, str) and len(value) <= MAX_PATH else (
                f"{self.label}: not a usable path.")
        if (isinstance(value, int) and not isinstance(value, bool)
                and self.minimum <= value <= self.maximum):
            return None
        auto = f" ({self.special_value_text.lower()})" if self.special_value_text else ""
        return f"{self.label} must be {_number_text(self.minimum)}{auto} to " \
            f"{_number_text(self.maximum)}."

    def check(self, where: str, raw: object, default: object) -> tuple[object, str | None]:
        """A stored value as this option (settings.json): repaired, with a sentence, or as is."""
        if self.kind == "bool":
            return (raw, None) if isinstance(raw, bool) else (
                default, f"{where}: {show(raw)} is not true or false (reset to {default!r})")
        if self.kind in ("choice", "path"):
            shown = default if isinstance(default, str) else ""
            text, problem = check_text(where, raw, shown, MAX_PATH, self.choices)
            return (default, problem) if problem else (text, None)
        return check_number(where, raw, self.rule, default)


def _number(name: str, label: str, lo: int, hi: int, tooltip: str, *, flag: str, help: str,
            step: int = 1, automatic: str = "", auto_help: str = "", per_model: bool = False,
            group: LoadGroup = "load") -> LoadSpec:
    return LoadSpec(name, label, lo, hi, step, 0, tooltip, automatic, flag, help=help,
                    auto_help=auto_help, per_model=per_model, group=group)


def _switch(name: str, label: str, tooltip: str, *, flag: str, help: str,
            per_model: bool = False, group: LoadGroup = "load") -> LoadSpec:
    return LoadSpec(name, label, 0, 1, 1, 0, tooltip, "", flag, kind="bool", help=help,
                    per_model=per_model, group=group)


_DEFAULTS: dict[str, object] = {f.name: f.default for f in dataclasses.fields(LoadParams)}

LOAD_SPECS: dict[str, LoadSpec] = {s.name: s for s in (
    _number("n_ctx", "Context length", 0, MAX_CTX,
            "How many tokens of the chat the model can see at once. Longer contexts use more "
            f"memory. Model default: min(trained context, {DEFAULT_MAX_CTX}).",
            flag="--ctx", help="context length in tokens", step=1024,
            automatic="Model default", auto_help=f"the model's, at most {DEFAULT_MAX_CTX}",
            per_model=True),
    _number("n_gpu_layers", "GPU layers", -1, MAX_GPU_LAYERS,
            "How many layers to put on the GPU. All is fastest if they fit in video memory; "
            "lower it if loading runs out of memory.",
            flag="--gpu-layers", help="layers to put on the GPU (0: none)", automatic="All",
            auto_help="all, when the engine can offload", per_model=True),
    _number("n_threads", "CPU threads", 0, MAX_THREADS,
            "Threads used for the parts that run on the CPU. Physical cores is usually best; "
            "more threads than cores tends to be slower.",
            flag="--threads", help="CPU threads for writing the reply",
            automatic="All physical cores"),
    _number("n_batch", "Batch size", 1, 8192,
            "Prompt tokens processed per step. Larger is faster for long prompts and uses "
            "more memory.", flag="--batch", help="prompt tokens processed per step", step=128),
    _number("n_slots", "Replies at once", 0, MAX_SLOTS,
            "How many replies the model writes at the same time (chats, API clients). They "
            "share the KV pool, so more costs little memory (with a KV cache per reply, a "
            "context each). Several decoded together are faster in total than one after "
            f"another. Automatic: up to {DEFAULT_SLOTS}, as free memory allows.",
            flag="--parallel", help="replies decoded at once, sharing the KV pool (each with "
            "a KV cache of --ctx tokens with --kv-per-reply)", automatic="Automatic",
            auto_help=f"up to {DEFAULT_SLOTS}, as free memory allows"),
    _number("kv_pool", "Shared KV pool", 0, MAX_CTX,
            "Tokens of KV cache that all replies at once share: one long chat may use all of "
            "it, four short ones share it, so memory follows the chats in flight. When it is "
            "full, the chats least recently used are saved to the state cache, and a new reply "
            "waits for room. At least the context length (Automatic: the context length); "
            "more lets several long chats run at once. Turns flash attention on. Where a "
            "chat's cells sit in the pool changes rounding: a reply may part at a near-tie "
            "word from the one written alone (see docs/memory.md); a seeded request replayed "
            "gives the same reply.",
            flag="--kv-pool", help="KV cache tokens shared by the replies at once (turns "
            "flash attention on)", step=1024,
            automatic="Context length", auto_help="the context length"),
    _switch("kv_per_reply", "A KV cache per reply (exact in any company)",
            "Instead of the shared pool, each reply at once gets a KV cache of the context "
            "length of its own: a reply written beside others is the one written alone, bit "
            "for bit, but every slot reserves a whole context whether it is used or not "
            "(four slots: four times the KV memory).",
            flag="--kv-per-reply", help="a KV cache of --ctx tokens per reply instead of "
            "the shared pool (exact beside other replies; a context's memory per slot)",
            per_model=True),
    LoadSpec("kv_cache_type", "KV cache", 0, 0, 0, 0,
             "Precision of the attention cache. q8_0 halves its memory with little loss; "
             "q4_0 saves more. Quantized caches need flash attention.",
             flag="--kv-cache-type", kind="choice", choices=KV_CACHE_TYPES,
             help="precision of the attention cache; q8_0 and q4_0 need --flash-attn"),
    _switch("flash_attn", "Flash attention",
            "Faster attention that uses less memory on supported hardware. Needed for a "
            "quantized KV cache. With it, guessing ahead (prompt lookup, a draft model) gives "
            "exactly the reply plain decoding gives; on a CPU it can be slower.",
            flag="--flash-attn", help="flash attention"),
    _switch("use_mmap", "Memory-map the model file",
            "Load the file lazily through the page cache: faster start, shares memory.",
            flag="--mmap", help="memory-map the model file"),
    _switch("use_mlock", "Lock the model in memory",
            "Keep the model in RAM so the system never swaps it out. Needs enough free memory.",
            flag="--mlock", help="lock the model in memory"),
    _switch("allow_beyond_trained", "Allow a longer context than the model was trained on",
            "Without this, a context length above the model's trained length is refused: "
            "beyond it, replies are often incoherent.",
            flag="--allow-beyond-trained",
            help="allow a context longer than the model was trained on"),
    _number("n_threads_batch", "Prompt threads", 0, MAX_THREADS,
            "Threads for reading the prompt, which uses every core well. All cores is usually "
            "best.", flag="--prompt-threads", help="CPU threads for reading the prompt",
            automatic="All cores", auto_help="all logical cores", group="speed"),
    _switch("prompt_lookup", "Guess ahead from the conversation (prompt lookup)",
            "Proposes the continuation of text the reply repeats (code being edited, quotes) "
            "and checks several tokens in one step: the same reply, faster. (Token for token "
            "with flash attention on; without it, on a CPU, rounding can rarely pick another "
            "near-tie word.)", flag="--prompt-lookup",
            help="guess ahead from the conversation (the same reply, faster)",
            per_model=True, group="speed"),
    LoadSpec("draft_model_path", "Draft model", 0, 0, 0, 0,
             "A small model with the same vocabulary that guesses ahead for this one "
             "(speculative decoding). Same replies; faster only when the draft is much "
             "cheaper than the model.", flag="--draft-model", kind="path",
             help="a small .gguf with the same vocabulary that guesses ahead",
             per_model=True, group="speed"),
    LoadSpec("mmproj_path", "Vision projector", 0, 0, 0, 0,
             "The mmproj .gguf that lets this model read images (a vision model's second "
             "file). Its embedding size must be the model's.", flag="--mmproj", kind="path",
             help="an mmproj .gguf that lets the model read images", per_model=True,
             group="model"),
    LoadSpec("template_name", "Chat template", 0, 0, 0, 0,
             "The chat template this model's conversations are written in. Automatic: the "
             "file's own, else a built-in one chosen from its vocabulary (Gemma, Llama 3, "
             "ChatML…).", flag="--template", kind="choice", choices=TEMPLATE_NAMES,
             help="chat template: auto (the file's own, else one chosen from its "
             "vocabulary), file, or a built-in one", per_model=True, group="model"),
)}


# Per-model entries written before LoadOptions named every field, with these values meaning
# "the side panel's" (see ModelDefaults.parse).
_LEGACY_DEFER: dict[str, tuple[object, ...]] = {
    "n_ctx": (0,), "n_gpu_layers": (None,), "prompt_lookup": (None,), "draft_model_path": ("",),
    "mmproj_path": ("",), "template_name": ("", AUTOMATIC)}
PER_MODEL = tuple(name for name, spec in LOAD_SPECS.items() if spec.per_model)


@dataclass(frozen=True)
class ModelDefaults:
    """What one model loads with, over the options for every model: the load options it sets
    (`load`: by LoadOptions name, the per_model ones, each checked by its LoadSpec as the
    global one is; an option not named is the side panel's), a preset applied when it loads,
    and a chat template of the user's own (Jinja) over the file's."""

    load: dict[str, object] = field(default_factory=dict)
    preset: str = ""
    chat_template: str = ""

    def own(self, name: str, default: object = None) -> object:
        """This model's own value of a load option; `default` when it uses the panel's."""
        return self.load.get(name, default)

    def apply(self, options: LoadOptions) -> LoadOptions:
        return options.replace(**self.load)

    def to_dict(self) -> dict[str, object]:
        return {"load": dict(self.load), "preset": self.preset,
                "chat_template": self.chat_template}

    @classmethod
    def from_dict(cls, data: object) -> ModelDefaults:
        return cls.parse(data)[0]

    @classmethod
    def parse(cls, data: object, where: str = "") -> tuple[ModelDefaults, list[str]]:
        """From settings.json, lenient: a value that cannot be used is left out (the panel's
        then) with a sentence. Entries of older versions (every option flat in the entry, an
        empty value meaning the panel's) read as they did."""
        if not isinstance(data, dict):
            return cls(), [f"{where}: {show(data)} is not a set of values (left out)"]
        problems: list[str] = []
        preset, problem = check_text(f"{where}.preset", data.get("preset", ""), "", 256)
        problems += [problem] if problem else []
        template, problem = check_text(f"{where}.chat_template", data.get("chat_template", ""),
                                       "")
        problems += [problem] if problem else []
        stored = data.get("load")
        if not isinstance(stored, dict):  # an older version's entry
            stored = {name: data[name] for name in PER_MODEL
                      if name in data and data[name] not in _LEGACY_DEFER.get(name, ())}
        load: dict[str, object] = {}
        for name in PER_MODEL:
            if name in stored and stored[name] is not None:
                value, problem = LOAD_SPECS[name].check(f"{where}.{name}", stored[name], None)
                if problem:  # out of range: clamped; else left out
                    problems.append(problem.replace(" (reset to None)", " (left out)"))
                if value is not None:
                    load[name] = value
        return cls(load, str(preset), str(template)), problems

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
    # Where the chat template came from (core/builtin_templates.Choice.kind): "gguf",
    # "override", "chosen", "detected"; "chatml" in records of older versions.
    template_source: str
    load_seconds: float = 0.0
    quantization: str = ""
    # What the engine may hold for the KV-cache states of conversations it keeps, in bytes.
    kv_state_ram_budget: int = 0
    kv_state_disk_budget: int = 0
    n_threads_batch: int = 0
    n_batch: int = 0  # tokens of a prompt evaluated at once (0: not known)
    speculation: str = ""  # Speculation: what the engine guesses tokens with ("" none)
    draft_model: str = ""  # the draft model's name, with "draft model"
    # What the chat template does with reasoning (and its switches), and how it writes tool
    # calls (tools.formats.ToolFormat; "": it has no tool support we can read).
    traits: TemplateTraits = field(default_factory=TemplateTraits)
    tool_format: str = ""
    n_slots: int = 1  # replies decoded at once (a KV cache each, or sharing the pool)
    kv_bytes: int = 0  # the KV caches' estimate, all slots or the pool
    kv_pool: int = 0  # tokens in the shared KV pool (0: none, a KV cache per slot)
    memory_bytes: int = 0  # the fit planner's estimate of all this model holds (0: unknown)
    vision: bool = False  # loaded with a projector: messages may show it images
    # Positions one 512 × 512 image takes, as the projector preprocessed it at load (0: not
    # known): the cost shown until an image's own size is counted (protocol.CountImages), as
    # projectors that tile or keep the aspect take more for larger images.
    image_tokens: int = 0
    projector: str = ""  # the projector's file, when `vision` (whose counts are whose)
    template_name: str = ""  # the built-in template's label, for chosen and detected
    template_reason: str = ""  # why it was detected ("chosen from its <start_of_turn> ...")
    # How it keeps its memory: what trimming, shifts and speculation it allows (core/families).
    family: MemoryFamily = field(default_factory=MemoryFamily)


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
