"""What Ollama's pull names: Ollama's hf.co naming read as a repository and a quantization,
the files that brings, and the names kept so that a client finds a model by the name it
pulled it by."""

from __future__ import annotations

from pathlib import Path

import pytest

from inglenook.models.hub import HubFile, RepoListing, group_gguf_files
from inglenook.server.errors import ApiError
from inglenook.server.pulled_names import PulledNames, PullName, choose, parse_name


@pytest.mark.parametrize(("raw", "name", "repo", "tag"), [
    ("hf.co/bartowski/Llama-GGUF:Q4_K_M", "hf.co/bartowski/Llama-GGUF:Q4_K_M",
     "bartowski/Llama-GGUF", "Q4_K_M"),
    ("huggingface.co/a/b", "huggingface.co/a/b:latest", "a/b", ""),
    ("https://hf.co/a/b:latest", "https://hf.co/a/b:latest", "a/b", ""),
    ("a/b:iq2_xs", "a/b:iq2_xs", "a/b", "iq2_xs"),
])
def test_names_as_ollama_writes_them(raw: str, name: str, repo: str, tag: str) -> None:
    assert parse_name(raw) == PullName(name, repo, tag)


def test_what_is_not_a_hub_repository_is_refused() -> None:
    with pytest.raises(ApiError) as library:
        parse_name("llama3.2:1b")
    assert library.value.status == 404 and "hf.co/owner/repo:QUANT" in library.value.message
    with pytest.raises(ApiError) as bad:
        parse_name("hf.co/a/../b:Q4_K_M")
    assert bad.value.status == 400


def listing(*names: str, projector: str = "") -> RepoListing:
    files = [HubFile(n, 100 + i, "a" * 64) for i, n in enumerate(names)]
    extra = (HubFile(projector, 5, "b" * 64),) if projector else ()
    return RepoListing("a/b", None, tuple(group_gguf_files(files)), extra)


def test_the_default_is_q4_k_m_else_the_nearest_there_is() -> None:
    wanted = parse_name("a/b")
    assert choose(listing("m-Q8_0.gguf", "m-Q4_K_M.gguf"), wanted)[0].quant == "Q4_K_M"
    assert choose(listing("m-Q8_0.gguf", "m-Q4_K_S.gguf", "m-Q2_K.gguf"), wanted)[0].quant \
        == "Q4_K_S"
    assert choose(listing("m-Q2_K.gguf", "m-Q3_K_L.gguf"), wanted)[0].quant == "Q2_K"


def test_a_tag_names_a_quantization_in_any_case_or_a_file() -> None:
    files = listing("m-Q8_0.gguf", "m-Q4_K_M-00001-of-00002.gguf",
                    "m-Q4_K_M-00002-of-00002.gguf", projector="mmproj-f16.gguf")
    model, fetched = choose(files, parse_name("a/b:q4_k_m"))
    assert model.is_split and model.complete
    assert [f.path for f in fetched] == ["m-Q4_K_M-00001-of-00002.gguf",
                                         "m-Q4_K_M-00002-of-00002.gguf", "mmproj-f16.gguf"]
    assert choose(files, parse_name("a/b:m-Q8_0.gguf"))[0].quant == "Q8_0"
    with pytest.raises(ApiError) as missing:
        choose(files, parse_name("a/b:Q5_K_M"))
    assert missing.value.status == 404 and "its tags: Q8_0, Q4_K_M" in missing.value.message


def test_pulled_names_with_or_without_latest_and_a_damaged_file(tmp_path: Path) -> None:
    names = PulledNames(tmp_path / "names.json")
    assert names.file_of("a/b") is None
    names.add("hf.co/a/b:latest", "b-Q4_K_M.gguf")
    names.add("hf.co/a/b:Q8_0", "b-Q8_0.gguf")
    assert names.file_of("HF.CO/a/b") == "b-Q4_K_M.gguf"
    assert names.file_of("hf.co/a/b:q8_0") == "b-Q8_0.gguf"
    names.add("hf.co/a/b", "b-Q4_0.gguf")  # pulled again: the newest file
    assert names.file_of("hf.co/a/b:latest") == "b-Q4_0.gguf"
    assert names.by_file() == {"b-q8_0.gguf": "hf.co/a/b:Q8_0", "b-q4_0.gguf": "hf.co/a/b"}
    (tmp_path / "names.json").write_text("{not json")
    assert names.file_of("hf.co/a/b") is None and names.by_file() == {}
