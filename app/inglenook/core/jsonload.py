"""Reading JSON the user (or anyone) could have written, with bounds.

`json.loads` trusts its input: a file of 100,000 nested brackets raises RecursionError deep in
the decoder, a 50 MB file is read whole, and a 5,000-digit integer raises ValueError from int().
`load_json` refuses the first two with a JsonLoadError before decoding and turns out-of-range
literals into values the field checks in core/values.py reject one field at a time (NaN,
±Infinity, 1e999 and huge integers all become non-finite floats), so one bad number does not
cost the user the whole file.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

MAX_BYTES = 2 * 1024 * 1024  # settings are a few KB; this leaves room for long templates
MAX_DEPTH = 32  # our files nest 3 deep; the room is for keys a newer version may add
_MAX_INT_DIGITS = 30  # beyond any count or seed we store; int() of 5,000 digits raises

# Strings are skipped so brackets inside text do not count as nesting.
_STRING_OR_BRACKET = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)


class JsonLoadError(ValueError):
    """The text is not acceptable JSON; the message says why, for the user."""


def _parse_int(text: str) -> int | float:
    if len(text.lstrip("-")) > _MAX_INT_DIGITS:
        return -math.inf if text.startswith("-") else math.inf
    return int(text)


def _check_depth(text: str, max_depth: int) -> None:
    depth = 0
    for match in _STRING_OR_BRACKET.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > max_depth:
                raise JsonLoadError(f"it nests deeper than {max_depth} levels")
        elif token in "]}":
            depth -= 1


def loads(text: str, max_depth: int = MAX_DEPTH) -> object:
    """Decode JSON text; JsonLoadError for anything that is not acceptable JSON."""
    _check_depth(text, max_depth)
    try:
        # NaN and Infinity are kept as floats for the field checks to reject.
        return json.loads(text, parse_int=_parse_int)
    except RecursionError as exc:  # not expected after the depth check; never crash on it
        raise JsonLoadError("it nests too deeply") from exc
    except ValueError as exc:
        raise JsonLoadError(f"it is not valid JSON ({exc})") from exc


def load_json(path: Path, max_bytes: int = MAX_BYTES, max_depth: int = MAX_DEPTH) -> object:
    """Decode a JSON file of at most max_bytes. FileNotFoundError and other OSErrors pass
    through; a file that is too big, not UTF-8 or not acceptable JSON raises JsonLoadError."""
    with path.open("rb") as f:
        raw = f.read(max_bytes + 1)  # never read a huge file whole
    if len(raw) > max_bytes:
        raise JsonLoadError(f"it is larger than {max_bytes // 1024} KB")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise JsonLoadError(f"it is not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    return loads(text.removeprefix("\ufeff"), max_depth)  # a BOM from Windows editors
