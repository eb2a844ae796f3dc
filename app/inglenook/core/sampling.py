"""Sampling settings: values, their allowed ranges and what each one does (for the side panel)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from inglenook.core.values import Number, check_number, check_text_list, parse_fields, show

# llama.cpp checks every stop string after every token: keep hostile lists from slowing replies.
MAX_STOP_STRINGS = 32
MAX_STOP_LENGTH = 1000


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 0.7
    top_k: int = 40
    top_p: float = 0.95
    min_p: float = 0.05
    typical_p: float = 1.0
    repeat_penalty: float = 1.1
    repeat_last_n: int = 64
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    mirostat_mode: int = 0  # 0 off, 1 Mirostat, 2 Mirostat 2.0
    mirostat_tau: float = 5.0
    mirostat_eta: float = 0.1
    seed: int = -1  # -1: a new random seed for every reply
    max_tokens: int = -1  # -1: until the model stops or the context is full
    stop: tuple[str, ...] = ()

    def replace(self, **changes: object) -> SamplingParams:
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    @classmethod
    def from_dict(cls, data: dict) -> SamplingParams:
        """Build from stored values: unknown keys ignored, anything unusable left at its
        default, numbers clamped to the allowed ranges. Never raises."""
        return cls.parse(data)[0]

    @classmethod
    def parse(cls, data: object, where: str = "sampling") -> tuple[SamplingParams, list[str]]:
        """Like from_dict, with a sentence for every value that was not used as stored."""
        if not isinstance(data, dict):
            return cls(), [] if data is None else [f"{where}: {show(data)} is not a set of "
                                                    "values (reset to the defaults)"]

        def check(name: str, raw: object, default: Any) -> tuple[object, str | None]:
            label = f"{where}.{name}"
            if name == "stop":
                return check_text_list(label, raw, MAX_STOP_STRINGS, MAX_STOP_LENGTH)
            spec = SPECS[name]
            return check_number(label, raw, Number(type(default), spec.minimum, spec.maximum),
                                default)

        return parse_fields(cls, (f.name for f in dataclasses.fields(cls)), data, check)

    def to_dict(self) -> dict:
        data = dataclasses.asdict(self)
        data["stop"] = list(self.stop)
        return data


@dataclass(frozen=True)
class ParamSpec:
    """One numeric setting: its range, how the side panel shows it and its command-line flag."""

    name: str
    label: str
    minimum: float
    maximum: float
    step: float
    decimals: int
    tooltip: str
    special_value_text: str = ""  # shown instead of the minimum, e.g. "Random"
    flag: str = ""  # the command-line option; "": --name-with-dashes

    def __post_init__(self) -> None:
        if not self.flag:
            object.__setattr__(self, "flag", "--" + self.name.replace("_", "-"))


SPECS: dict[str, ParamSpec] = {
    s.name: s
    for s in (
        ParamSpec("temperature", "Temperature", 0.0, 2.0, 0.05, 2,
                  "Randomness. 0 always picks the most likely token (greedy); higher values give "
                  "more varied, less predictable text."),
        ParamSpec("top_k", "Top-k", 0, 200, 1, 0,
                  "Sample only from the k most likely tokens. 0 turns it off."),
        ParamSpec("top_p", "Top-p", 0.0, 1.0, 0.01, 2,
                  "Nucleus sampling: keep the smallest set of tokens whose probabilities add up "
                  "to p. 1.0 turns it off."),
        ParamSpec("min_p", "Min-p", 0.0, 1.0, 0.01, 2,
                  "Drop tokens less likely than min-p times the most likely token. "
                  "0 turns it off."),
        ParamSpec("typical_p", "Typical-p", 0.0, 1.0, 0.01, 2,
                  "Locally typical sampling: prefer tokens whose surprise is close to the "
                  "average. 1.0 turns it off."),
        ParamSpec("repeat_penalty", "Repeat penalty", 0.0, 2.0, 0.01, 2,
                  "Make tokens that already appeared in the recent window less likely. "
                  "1.0 turns it off."),
        ParamSpec("repeat_last_n", "Penalty window", 0, 4096, 16, 0,
                  "How many recent tokens the repeat, presence and frequency penalties look at."),
        ParamSpec("presence_penalty", "Presence penalty", -2.0, 2.0, 0.05, 2,
                  "Penalise any token that already appeared, once. Encourages new topics."),
        ParamSpec("frequency_penalty", "Frequency penalty", -2.0, 2.0, 0.05, 2,
                  "Penalise tokens in proportion to how often they appeared. Reduces repetition."),
        ParamSpec("mirostat_tau", "Mirostat τ", 0.0, 10.0, 0.1, 1,
                  "Mirostat target surprise: lower is more focused, higher more varied."),
        ParamSpec("mirostat_eta", "Mirostat η", 0.0, 1.0, 0.01, 2,
                  "Mirostat learning rate: how fast it corrects towards the target."),
        ParamSpec("seed", "Seed", -1, 2**31 - 1, 1, 0,
                  "Fix the seed to make replies reproducible with the same settings.",
                  special_value_text="Random"),
        ParamSpec("max_tokens", "Max tokens", -1, 32768, 16, 0,
                  "Longest reply in tokens. Unlimited stops when the model ends or the context "
                  "is full.", special_value_text="Unlimited"),
        ParamSpec("mirostat_mode", "Mirostat", 0, 2, 1, 0,
                  "Mirostat replaces top-k/top-p/min-p with a controller that keeps surprise "
                  "near τ. Off, v1 or v2."),
    )
}
