"""The curated model catalog: the shipped file loads and makes sense; broken files are refused
with a CatalogError that says what is wrong."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest

from inglenook import paths
from inglenook.models.catalog import CatalogEntry, CatalogError, catalog_path, load_catalog
from inglenook.models.filenames import parse_quant, split_name

KNOWN_QUANTS = {"Q3_K_M", "Q4_K_M", "Q5_K_M", "Q6_K", "Q8_0", "IQ4_XS", "Q4_0"}


@pytest.fixture(scope="module")
def shipped() -> list[CatalogEntry]:
    return load_catalog()


def test_the_shipped_catalog_loads(shipped: list[CatalogEntry]) -> None:
    assert catalog_path() == paths.resources_dir() / "catalog.json"
    assert 10 <= len(shipped) <= 16
    assert len({e.repo.lower() for e in shipped}) == len(shipped)
    assert len({e.name for e in shipped}) == len(shipped)


def test_entries_are_sane(shipped: list[CatalogEntry]) -> None:
    for e in shipped:
        owner, name = e.repo.split("/")
        assert owner and name.upper().endswith("GGUF"), e.repo
        assert e.name and e.publisher and e.licence
        assert re.fullmatch(r"\d+(\.\d+)?B", e.params), e.params
        assert 2048 <= e.context <= 1 << 20 and e.context & (e.context - 1) == 0, e.context
        assert e.description.endswith(".") and ". " not in e.description, e.description  # one
        assert len(e.description) <= 120, e.description
        assert e.tags and all(t == t.lower() for t in e.tags)


def test_recommended_files_name_their_quantization(shipped: list[CatalogEntry]) -> None:
    for e in shipped:
        assert e.default_file == e.recommended[0]
        for filename in e.recommended:
            assert filename.endswith(".gguf") and "/" not in filename, filename
            assert split_name(filename) is None, filename  # small models come in one file
            quant = parse_quant(filename)
            assert quant in KNOWN_QUANTS, filename
            assert filename.upper().endswith(f"-{quant}.GGUF"), filename
        # The file names belong to the repository: its model name is in each of them.
        stem = e.repo.split("/")[1].removesuffix("-GGUF").lower()
        assert all(f.lower().startswith(stem) for f in e.recommended), e.repo
        # Q4_K_M is offered everywhere: it is the fit planner's default.
        assert any(parse_quant(f) == "Q4_K_M" for f in e.recommended), e.repo


# -- broken files ---------------------------------------------------------------------------------
def raw_shipped() -> dict[str, Any]:
    return json.loads(catalog_path().read_text(encoding="utf-8"))


def write(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "catalog.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


def test_a_copy_of_the_shipped_file_loads_from_elsewhere(tmp_path: Path,
                                                         shipped: list[CatalogEntry]) -> None:
    assert load_catalog(write(tmp_path, raw_shipped())) == shipped


@pytest.mark.parametrize(("change", "message"), [
    (lambda m: m.pop("licence"), "missing licence"),
    (lambda m: m.update(license="MIT"), "unknown license"),
    (lambda m: m.update(repo="no-owner"), "owner/name"),
    (lambda m: m.update(repo="a/../b"), "owner/name"),
    (lambda m: m.update(params="huge"), "params"),
    (lambda m: m.update(context=0), "context"),
    (lambda m: m.update(context="8k"), "context"),
    (lambda m: m.update(name=" "), "name"),
    (lambda m: m.update(recommended=[]), "at least one"),
    (lambda m: m.update(recommended=["../evil.gguf"]), "safe"),
    (lambda m: m.update(recommended=["model.safetensors"]), "safe"),
    (lambda m: m.update(recommended=["a.gguf", "a.gguf"]), "twice"),
    (lambda m: m.update(tags="chat"), "tags"),
])
def test_a_malformed_entry_is_refused(tmp_path: Path, change: Any, message: str) -> None:
    data = raw_shipped()
    change(data["models"][2])
    with pytest.raises(CatalogError, match=message) as info:
        load_catalog(write(tmp_path, data))
    assert "model #3" in str(info.value)


def test_malformed_files_are_refused(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match="missing"):
        load_catalog(tmp_path / "nowhere.json")
    with pytest.raises(CatalogError, match="not valid JSON"):
        load_catalog(write(tmp_path, "{"))
    with pytest.raises(CatalogError, match="no list"):
        load_catalog(write(tmp_path, [1, 2]))
    with pytest.raises(CatalogError, match="format"):
        load_catalog(write(tmp_path, {**raw_shipped(), "format": 2}))
    data = raw_shipped()
    data["models"].append(copy.deepcopy(data["models"][0]))
    with pytest.raises(CatalogError, match="twice"):
        load_catalog(write(tmp_path, data))
    with pytest.raises(CatalogError, match="not an object"):
        load_catalog(write(tmp_path, {"format": 1, "models": ["x"]}))
