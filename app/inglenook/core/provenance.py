"""What it takes to reproduce a reply: saved with it, exported with it, shown by Details.

Stored as JSON with these keys (unchanged since the first release, so old rows read back):
  model     {name, file, path, sha256, quantization, size_bytes, architecture, n_ctx,
             kv_cache_type, flash_attn, template}   (very old rows: just the name, a string)
  sampling  SamplingParams.to_dict()      system_prompt  str
  stats     Stats as a dict               seed           int
  finish    stop | length | cancelled | error   error  str (why it failed or was stopped)
  reasoning_started_at, reasoning_ended_at   float, seconds since 1970: when the model began
            and stopped thinking ("Thought for N s"); only for replies that reasoned
  history_reasoning  "sent" | "left out": how earlier replies' reasoning went into the prompt
            (as `reasoning_content` where the template reads it); only when there was some
  enable_thinking  bool, reasoning_effort  str: the thinking switch and effort asked of the
            template; only when set
  reply_format  str: GenerationRequest.reply_format ("json" or a JSON schema); only when set
Keys this version does not know are kept in `extra` and written back unchanged.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_args

from inglenook.core.builtin_templates import short
from inglenook.core.load import ModelInfo
from inglenook.core.messages import JSON_OBJECT, GenerationRequest
from inglenook.core.replies import Finish, FinishReason, Stats
from inglenook.core.sampling import SamplingParams

FINISH_REASONS: tuple[str, ...] = get_args(FinishReason)
_KNOWN = ("model", "sampling", "system_prompt", "stats", "seed", "finish", "error",
          "reasoning_started_at", "reasoning_ended_at", "history_reasoning", "enable_thinking",
          "reasoning_effort", "reply_format")
HISTORY_REASONING = {
    "sent": "sent back to the model (its chat template reads reasoning_content)",
    "left out": "left out of the prompt (its chat template does not read it back)",
}


@dataclass(frozen=True)
class ModelRecord:
    """The model file a reply came from, and how it was loaded."""

    name: str
    file: str = ""
    path: str = ""
    sha256: str = ""
    quantization: str = ""
    size_bytes: int = 0
    architecture: str = ""
    n_ctx: int = 0
    kv_cache_type: str = ""
    flash_attn: bool = False
    template: str = ""  # ModelInfo.template_source: gguf | override | chosen | detected | chatml
    template_name: str = ""  # the built-in template's label, for chosen and detected
    n_threads: int = 0  # 0: not recorded (replies made before these were)
    n_threads_batch: int = 0
    n_batch: int = 0

    @classmethod
    def from_info(cls, info: ModelInfo, sha256: str = "") -> ModelRecord:
        return cls(name=info.name, file=Path(info.path).name, path=info.path, sha256=sha256,
                   quantization=info.quantization, size_bytes=info.size_bytes,
                   architecture=info.architecture, n_ctx=info.n_ctx,
                   kv_cache_type=info.kv_cache_type, flash_attn=info.flash_attn,
                   template=info.template_source, template_name=info.template_name,
                   n_threads=info.n_threads, n_threads_batch=info.n_threads_batch,
                   n_batch=info.n_batch)

    @classmethod
    def from_value(cls, value: object) -> ModelRecord | None:
        if isinstance(value, str):
            return cls(name=value) if value else None
        if not isinstance(value, dict):
            return None
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            raw = value.get(f.name)
            default = getattr(cls, f.name, "") if f.name != "name" else ""
            values[f.name] = _typed(raw, type(default))
        return cls(**values) if values["name"] or values["file"] else None


@dataclass(frozen=True)
class Provenance:
    model: ModelRecord | None = None
    sampling: SamplingParams | None = None
    system_prompt: str = ""
    stats: Stats | None = None
    seed: int | None = None
    finish: FinishReason | None = None
    error: str = ""
    reasoning_started_at: float | None = None
    reasoning_ended_at: float | None = None
    history_reasoning: str = ""  # a key of HISTORY_REASONING, or "": there was none
    enable_thinking: bool | None = None
    reasoning_effort: str = ""
    reply_format: str = ""
    extra: dict = field(default_factory=dict)

    @classmethod
    def of_reply(cls, model: ModelInfo | None, request: GenerationRequest | None,
                 stats: Stats | None, finish: Finish | None, sha256: str = "") -> Provenance:
        return cls(
            model=ModelRecord.from_info(model, sha256) if model is not None else None,
            sampling=request.sampling if request is not None else None,
            system_prompt=next((m.content for m in request.messages if m.role == "system"), "")
            if request is not None else "",
            stats=stats, seed=stats.seed if stats is not None else None,
            finish=finish.reason if finish is not None else None,
            error=finish.message if finish is not None else "",
            enable_thinking=request.enable_thinking if request is not None else None,
            reasoning_effort=request.reasoning_effort if request is not None else "",
            reply_format=request.reply_format if request is not None else "")

    @property
    def model_name(self) -> str:
        return self.model.name if self.model else ""

    @property
    def thinking_s(self) -> float | None:
        """How long the model reasoned, when both ends are known (never negative)."""
        if self.reasoning_started_at is None or self.reasoning_ended_at is None:
            return None
        return max(0.0, self.reasoning_ended_at - self.reasoning_started_at)

    def replace(self, **changes: Any) -> Provenance:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        data: dict[str, Any] = dict(self.extra)
        if self.model is not None:
            data["model"] = dataclasses.asdict(self.model)
        if self.sampling is not None:
            data["sampling"] = self.sampling.to_dict()
            data["system_prompt"] = self.system_prompt
        elif self.system_prompt:
            data["system_prompt"] = self.system_prompt
        if self.stats is not None:
            data["stats"] = dataclasses.asdict(self.stats)
        if self.seed is not None:
            data["seed"] = self.seed
        if self.finish is not None:
            data["finish"] = self.finish
        if self.error:
            data["error"] = self.error
        if self.reasoning_started_at is not None:
            data["reasoning_started_at"] = self.reasoning_started_at
        if self.reasoning_ended_at is not None:
            data["reasoning_ended_at"] = self.reasoning_ended_at
        if self.history_reasoning:
            data["history_reasoning"] = self.history_reasoning
        if self.enable_thinking is not None:
            data["enable_thinking"] = self.enable_thinking
        if self.reasoning_effort:
            data["reasoning_effort"] = self.reasoning_effort
        if self.reply_format:
            data["reply_format"] = self.reply_format
        return data

    @classmethod
    def from_dict(cls, data: object) -> Provenance:
        """Lenient: a malformed part is left out (and kept in `extra` when it is not ours)."""
        if not isinstance(data, dict):
            return cls()
        sampling = data.get("sampling")
        finish = data.get("finish")
        seed = data.get("seed")
        history, thinking = data.get("history_reasoning"), data.get("enable_thinking")
        return cls(
            model=ModelRecord.from_value(data.get("model")),
            sampling=SamplingParams.from_dict(sampling) if isinstance(sampling, dict) else None,
            system_prompt=_typed(data.get("system_prompt"), str),
            stats=_stats(data.get("stats")),
            seed=seed if type(seed) is int else None,
            finish=finish if finish in FINISH_REASONS else None,
            error=_typed(data.get("error"), str),
            reasoning_started_at=_moment(data.get("reasoning_started_at")),
            reasoning_ended_at=_moment(data.get("reasoning_ended_at")),
            history_reasoning=history if history in HISTORY_REASONING else "",
            enable_thinking=thinking if isinstance(thinking, bool) else None,
            reasoning_effort=_typed(data.get("reasoning_effort"), str),
            reply_format=_typed(data.get("reply_format"), str),
            extra={k: v for k, v in data.items() if k not in _KNOWN})

    def describe(self, status: str = "") -> list[tuple[str, str]]:
        """Readable rows for the Details view: (label, value)."""
        rows: list[tuple[str, str]] = []
        outcome = {"stop": "Complete", "length": "Reached the length limit",
                   "cancelled": "Stopped", "error": "Failed"}.get(self.finish or "", "")
        if status == "interrupted":
            outcome = "Interrupted: the app closed while it was written"
        if outcome:
            rows.append(("Outcome", outcome + (f": {self.error}" if self.error else "")))
        if self.extra.get("edited") is True:  # chat/reply_edits.py
            rows.append(("Edited", "by you: the text is not the model's as written"))
        m = self.model
        if m is not None:
            rows.append(("Model", m.name))
            if m.file:
                rows.append(("File", m.path or m.file))
            if m.quantization or m.architecture:
                rows.append(("Architecture", " · ".join(x for x in (m.architecture,
                                                                      m.quantization) if x)))
            if m.sha256:
                rows.append(("SHA-256", m.sha256))
            if m.n_ctx:
                load = f"context {m.n_ctx:,}, KV cache {m.kv_cache_type or 'f16'}"
                rows.append(("Loaded with", load + (", flash attention" if m.flash_attn else "")))
            if m.n_threads:
                prompt = m.n_threads_batch or m.n_threads
                rows.append(("Threads", f"{m.n_threads} for the reply, {prompt} for the prompt"
                             + (f" (batch {m.n_batch})" if m.n_batch else "")))
            if m.template:
                rows.append(("Chat template", short(m.template, m.template_name)))
        thinking = self.thinking_s
        if thinking is not None:
            rows.append(("Reasoning", f"thought for {format_seconds(thinking)}"))
        if self.enable_thinking is not None:
            rows.append(("Thinking", "on" if self.enable_thinking else "off"))
        if self.reasoning_effort:
            rows.append(("Reasoning effort", self.reasoning_effort))
        if self.reply_format:
            shown = self.reply_format if len(self.reply_format) <= 300 else (
                self.reply_format[:299] + "…")  # Copy as JSON has the whole schema
            rows.append(("Reply format", "JSON" if self.reply_format == JSON_OBJECT
                         else f"JSON matching the schema {shown}"))
        if self.history_reasoning:
            rows.append(("Earlier reasoning", HISTORY_REASONING[self.history_reasoning]))
        if self.seed is not None:
            rows.append(("Seed", str(self.seed)))
        if self.sampling is not None:
            s, d = self.sampling, SamplingParams()
            changed = [f"{k} {v}" for k, v in s.to_dict().items()
                       if k not in ("seed",) and v != d.to_dict()[k]]
            rows.append(("Sampling", f"temperature {s.temperature:g}, top-k {s.top_k}, "
                                     f"top-p {s.top_p:g}, min-p {s.min_p:g}"))
            if changed:
                rows.append(("Changed from defaults", ", ".join(changed)))
        if self.system_prompt:
            rows.append(("System prompt", self.system_prompt))
        st = self.stats
        if st is not None:
            rows.append(("Tokens", f"{st.prompt_tokens:,} in the prompt ({st.cached_tokens:,} "
                                   f"reused from the cache), {st.generated_tokens:,} generated"))
            rows.append(("Speed", f"first token after {st.ttft_s * 1000:,.0f} ms, "
                                  f"{st.decode_tok_s:.1f} tok/s, prompt "
                                  f"{st.prompt_tok_s:,.0f} tok/s"))
            if st.drafted_tokens:
                rows.append(("Speculation", f"{st.accepted_tokens:,} of {st.drafted_tokens:,} "
                                            f"guessed tokens accepted "
                                            f"({st.acceptance_rate:.0%})"))
            rows.append(("Context", f"{st.context_used:,} of {st.n_ctx:,} tokens used"
                         + (f"; {st.dropped_messages} oldest messages left out"
                            if st.dropped_messages else "")))
        return rows


def _typed(value: object, kind: type) -> Any:
    if kind is bool:
        return value if isinstance(value, bool) else False
    if kind is int:
        return value if type(value) is int else 0
    if kind is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        return float(value) if ok and math.isfinite(value) else 0.0  # type: ignore[arg-type]
    return value if isinstance(value, str) else ""


def format_seconds(seconds: float) -> str:
    """A reasoning time as people say it: "0.4 s", "12 s", "2 min 5 s"."""
    if seconds < 9.95:  # below what rounds to "10.0"
        return f"{seconds:.1f} s"
    if seconds < 59.5:
        return f"{seconds:.0f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes:,} min {rest} s" if rest else f"{minutes:,} min"


def _moment(value: object) -> float | None:
    """A finite time in seconds, or None (missing, or not a number)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def _stats(value: object) -> Stats | None:
    if not isinstance(value, dict):
        return None
    values: dict[str, Any] = {}
    for f in dataclasses.fields(Stats):
        name = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", "")
        kind = {"int": int, "str": str, "bool": bool}.get(name, float)  # text fields too
        if f.name not in value and f.default is not dataclasses.MISSING:
            continue
        values[f.name] = _typed(value.get(f.name), kind)
    return Stats(**values)
