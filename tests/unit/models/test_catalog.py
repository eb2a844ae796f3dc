"""The curated model catalog: the shipped file loads and makes sense; broken files are refused
with a CatalogError that says what is wrong; its file names are checked against the (fake) Hub."""

from __future__ import annotations

import copy
import datetime
import json
import re
from pathlib import Path
from typing import Any

import pytest

from inglenook import paths
from inglenook.models import catalog
from inglenook.models.catalog import CatalogEntry, CatalogError, catalog_path, load_catalog
from inglenook.models.filenames import parse_quant, split_name
from tests import fakehub
from tests.fakehub import FakeFile, FakeHub

fake_hub = fakehub.fake_hub  # the fixture, under its own name

KNOWN_QUANTS = {"Q3_K_M", "Q4_K_M", "Q5_K_M", "Q6_K", "Q8_0", "IQ4_XS", "Q4_0", "MXFP4", "F16"}
# Published only in the quantization they were trained in (gpt-oss): no Q4_K_M to offer.
NATIVE_QUANTS = {"MXFP4"}


@pytest.fixture(scope="module")
def shipped() -> list[CatalogEntry]:
    return load_catalog()


def chat_models(shipped: list[CatalogEntry]) -> list[CatalogEntry]:
    return [e for e in shipped if not e.is_embedding]


def test_the_shipped_catalog_loads(shipped: list[CatalogEntry]) -> None:
    assert catalog_path() == paths.resources_dir() / "catalog.json"
    assert 10 <= len(chat_models(shipped)) <= 16
    assert 3 <= len(shipped) - len(chat_models(shipped)) <= 6
    assert len({e.repo.lower() for e in shipped}) == len(shipped)
    assert len({e.name for e in shipped}) == len(shipped)


def test_entries_are_sane(shipped: list[CatalogEntry]) -> None:
    for e in shipped:
        owner, name = e.repo.split("/")
        assert owner and name.upper().endswith("GGUF"), e.repo
        assert e.name and e.publisher and e.licence
        # Embedding models are small (M), and read passages, not chats (512 tokens is enough).
        assert re.fullmatch(r"\d+(\.\d+)?" + ("[MB]" if e.is_embedding else "B"), e.params), \
            e.params
        assert (512 if e.is_embedding else 2048) <= e.context <= 1 << 20, e.context
        assert e.context & (e.context - 1) == 0, e.context
        assert e.is_embedding == (e.tags == ("embedding",)), e.tags  # not also a chat model
        assert e.description.endswith(".") and ". " not in e.description, e.description  # one
        assert len(e.description) <= 120, e.description
        assert e.tags and all(t == t.lower() for t in e.tags)
        # When the file names were last checked, and against what.
        assert e.checked is not None
        assert datetime.date(2025, 1, 1) <= e.checked <= datetime.date.today(), e.repo
        assert e.checked_against in ("hub", "naming")


def test_recommended_files_name_their_quantization(shipped: list[CatalogEntry]) -> None:
    for e in shipped:
        assert e.default_file == e.recommended[0]
        for filename in e.recommended:
            assert filename.endswith(".gguf") and "/" not in filename, filename
            assert split_name(filename) is None, filename  # small models come in one file
            quant = parse_quant(filename)
            assert quant in KNOWN_QUANTS, filename
            assert re.search(rf"[-.]{quant}\.GGUF$", filename.upper()), filename
        # The file names belong to the repository: its model name is in each of them.
        stem = e.repo.split("/")[1].lower().removesuffix("-gguf")
        assert all(f.lower().startswith(stem) for f in e.recommended), e.repo
        # Q4_K_M is offered wherever the publisher quantizes: it is the fit planner's default.
        # An embedding model's vectors suffer from 4 bits, and it is small: Q8_0 first.
        quants = {parse_quant(f) for f in e.recommended}
        if e.is_embedding:
            assert parse_quant(e.default_file) == "Q8_0", e.repo
        else:
            assert "Q4_K_M" in quants or quants <= NATIVE_QUANTS, e.repo


def test_the_catalog_offers_current_small_chat_models(shipped: list[CatalogEntry]) -> None:
    names = {e.name for e in shipped}
    for family in ("Qwen3 0.6B", "Qwen3 1.7B", "Qwen3 4B", "Gemma 3 1B", "Gemma 3 4B",
                   "Llama 3.2 1B", "Llama 3.2 3B", "SmolLM3 3B", "Phi-4 mini", "gpt-oss 20B"):
        assert any(n.startswith(family) for n in names), family
    for group in (chat_models(shipped), [e for e in shipped if e.is_embedding]):
        sizes = [float(e.params[:-1]) * (1e-3 if e.params.endswith("M") else 1) for e in group]
        assert sizes == sorted(sizes)  # smallest first: what most computers can run comes first


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
    (lambda m: m.pop("checked"), "missing checked"),
    (lambda m: m.update(checked="2026-12-01"), "checked must be"),
    (lambda m: m.update(checked={"date": "yesterday", "against": "hub"}), "the date"),
    (lambda m: m.update(checked={"date": "2026-12-01", "against": "memory"}), "against"),
    (lambda m: m.update(checked={"date": "2026-12-01"}), "checked must be"),
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
        load_catalog(write(tmp_path, {**raw_shipped(), "format": 1}))  # before `checked`
    data = raw_shipped()
    data["models"].append(copy.deepcopy(data["models"][0]))
    with pytest.raises(CatalogError, match="twice"):
        load_catalog(write(tmp_path, data))
    with pytest.raises(CatalogError, match="not an object"):
        load_catalog(write(tmp_path, {"format": 2, "models": ["x"]}))


# -- checking the file names on the Hub -----------------------------------------------------------
def test_the_file_names_are_checked_on_the_hub_and_stamped(
        fake_hub: FakeHub, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = raw_shipped()
    data["models"] = data["models"][:2]
    first, second = data["models"]
    fake_hub.add_repo(first["repo"], [FakeFile(n, 100) for n in first["recommended"]])
    fake_hub.add_repo(second["repo"], [FakeFile(n, 100) for n in second["recommended"][1:]])
    path = write(tmp_path, data)
    entries = load_catalog(path)
    assert catalog.missing_files(entries[0]) == []
    assert catalog.missing_files(entries[1]) == [second["recommended"][0]]

    assert catalog.main(["--catalog", str(path), "--write"]) == 1  # one entry is wrong
    out = capsys.readouterr().out.splitlines()
    assert out == [f"{first['repo']}: ok", f"{second['repo']}: missing {second['recommended'][0]}"]
    stamped = load_catalog(path)
    assert stamped[0].checked_against == "hub"
    assert stamped[0].checked == datetime.datetime.now(datetime.UTC).date()
    assert (stamped[1].checked_against, stamped[1].checked) == (entries[1].checked_against,
                                                               entries[1].checked)


def test_a_repository_the_hub_does_not_have_is_reported(
        fake_hub: FakeHub, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = raw_shipped()
    data["models"] = data["models"][:1]
    path = write(tmp_path, data)
    before = load_catalog(path)
    assert catalog.main(["--catalog", str(path), "--write"]) == 1
    assert capsys.readouterr().out.startswith(f"{data['models'][0]['repo']}: cannot list it")
    assert load_catalog(path) == before  # nothing stamped
