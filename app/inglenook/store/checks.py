"""Checks for every value an import file brings in. A file is anyone's writing: a role becomes
part of the prompt, text goes into SQLite and the chat view, numbers into sampling. Values that
would change meaning (a role, a type) refuse the file; harmless metadata (a timestamp, a
sampling number) is repaired and counted, so that a small defect does not cost the user a chat.
"""

from __future__ import annotations

import dataclasses
import math
import re
import threading
from typing import Any, TypeGuard

from inglenook.core.sampling import SamplingParams
from inglenook.core.units import count

ROLES = ("system", "user", "assistant", "tool")
MAX_TIMESTAMP = 32_503_680_000.0  # 3000-01-01: beyond it, a date is a mistake or an attack
SHOWN_IMAGES = 3  # images left out that the summary names (the rest are counted)
MAX_NESTING = 32  # provenance nests 3 deep; the rest is room for what a newer version adds
_SURROGATE = re.compile("[\ud800-\udfff]")
_NUMERIC = {f.name for f in dataclasses.fields(SamplingParams)} - {"stop"}


class InvalidImport(ValueError):
    """The file cannot be imported; the message (one line) says where and why."""


class ImportCancelled(Exception):
    """The user cancelled the import while it was read: nothing is written."""


def shown(value: object, limit: int = 60) -> str:
    """A value in a message: one line (repr escapes newlines and control characters), short."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def one_line(title: str, limit: int = 40) -> str:
    """A title in a message: whitespace folded, short."""
    title = " ".join(title.split())
    return title if len(title) <= limit else title[:limit - 1] + "…"


def clean(text: str) -> str:
    """The text as SQLite can store it: JSON's \\ud800 escapes give lone surrogates (pairs are
    decoded into one character), which UTF-8 cannot encode; each becomes U+FFFD."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)
    return text


def string(value: object, what: str, default: str | None = None) -> str:
    """Text where text belongs; None (or missing) gives `default` when there is one."""
    if value is None and default is not None:
        return default
    if not isinstance(value, str):
        raise InvalidImport(f"{what} must be text, not {shown(value)}.")
    return clean(value)


def optional_string(value: object, what: str) -> str | None:
    return None if value is None else string(value, what)


def flag(value: object, what: str) -> bool:
    if value is None:
        return False
    if not isinstance(value, bool):
        raise InvalidImport(f"{what} must be true or false, not {shown(value)}.")
    return value


def role(value: object, what: str) -> str:
    if value not in ROLES:
        raise InvalidImport(f"{what} has the role {shown(value)}; a role must be one of "
                            f"{', '.join(ROLES)}.")
    return str(value)


def is_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class Repairs:
    """How many values were replaced by sane ones, for the import's summary."""

    def __init__(self, cancelled: threading.Event | None = None) -> None:
        self.cancelled = cancelled  # Cancel, checked before each costly step (an image)
        self.timestamps = 0
        self.numbers = 0
        self.images: list[str] = []  # images left out: "“name” (where: why)"

    def check_cancelled(self) -> None:
        if self.cancelled is not None and self.cancelled.is_set():
            raise ImportCancelled

    def timestamp(self, value: object, default: float) -> float:
        """Seconds since 1970 between 1970 and 3000; missing (None) gives `default` quietly,
        anything else out of range (NaN, ±Infinity, 1e999, text) gives it and is counted."""
        if value is None:
            return default
        if is_number(value) and 0 <= value <= MAX_TIMESTAMP:
            return float(value)
        self.timestamps += 1
        return default

    def sampling(self, value: object, what: str) -> SamplingParams:
        """Sampling values: NaN and infinities are dropped (the default is used) before
        SamplingParams clamps the rest to their ranges."""
        if not isinstance(value, dict):
            raise InvalidImport(f"{what} must be an object of sampling values, not "
                                f"{shown(value)}.")
        kept: dict[str, Any] = {}
        for key, raw in value.items():
            if key in _NUMERIC:
                if is_number(raw) and math.isfinite(raw):
                    kept[key] = raw
                else:
                    self.numbers += 1
            elif key == "stop":
                if isinstance(raw, list) and all(isinstance(s, str) for s in raw):
                    kept[key] = [clean(s) for s in raw]
                else:
                    self.numbers += 1
        return SamplingParams.from_dict(kept)

    def settings(self, value: object, what: str) -> dict | None:
        """A chat's own settings: {"system_prompt": text, "sampling": {...}}; other keys are
        kept when they are plain text, true/false or finite numbers (a newer version's)."""
        if value is None:
            return None
        if not isinstance(value, dict) or not isinstance(value.get("system_prompt"), str) \
                or not isinstance(value.get("sampling"), dict):
            raise InvalidImport(f"{what} must be an object with a text system_prompt and a "
                                "sampling object.")
        result: dict[str, Any] = {}
        for key, raw in value.items():
            if isinstance(raw, str):
                result[key] = clean(raw)
            elif isinstance(raw, bool) or (is_number(raw) and math.isfinite(raw)):
                result[key] = raw
        result["sampling"] = self.sampling(value["sampling"], f"{what}: sampling").to_dict()
        return result

    def provenance(self, value: object, what: str) -> dict:
        """How a reply was made: any JSON object up to MAX_NESTING deep, text cleaned, NaN and
        infinities made null. Copied without recursion, so no depth can overflow the stack."""
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise InvalidImport(f"{what}: provenance must be an object, not {shown(value)}.")
        root: dict = {}
        stack: list[tuple[object, dict | list, int]] = [(value, root, 1)]
        while stack:
            source, target, depth = stack.pop()
            if depth > MAX_NESTING:
                raise InvalidImport(f"{what}: provenance nests deeper than {MAX_NESTING} levels.")
            items = (source.items() if isinstance(source, dict)
                     else enumerate(source))  # type: ignore[arg-type]
            for key, raw in items:
                if isinstance(raw, (dict, list)):
                    copy: dict | list = {} if isinstance(raw, dict) else []
                    stack.append((raw, copy, depth + 1))
                    item: object = copy
                elif isinstance(raw, str):
                    item = clean(raw)
                elif isinstance(raw, float) and not math.isfinite(raw):
                    self.numbers += 1
                    item = None
                else:
                    item = raw
                if isinstance(target, dict):
                    target[clean(key)] = item
                else:
                    target.append(item)
        return root

    def sentences(self) -> list[str]:
        found = []
        if self.timestamps:
            found.append(f"replaced {count(self.timestamps, 'date')} that "
                         f"{'was' if self.timestamps == 1 else 'were'} not valid")
        if self.numbers:
            found.append(f"left out {count(self.numbers, 'unusable number')} (NaN, infinite "
                         "or of the wrong kind)")
        if self.images:
            named = ", ".join(self.images[:SHOWN_IMAGES])
            more = len(self.images) - SHOWN_IMAGES
            found.append(f"left out {count(len(self.images), 'image')} that could not be read: "
                         f"{named}" + (f" and {more:,} more" if more > 0 else ""))
        return found


