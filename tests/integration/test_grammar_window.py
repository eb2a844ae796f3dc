"""The grammar checks only the likeliest tokens first (llama/sampler.py): greedy, that gives
the token a mask of the whole vocabulary gives, step after step; sampled, only allowed ones.
The whole mask's fast form (only tokens whose first byte may come next) chooses as checking
every token does, greedy and sampled."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from inglenook.core.sampling import SamplingParams
from inglenook.engine.host.grammar import grammar_for
from inglenook.engine.host.llama import Batch, Context, Model, Sampler

SCHEMA = {"type": "object", "required": ["notes"], "additionalProperties": False,
          "properties": {"notes": {"type": "array", "items": {"type": "string"}}}}
PROMPT = b"<|im_start|>user\nWrite notes about a storm.<|im_end|>\n<|im_start|>assistant\n"


@pytest.fixture(scope="module")
def model(bundled_model: Path) -> Iterator[Model]:
    loaded = Model(str(bundled_model), 0, True, False)
    yield loaded
    loaded.close()


def reply(model: Model, sampling: SamplingParams, whole: bool,
          by_first_byte: bool = True) -> tuple[bytes, int]:
    """A constrained reply of 40 tokens, and how many steps masked the whole vocabulary;
    `whole`: always; and without `by_first_byte`, every token of it (the reference)."""
    ctx = Context(model, 512, 1, 512, 2, 2, False, "f16")
    sampler = Sampler(model, sampling, sampling.seed, grammar_for(json.dumps(SCHEMA)))
    sampler._candidates.by_first_byte = by_first_byte
    if whole:
        sampler.need = 0
    batch = Batch(512)
    tokens = model.tokenize(PROMPT, True)
    for i, token in enumerate(tokens):
        batch.add(token, i, 0, i == len(tokens) - 1)
    text, pos = b"", len(tokens)
    try:
        for _ in range(40):
            assert ctx.decode(batch) == 0
            token = sampler.sample(ctx, batch.n - 1)
            if model.is_eog(token):
                break
            text += model.piece(token)
            batch.clear()
            batch.add(token, pos, 0, True)
            pos += 1
        return text, sampler.full_masks
    finally:
        sampler.close()
        batch.close()
        ctx.close()


def test_greedy_gives_what_a_whole_mask_gives_while_rarely_masking_it_whole(
        model: Model) -> None:
    greedy = SamplingParams(temperature=0.0, seed=1, repeat_penalty=1.1)
    windowed, masks = reply(model, greedy, whole=False)
    reference, all_masks = reply(model, greedy, whole=True, by_first_byte=False)
    assert windowed == reference and all_masks >= 20
    assert masks < all_masks // 4


def test_sampled_replies_stay_inside_the_grammar(model: Model) -> None:
    for seed in range(3):
        text, _ = reply(model, SamplingParams(temperature=1.0, seed=seed), whole=False)
        compact = "".join(text.decode().split())
        assert compact.startswith('{"notes":['), text


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_masking_by_first_byte_gives_what_masking_every_token_gives(
        model: Model, temperature: float) -> None:
    """Every step by first byte (the whole mask's fast form) against every token checked."""
    for seed in range(1 if temperature == 0.0 else 2):  # greedy: one seed is all replies
        sampling = SamplingParams(temperature=temperature, seed=seed, repeat_penalty=1.1)
        fast, _ = reply(model, sampling, whole=True)
        reference, _ = reply(model, sampling, whole=True, by_first_byte=False)
        assert fast == reference
