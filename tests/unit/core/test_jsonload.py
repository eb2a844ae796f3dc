"""Bounded JSON reading: depth, size, encoding and out-of-range literals."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from inglenook.core.jsonload import MAX_DEPTH, JsonLoadError, load_json, loads


def test_ordinary_json() -> None:
    assert loads('{"a": [1, 2.5, "x", null, true]}') == {"a": [1, 2.5, "x", None, True]}


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 100_000])
def test_too_deep_is_refused_before_decoding(depth: int) -> None:
    with pytest.raises(JsonLoadError, match="nests deeper"):
        loads("[" * depth + "]" * depth)
    loads("[" * MAX_DEPTH + "]" * MAX_DEPTH)


def test_brackets_in_strings_and_escaped_quotes_do_not_count() -> None:
    text = '{"a": "\\"[[[[' + "{" * 100 + '", "b": [1]}'
    assert loads(text)["b"] == [1]


def test_out_of_range_literals_become_non_finite_floats() -> None:
    data = loads('[1e999, -1e999, NaN, Infinity, 1' + "0" * 5000 + ', -1' + "0" * 40 + ']')
    assert [math.isinf(x) for x in data] == [True, True, False, True, True, True]
    assert math.isnan(data[2]) and data[1] < 0 and data[5] < 0
    assert loads("123456789012345678901234567890") == 123456789012345678901234567890


def test_files(tmp_path: Path) -> None:
    path = tmp_path / "f.json"
    path.write_bytes(b"\xef\xbb\xbf{\"a\": 1}")  # a BOM from a Windows editor
    assert load_json(path) == {"a": 1}
    path.write_bytes(b'{"a": "\xff"}')
    with pytest.raises(JsonLoadError, match="not UTF-8"):
        load_json(path)
    path.write_bytes(b" " * 2000 + b"{}")
    with pytest.raises(JsonLoadError, match="larger than 1 KB"):
        load_json(path, max_bytes=1024)
    path.write_text("{oops")
    with pytest.raises(JsonLoadError, match="not valid JSON"):
        load_json(path)
    with pytest.raises(FileNotFoundError):
        load_json(tmp_path / "missing.json")
