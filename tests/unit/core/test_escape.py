"""core/escape.printable: outside text on one line, nothing in it a terminal acts on."""

from __future__ import annotations

import unicodedata

import pytest

from inglenook.core.escape import printable


@pytest.mark.parametrize(("text", "shown"), [
    ("plain words, émigré, 日本語, 🦉", "plain words, émigré, 日本語, 🦉"),
    ("two\nlines\r\n", "two\\nlines\\r\\n"),
    ("bell\x07 esc\x1b[31m del\x7f c1\x9b", "bell\\x07 esc\\x1b[31m del\\x7f c1\\x9b"),
    ("right-to-left \u202eexe.txt", "right-to-left \\u202eexe.txt"),
    ("zero\u200bwidth, line\u2028sep", "zero\\u200bwidth, line\\u2028sep"),
    ("a\\nb", "a\\\\nb"),  # a backslash doubled: an escape cannot be faked
    ("tab\there", "tab\\there"),
    ("no\u00a0break", "no\u00a0break"),  # a space is shown as one
])
def test_printable(text: str, shown: str) -> None:
    assert printable(text) == shown
    assert not any(unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp", "Cs")
                   for c in printable(text))


def test_a_lone_surrogate_from_a_file_name_is_spelled_out() -> None:
    name = b"caf\xe9.txt".decode("utf-8", "surrogateescape")
    assert printable(name) == "caf\\udce9.txt"
