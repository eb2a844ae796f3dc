"""File names from the Hub: quantization, split parts, and refusing names that could escape."""

from __future__ import annotations

import pytest

from inglenook.models.filenames import UnsafeFileName, local_name, parse_quant, split_name
from inglenook.models.hub import HubFile, group_gguf_files


@pytest.mark.parametrize(("name", "quant"), [
    ("Llama-3.2-1B-Instruct-Q4_K_M.gguf", "Q4_K_M"),
    ("mistral-7b-instruct-v0.2.Q8_0.gguf", "Q8_0"),
    ("Qwen2.5-7B-Instruct-IQ2_XS.gguf", "IQ2_XS"),
    ("Qwen2.5-7B-Instruct-IQ2_XXS.gguf", "IQ2_XXS"),
    ("phi-2.IQ4_NL.gguf", "IQ4_NL"),
    ("gemma-2b-it-f16.gguf", "F16"),
    ("gemma-2b-it-BF16.gguf", "BF16"),
    ("tinyllama-fp16.gguf", "F16"),
    ("Phi-3-mini-4k-instruct-q4.gguf", "Q4"),
    ("model.Q4_0_4_4.gguf", "Q4_0_4_4"),
    ("Qwen3-30B-A3B-UD-Q4_K_XL.gguf", "Q4_K_XL"),
    ("Q4_K_M/Qwen3-235B-A22B-Q4_K_M-00001-of-00003.gguf", "Q4_K_M"),
    ("gpt-oss-20b-MXFP4.gguf", "MXFP4"),
    ("Qwen2-7B-Instruct.gguf", ""),  # "Qwen2" is not a quantization
    ("ggml-model.gguf", ""),
])
def test_quantization_is_read_from_the_file_name(name: str, quant: str) -> None:
    assert parse_quant(name) == quant


def test_split_names() -> None:
    s = split_name("Q4_K_M/big-Q4_K_M-00002-of-00003.gguf")
    assert s is not None and (s.index, s.count) == (2, 3)
    assert s.all_parts == [f"Q4_K_M/big-Q4_K_M-0000{i}-of-00003.gguf" for i in (1, 2, 3)]
    assert s.model_name == "big-Q4_K_M.gguf"
    assert split_name("big-00004-of-00003.gguf") is None
    assert split_name("big.Q4_K_M.gguf") is None


@pytest.mark.parametrize("name", [
    "../evil.gguf", "a/../../evil.gguf", "/etc/evil.gguf", "..", "a//b.gguf", "./a.gguf",
    "dir\\..\\evil.gguf", "C:evil.gguf", "evil\x00.gguf", "evil\n.gguf", ".hidden.gguf",
    "model.bin", "model.gguf.exe", "CON.gguf", "nul.Q4_0.gguf", "spaced .gguf ", "",
    "é.gguf", "a" * 300 + ".gguf",
])
def test_unsafe_names_are_refused(name: str) -> None:
    with pytest.raises(UnsafeFileName):
        local_name(name)


def test_safe_names_keep_only_the_last_component() -> None:
    assert local_name("Q4_K_M/model-Q4_K_M-00001-of-00002.gguf") == \
        "model-Q4_K_M-00001-of-00002.gguf"
    assert local_name("Llama 3 8B.Q4_K_M.GGUF") == "Llama 3 8B.Q4_K_M.GGUF"


def test_grouping_by_quantization_with_split_sets_as_one_model() -> None:
    files = [
        HubFile("m.Q8_0.gguf", 800, "a" * 64),
        HubFile("m.Q4_K_M.gguf", 400, "b" * 64),
        HubFile("m.IQ2_XS.gguf", 200, "c" * 64),
        HubFile("Q4_K_M/m-Q4_K_M-00002-of-00002.gguf", 300, "d" * 64),
        HubFile("Q4_K_M/m-Q4_K_M-00001-of-00002.gguf", 300, "e" * 64),
        HubFile("F16/m-F16-00001-of-00003.gguf", 900, "f" * 64),  # parts 2 and 3 missing
        HubFile("README.md", 10, None),
        HubFile("../escape.gguf", 1, "0" * 64),
    ]
    models = group_gguf_files(files)
    assert [m.name for m in models] == ["m.IQ2_XS.gguf", "m.Q4_K_M.gguf", "m-Q4_K_M.gguf",
                                        "m.Q8_0.gguf", "m-F16.gguf"]
    split = models[2]
    assert split.is_split and split.complete and split.size == 600 and split.quant == "Q4_K_M"
    assert [p.path for p in split.parts] == ["Q4_K_M/m-Q4_K_M-00001-of-00002.gguf",
                                            "Q4_K_M/m-Q4_K_M-00002-of-00002.gguf"]
    assert not models[4].complete and models[4].parts_expected == 3
