"""Checking one stored value against what its field accepts, with a problem to report.

Used for settings.json and for values imported from files (presets, exported chats): every
check returns the value to use and, when the stored one was not acceptable, a sentence saying
what was wrong and what is used instead. Nothing here raises on hostile input.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")

MAX_TEXT = 256 * 1024  # characters; a long system prompt or chat template fits many times


@dataclass(frozen=True)
class Number:
    """A finite int or float in [minimum, maximum]; out-of-range values are clamped."""

    kind: type[int] | type[float]
    minimum: float
    maximum: float


def show(raw: object) -> str:
    """A short rendering of a stored value for a problem message."""
    if isinstance(raw, float) and not math.isfinite(raw):
        return "NaN" if math.isnan(raw) else "an infinite or far too large number"
    if isinstance(raw, int) and raw.bit_length() > 64:  # str() of 5,000 digits raises
        return "a far too large number"
    # Containers are described, not printed: repr() of a hostile one is huge (or raises).
    if isinstance(raw, (list, tuple)):
        return f"a list of {len(raw)} item{'' if len(raw) == 1 else 's'}"
    if isinstance(raw, dict):
        return f"an object with {len(raw)} key{'' if len(raw) == 1 else 's'}"
    text = repr(raw[:40] if isinstance(raw, str) else raw)
    return text if len(text) <= 40 else text[:37] + "…"


def _fmt(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def check_number(name: str, raw: object, rule: Number, default: T) -> tuple[T, str | None]:
    # bool is an int subclass, but true is not a temperature.
    if isinstance(raw, bool) or not isinstance(raw, (int, float)):
        return default, f"{name}: {show(raw)} is not a number (reset to {default!r})"
    if isinstance(raw, float) and not math.isfinite(raw):
        return default, f"{name}: {show(raw)} cannot be used (reset to {default!r})"
    if rule.kind is int and isinstance(raw, float) and not raw.is_integer():
        return default, f"{name}: {show(raw)} is not a whole number (reset to {default!r})"
    try:  # whole floats come from hand-edited files and spin boxes
        value = rule.kind(int(raw) if rule.kind is int else raw)
    except OverflowError:  # an int beyond any float
        return default, f"{name}: {show(raw)} cannot be used (reset to {default!r})"
    if value < rule.minimum or value > rule.maximum:
        clamped = rule.kind(min(max(value, rule.minimum), rule.maximum))
        return clamped, (f"{name}: {show(raw)} is outside {_fmt(rule.minimum)}…"  # type: ignore[return-value]
                         f"{_fmt(rule.maximum)} (set to {_fmt(clamped)})")
    return value, None  # type: ignore[return-value]


def is_text(raw: object, max_length: int = MAX_TEXT) -> bool:
    """A str that can be written back as UTF-8 (no lone surrogates from \\ud800 escapes)."""
    if not isinstance(raw, str) or len(raw) > max_length:
        return False
    try:
        raw.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_text(name: str, raw: object, default: str, max_length: int = MAX_TEXT,
               choices: tuple[str, ...] = ()) -> tuple[str, str | None]:
    if not isinstance(raw, str):
        return default, f"{name}: {show(raw)} is not text (reset to {default!r})"
    if len(raw) > max_length:
        return default, (f"{name}: {len(raw):,} characters is longer than {max_length:,} "
                         f"(reset to {default!r})")
    if not is_text(raw, max_length):
        return default, f"{name}: the text holds invalid characters (reset to {default!r})"
    if choices and raw not in choices:
        return default, (f"{name}: {show(raw)} is not one of {', '.join(choices)} "
                         f"(reset to {default!r})")
    return raw, None


def check_bool(name: str, raw: object, default: bool) -> tuple[bool, str | None]:
    if isinstance(raw, bool):
        return raw, None
    return default, f"{name}: {show(raw)} is not true or false (reset to {default!r})"


def check_text_list(name: str, raw: object, max_items: int, max_length: int
                    ) -> tuple[tuple[str, ...], str | None]:
    """A list of non-empty strings. A lone string is refused rather than read as a list of
    its characters; entries that are not acceptable text are dropped."""
    if not isinstance(raw, (list, tuple)):
        return (), f"{name}: {show(raw)} is not a list of text (reset to none)"
    # Empty strings mean nothing and are dropped quietly; other unusable entries are reported.
    bad = sum(1 for item in raw if item != "" and not is_text(item, max_length))
    kept = tuple(item for item in raw if item != "" and is_text(item, max_length))
    problem = None
    if bad:
        problem = f"{name}: {bad} of {len(raw)} entries are not usable text (left out)"
    if len(kept) > max_items:
        kept = kept[:max_items]
        problem = f"{name}: more than {max_items} entries (only the first {max_items} kept)"
    return kept, problem


D = TypeVar("D")
FieldCheck = Callable[[str, object, Any], "tuple[object, str | list[str] | None]"]


def parse_fields(cls: Callable[..., D], fields: Iterable[str], data: dict,
                 check: FieldCheck) -> tuple[D, list[str]]:
    """The lenient reading of a stored dataclass: each of `fields` present in `data` is
    `check(name, raw, default)`ed, which gives the value to keep and its problem(s); absent
    fields keep their defaults and unknown keys (from a newer version, say) are ignored."""
    defaults = cls()
    values: dict[str, object] = {}
    problems: list[str] = []
    for name in fields:
        if name not in data:
            continue
        values[name], found = check(name, data[name], getattr(defaults, name))
        if isinstance(found, str):
            problems.append(found)
        elif found:
            problems += found
    return cls(**values), problems
