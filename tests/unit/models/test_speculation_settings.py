"""Speculative decoding's load options and what the fit planner counts for a draft model."""

from __future__ import annotations

import dataclasses

import pytest

from inglenook.core.load import LoadParams, LoadParamsError, ModelDefaults
from inglenook.models import fit
from inglenook.models.fit import Memory, ModelShape

GB = 10**9
TARGET = ModelShape(n_layers=32, n_embd=4096, n_head=32, n_head_kv=8, n_ctx_train=32768,
                    weights_bytes=4_400_000_000, architecture="llama")
DRAFT = ModelShape(n_layers=16, n_embd=2048, n_head=32, n_head_kv=8, n_ctx_train=32768,
                   weights_bytes=800_000_000, architecture="llama")


def test_what_guesses_tokens() -> None:
    params = LoadParams("m.gguf")
    assert params.speculation == "prompt lookup"
    assert params.replace(prompt_lookup=False).speculation == ""
    assert params.replace(draft_model_path="d.gguf").speculation == "draft model"
    assert params.replace(prompt_lookup=False, draft_model_path="d.gguf").speculation == (
        "draft model")


def test_a_model_can_have_its_own_speculation() -> None:
    params = LoadParams("m.gguf")
    assert ModelDefaults().apply(params) == params
    own = ModelDefaults({"prompt_lookup": False, "draft_model_path": "small.gguf"})
    assert own.apply(params).speculation == "draft model"
    assert ModelDefaults({"prompt_lookup": False}).apply(params).speculation == ""
    assert ModelDefaults.from_dict(own.to_dict()) == own
    assert ModelDefaults.from_dict({"prompt_lookup": "yes", "draft_model_path": 3}).empty


@pytest.mark.parametrize(("change", "message"), [
    ({"lookup_ngram": 0}, "n-gram size"), ({"lookup_ngram": 9}, "n-gram size"),
    ({"lookup_tokens": 0}, "Tokens proposed"), ({"draft_tokens": 65}, "Tokens proposed"),
    ({"draft_p_min": 1.5}, "confidence"), ({"n_threads_batch": -1}, "Prompt threads")])
def test_bad_speculation_settings_are_refused(change: dict, message: str) -> None:
    with pytest.raises(LoadParamsError, match=message):
        LoadParams("m.gguf").replace(**change).validate()


def test_a_draft_model_is_counted_with_its_own_kv_cache() -> None:
    memory = Memory(ram_free=64 * GB, ram_total=64 * GB)
    alone = fit.plan(TARGET, 8192, "f16", memory)
    drafted = fit.plan(TARGET, 8192, "f16", memory, draft=DRAFT)
    extra = fit.draft_bytes(DRAFT, 8192, "f16")
    assert extra == (DRAFT.weights_bytes + fit.kv_cache_bytes(DRAFT, 8192, "f16")
                     + fit.overhead_bytes(DRAFT, 8192) - fit.ENGINE_BASE_BYTES)
    assert drafted.total_bytes == alone.total_bytes + extra == alone.total_bytes + (
        drafted.draft_bytes)
    assert "for the draft model" in drafted.note and alone.draft_bytes == 0


def test_a_draft_model_can_make_a_load_refused() -> None:
    alone = fit.plan(TARGET, 8192, "f16", Memory(ram_free=64 * GB, ram_total=64 * GB))
    tight = Memory(ram_free=alone.total_bytes + 100_000_000, ram_total=64 * GB)
    assert fit.load_refusal(TARGET, 8192, "f16", tight) is None
    message = fit.load_refusal(TARGET, 8192, "f16", tight, draft=DRAFT)
    assert message is not None and "for the draft model" in message
    assert fit.largest_context(TARGET, "f16", tight, 8192, DRAFT) < 8192


def test_a_bigger_draft_needs_more() -> None:
    bigger = dataclasses.replace(DRAFT, weights_bytes=2 * DRAFT.weights_bytes)
    assert fit.draft_bytes(bigger, 4096, "q8_0") > fit.draft_bytes(DRAFT, 4096, "q8_0") > 0
    assert fit.draft_bytes(None, 4096, "f16") == 0
