"""Speculative decoding with the real model: the reply is the one plain decoding gives, token for
token (greedy, and sampled with a seed), guesses are counted, stops and the KV cache keep
working, and a draft model must share the model's vocabulary.

Exactness needs every row of a batch computed as a lone token would be. Flash attention does
that (the tests turn it on; the engine leaves it to the user's setting, see host.py); llama.cpp's
CPU attention still sums a lone token's scores in per-thread chunks once 512 cells are in view
with an f16 cache, so the long tests use a q8_0 cache (the short one stays under 512 cells)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from gguf import GGUFReader

from inglenook.core.load import LoadParams
from inglenook.core.messages import GenerationRequest, Message
from inglenook.core.replies import Stats
from inglenook.core.sampling import SamplingParams
from inglenook.engine import protocol as p
from inglenook.engine.client import EngineClient, EngineError
from tests.gguf_tools import rewrite_metadata
from tests.integration.conftest import GREEDY, ask, finish_of, stats_of

ITEMS = "\n".join(f"- {n} {fruit} from the {place} market" for n, fruit, place in [
    (3, "apples", "north"), (7, "pears", "river"), (2, "melons", "old"), (9, "plums", "east"),
    (4, "lemons", "harbour"), (6, "figs", "west"), (5, "grapes", "hill"), (8, "limes", "south")])
COPY = (Message("user", f"Copy this list exactly, one item per line:\n\n{ITEMS}"),)
CODE = "\n".join(
    f"def check_{name}(record):\n    value = record.get('{name}')\n    if value is None:\n"
    f"        raise ValueError('missing {name}')\n    return {kind}(value)\n"
    for name, kind in [("width", "int"), ("height", "int"), ("label", "str"), ("ratio", "float"),
                       ("owner", "str"), ("count", "int"), ("weight", "float"),
                       ("colour", "str"), ("depth", "int"), ("score", "float")] * 2)
EDIT = (Message("user", f"```python\n{CODE}\n```\n\nRewrite this code with `value` renamed to "
                        "`field`. Reply with the complete code only."),)
LONG = GREEDY.replace(max_tokens=160)


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EngineClient]:
    engine = EngineClient(log_path=tmp_path_factory.mktemp("logs") / "engine.log")
    yield engine
    engine.close()


def reply(client: EngineClient, params: LoadParams, messages: tuple[Message, ...],
          sampling: SamplingParams = LONG) -> tuple[str, Stats]:
    client.load(params)
    text, events = ask(client, messages, 1, sampling)
    assert finish_of(events).finish.reason in ("stop", "length")
    return text, stats_of(events).stats


def same_reply(client: EngineClient, plain: LoadParams, speculating: LoadParams,
               messages: tuple[Message, ...], sampling: SamplingParams = LONG) -> Stats:
    """Assert the two loads give the same reply; the speculating run's figures."""
    expected, base = reply(client, plain, messages, sampling)
    text, stats = reply(client, speculating, messages, sampling)
    assert text == expected
    assert stats.generated_tokens == base.generated_tokens
    assert stats.context_used == base.context_used
    assert base.drafted_tokens == base.accepted_tokens == 0
    return stats


def test_prompt_lookup_gives_the_plain_greedy_reply_token_for_token(
        client: EngineClient, bundled_model: Path) -> None:
    plain = LoadParams(str(bundled_model), n_ctx=2048, flash_attn=True, prompt_lookup=False)
    stats = same_reply(client, plain, plain.replace(prompt_lookup=True), COPY)
    assert client.model is not None and client.model.speculation == "prompt lookup"
    assert stats.prompt_tokens + stats.generated_tokens < 512  # see the module's docstring
    assert 0 < stats.accepted_tokens <= stats.drafted_tokens
    assert stats.acceptance_rate == stats.accepted_tokens / stats.drafted_tokens


def test_prompt_lookup_on_a_long_code_edit_with_a_q8_cache(
        client: EngineClient, bundled_model: Path) -> None:
    plain = LoadParams(str(bundled_model), n_ctx=4096, flash_attn=True, kv_cache_type="q8_0",
                       prompt_lookup=False)
    stats = same_reply(client, plain, plain.replace(prompt_lookup=True, lookup_ngram=4,
                                                    lookup_tokens=12), EDIT)
    assert stats.prompt_tokens > 512 and stats.accepted_tokens > stats.generated_tokens // 3


def test_sampling_with_a_seed_gives_the_same_reply_with_speculation(
        client: EngineClient, bundled_model: Path) -> None:
    """The model samples every position itself, with the same random stream: speculation only
    decides how many positions are evaluated at once."""
    sampled = SamplingParams(temperature=0.8, top_k=40, top_p=0.95, seed=7, max_tokens=80)
    plain = LoadParams(str(bundled_model), n_ctx=4096, flash_attn=True, kv_cache_type="q8_0",
                       prompt_lookup=False)
    stats = same_reply(client, plain, plain.replace(prompt_lookup=True), EDIT, sampled)
    assert stats.accepted_tokens > 0


def test_flash_attention_follows_the_setting_with_speculation(
        client: EngineClient, bundled_model: Path) -> None:
    """On a CPU flash attention makes a long chat's next prompt slower to read: speculation
    does not force it (the reply may then differ at a rounding near-tie). With a KV cache per
    reply it follows the setting; the shared pool (the default) turns it on."""
    info = client.load(LoadParams(str(bundled_model), n_ctx=1024, kv_per_reply=True))
    assert info.speculation == "prompt lookup" and not info.flash_attn
    info = client.load(LoadParams(str(bundled_model), n_ctx=1024, flash_attn=True,
                                  kv_per_reply=True))
    assert info.speculation == "prompt lookup" and info.flash_attn
    info = client.load(LoadParams(str(bundled_model), n_ctx=1024))
    assert info.speculation == "prompt lookup" and info.flash_attn and info.kv_pool == 1024


def test_draft_model_gives_the_plain_reply_and_its_guesses_are_accepted(
        client: EngineClient, bundled_model: Path) -> None:
    """The bundled model as its own draft: each guess is the model's own next token. (It is as
    slow as the model, so after one timed batch of guesses the engine stops guessing.)"""
    plain = LoadParams(str(bundled_model), n_ctx=2048, flash_attn=True, prompt_lookup=False)
    drafting = plain.replace(draft_model_path=str(bundled_model), draft_tokens=12,
                             draft_p_min=0.0)
    stats = same_reply(client, plain, drafting, COPY)
    assert client.model is not None and client.model.speculation == "draft model"
    assert client.model.draft_model == bundled_model.stem
    assert stats.drafted_tokens >= 12 and stats.acceptance_rate == 1.0


def test_after_a_stop_string_the_next_turn_is_the_same_as_without_speculation(
        client: EngineClient, bundled_model: Path) -> None:
    """A stop inside a batch of accepted guesses must leave the KV cache holding exactly the
    reply so far: the follow-up, evaluated on top of it, shows any stray token."""
    plain = LoadParams(str(bundled_model), n_ctx=4096, flash_attn=True, kv_cache_type="q8_0",
                       prompt_lookup=False)
    stopping = LONG.replace(stop=("melons",))
    runs = []
    for params in (plain, plain.replace(prompt_lookup=True)):
        client.load(params)
        first, events = ask(client, COPY, 1, stopping)
        assert "melons" not in first and first
        turn1 = stats_of(events).stats
        follow_up = (*COPY, Message("assistant", first), Message("user", "Now the last two."))
        second, events = ask(client, follow_up, 2, LONG)
        turn2 = stats_of(events).stats
        assert turn2.cached_tokens >= turn1.prompt_tokens
        runs.append((first, second, turn1.context_used, turn2.context_used))
    assert runs[0] == runs[1]


def test_a_stop_during_speculation_lands_within_a_step(
        client: EngineClient, bundled_model: Path) -> None:
    client.load(LoadParams(str(bundled_model), n_ctx=4096))
    text, after_cancel, events = "", 0, []
    for event in client.generate(GenerationRequest(5, EDIT, GREEDY.replace(max_tokens=400))):
        events.append(event)
        if isinstance(event, p.Delta):
            text += event.text
            if len(text) > 80 and after_cancel == 0:
                client.cancel(5)
                after_cancel = 1
            elif after_cancel:
                after_cancel += 1
    assert finish_of(events).finish.reason == "cancelled"
    assert after_cancel <= 3 and stats_of(events).stats.generated_tokens < 200


# -- a draft model's vocabulary ---------------------------------------------------------------
def test_a_draft_with_another_vocabulary_is_refused_before_it_loads(
        client: EngineClient, bundled_model: Path, tmp_path: Path) -> None:
    other = rewrite_metadata(bundled_model, tmp_path / "other-eos.gguf",
                             {"tokenizer.ggml.eos_token_id": 0})
    with pytest.raises(EngineError, match="another end-of-text token"):
        client.load(LoadParams(str(bundled_model), draft_model_path=str(other)))
    assert client.alive
    assert client.load(LoadParams(str(bundled_model), n_ctx=1024)).speculation


def test_a_draft_whose_tokens_differ_is_refused_after_comparing_them(
        client: EngineClient, bundled_model: Path, tmp_path: Path) -> None:
    field = GGUFReader(bundled_model).fields["tokenizer.ggml.tokens"]
    tokens = [bytes(field.parts[i]).decode("utf-8") for i in field.data]
    tokens[1000], tokens[1001] = tokens[1001], tokens[1000]
    swapped = rewrite_metadata(bundled_model, tmp_path / "swapped.gguf",
                               {"tokenizer.ggml.tokens": tokens})
    with pytest.raises(EngineError, match="token 1000 differs"):
        client.load(LoadParams(str(bundled_model), n_ctx=1024, draft_model_path=str(swapped)))
    assert client.alive
    assert client.load(LoadParams(str(bundled_model), n_ctx=1024)).speculation
