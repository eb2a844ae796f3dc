"""Built-in chat templates: which one a file without a template gets, and where replies end."""

from __future__ import annotations

import pytest

from inglenook.core.builtin_templates import (
    BUILTINS,
    Detected,
    choose,
    describe,
    detect,
    family_of,
    is_base_model,
    reply_ends,
)
from inglenook.core.load import LoadParams, LoadParamsError, ModelDefaults
from inglenook.core.messages import Message
from inglenook.core.template import ChatTemplate, render_prompt

LLAMA3 = {"<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"}
GEMMA = {"<bos>", "<eos>", "<start_of_turn>", "<end_of_turn>"}
CHATML = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"}
PHI4 = CHATML | {"<|im_sep|>"}
PHI3 = {"<s>", "</s>", "<|user|>", "<|assistant|>", "<|end|>", "<|system|>"}
MISTRAL = {"<s>", "</s>", "[INST]", "[/INST]"}
DEEPSEEK3 = {"<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>"}
DEEPSEEK2 = {"<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"}
LLAMA4 = {"<|begin_of_text|>", "<|header_start|>", "<|header_end|>", "<|eot|>"}


@pytest.mark.parametrize(("vocab", "expected"), [
    (GEMMA, "gemma"), (LLAMA3, "llama3"), (LLAMA4, "llama4"), (CHATML, "chatml"),
    (PHI4, "phi4"), (PHI3, "phi3"), (MISTRAL, "mistral"), (DEEPSEEK3, "deepseek3"),
    (DEEPSEEK2, "deepseek2"),
    # A vocabulary with ChatML's tokens and Llama 3's header tokens (the test copy of the
    # bundled model): the more specific Llama 3 wins.
    (CHATML | LLAMA3, "llama3"),
    ({"<|endoftext|>"}, "plain"),  # GPT-2 style: nothing known
])
def test_a_file_without_a_template_gets_the_one_its_vocabulary_speaks(
        vocab: set[str], expected: str) -> None:
    found = detect(vocab.__contains__)
    assert found.name == expected
    if expected != "plain":
        assert "tokens" in found.reason and all(t in vocab for t in found.reason.split()
                                                if t.startswith("<") and t.endswith(">"))


def test_chatml_is_chosen_only_when_its_tokens_exist() -> None:
    assert detect(GEMMA.__contains__).name != "chatml"
    assert detect(set().__contains__).name == "plain"


def test_llama2_is_told_by_its_architecture_and_sentencepiece_vocabulary() -> None:
    spm = {"<s>", "</s>", "<unk>"}
    assert detect(spm.__contains__, "llama", "llama").name == "llama2"
    assert detect(spm.__contains__, "llama", "gpt2").name == "plain"
    assert detect(spm.__contains__, "gpt2", "llama").name == "plain"


def test_a_base_model_gets_a_plain_transcript_whatever_its_vocabulary() -> None:
    found = detect(GEMMA.__contains__, "gemma3", "llama", base=True)
    assert found.name == "plain" and "base model" in found.reason and "Gemma" in found.reason


@pytest.mark.parametrize(("metadata", "file_name", "base"), [
    ({"general.name": "Gemma 3 270m", "general.basename": "gemma-3"},
     "gemma-3-270m-q4_k_m.gguf", True),  # the real test file: a base model
    ({"general.name": "Gemma 3 270m It", "general.finetune": "it"}, "x.gguf", False),
    ({"general.name": "Smollm2 135M", "general.finetune": "8k-lc100k-mix1-ep2"}, "x.gguf",
     False),  # the bundled model names a fine-tune
    ({"general.finetune": "base"}, "x.gguf", True),
    ({}, "mistral-7b-instruct-v0.2.Q4_K_M.gguf", False),  # an old conversion: its name says
    ({}, "llama-2-7b-chat.Q4_0.gguf", False),
    ({}, "llama-2-7b.Q4_0.gguf", True),
    ({"general.name": "Qwen2.5 7B Instruct"}, "q.gguf", False),
])
def test_a_base_model_is_told_by_its_metadata_and_name(
        metadata: dict[str, object], file_name: str, base: bool) -> None:
    assert is_base_model(metadata, file_name) is base


CHAT = [Message("system", "Be brief."), Message("user", "Hi"), Message("assistant", "Hello!"),
        Message("tool", "42"), Message("user", "2+2?")]


@pytest.mark.parametrize("name", list(BUILTINS))
def test_every_built_in_template_keeps_message_text_apart_and_ends_where_it_says(
        name: str) -> None:
    builtin = BUILTINS[name]
    prompt = render_prompt(ChatTemplate(builtin.source, bos_token="<s>", eos_token="</s>"),
                           CHAT)
    assert not prompt.defused  # message text told apart from markup
    texts = [s.text for s in prompt.segments if s.from_message]
    assert texts == ["Be brief.", "Hi", "Hello!", "42", "2+2?"]
    markup = "".join(s.text for s in prompt.segments if not s.from_message)
    # The turn markers it stops at are the ones it writes (a base model's next line too).
    assert builtin.ends and any(end.strip() in markup for end in builtin.ends)
    # Read back as its own family (so a file carrying it stops the same way), except
    # DeepSeek V2, which only llama.cpp's spelling of it tells.
    assert family_of(builtin.source) == (None if name == "deepseek2" else name)


def test_the_file_own_template_ends_where_its_family_does() -> None:
    assert reply_ends("{{ '<start_of_turn>user' }}") == ("<end_of_turn>", "<start_of_turn>")
    assert reply_ends("<|start_header_id|>{{ x }}<|end_header_id|>")[0] == "<|eot_id|>"
    assert reply_ends("{{ messages }}") == ()  # unknown: the model's end-of-generation only
    assert reply_ends("anything", "gemma") == BUILTINS["gemma"].ends


def test_choose_custom_then_named_then_the_files_own_then_detected() -> None:
    def detected() -> Detected:
        return Detected("gemma", "chosen from its <start_of_turn> and <end_of_turn> tokens")

    assert choose("FILE", "MINE", "chatml", detected).kind == "override"
    named = choose("FILE", None, "chatml", detected)
    assert (named.kind, named.label) == ("chosen", "ChatML")
    assert choose("FILE", None, "auto", detected).kind == "gguf"
    assert choose("FILE", None, "file", detected).kind == "gguf"
    found = choose(None, "  ", "file", detected)
    assert (found.kind, found.label) == ("detected", "Gemma")
    assert describe(found.kind, found.label, found.reason) == (
        "No chat template in the file: using Gemma, chosen from its <start_of_turn> and "
        "<end_of_turn> tokens.")


def test_the_template_name_is_a_load_option_kept_per_model() -> None:
    with pytest.raises(LoadParamsError, match="Chat template"):
        LoadParams("m.gguf", template_name="klingon").validate()
    defaults = ModelDefaults.from_dict({"template_name": "gemma"})
    assert defaults.apply(LoadParams("m.gguf")).template_name == "gemma"
    assert ModelDefaults.from_dict(defaults.to_dict()) == defaults
    assert ModelDefaults.from_dict({"template_name": "klingon"}).empty
    assert ModelDefaults().apply(LoadParams("m.gguf")).template_name == "auto"


def test_details_name_the_built_in_template_a_reply_was_written_with() -> None:
    from inglenook.core.load import ModelInfo
    from inglenook.core.provenance import ModelRecord, Provenance

    info = ModelInfo(path="/m/gemma.gguf", name="gemma", architecture="gemma3", size_bytes=1,
                     n_ctx=2048, n_ctx_train=32768, n_threads=2, n_gpu_layers=0,
                     gpu_offload_supported=False, flash_attn=False, kv_cache_type="f16",
                     template_source="detected", template_name="Gemma",
                     template_reason="chosen from its <start_of_turn> and <end_of_turn> tokens")
    record = ModelRecord.from_value(Provenance(model=ModelRecord.from_info(info)).to_dict()
                                    ["model"])
    assert record is not None
    rows = dict(Provenance(model=record).describe())
    assert rows["Chat template"] == "Gemma, built in (the file has none)"
    older = ModelRecord.from_value({"name": "m", "template": "chatml"})  # older versions' records
    assert older is not None
    assert dict(Provenance(model=older).describe())["Chat template"] == \
        "ChatML (the file has none)"
