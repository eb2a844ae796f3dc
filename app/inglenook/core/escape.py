"""Text from outside (an API client's fields, a file's name) made safe for one line of a log
or a terminal.

A newline in a client's `user` field would forge a log line of its own; an escape sequence
(ESC [ …) would reach the terminal that shows the log: move the cursor, retitle the window, hide
what came before. `printable` spells every such character out (\\n, \\x1b, \\u202e) and leaves
the rest as it is: letters of every script, emoji, punctuation.
"""

from __future__ import annotations

import unicodedata

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\"}
# Categories never shown as themselves: controls (C0, DEL, C1), format characters (the bidi
# overrides that reorder a line, zero-width ones), line and paragraph separators, surrogates,
# private use and unassigned code points.
_HIDDEN = {"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"}


def printable(text: str) -> str:
    """`text` on one line with nothing a terminal would act on: each control or invisible
    character written as a Python escape, and a backslash doubled (so an escape cannot be
    faked)."""
    if text.isprintable() and "\\" not in text:
        return text  # the common case, at C speed
    return "".join(_escaped(c) for c in text)


def _escaped(char: str) -> str:
    if char in _NAMED:
        return _NAMED[char]
    if unicodedata.category(char) not in _HIDDEN:
        return char
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 \
        else f"\\U{code:08x}"
