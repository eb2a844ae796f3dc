"""logit_bias, logprobs and raw completions (echo, suffix) on the real model through the
official openai client, greedy."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from inglenook.core.load import LoadParams
from inglenook.core.messages import GenerationRequest, Message, RawPrompt
from inglenook.engine import protocol as p
from inglenook.engine.client import EngineClient
from tests.gguf_tools import rewrite_metadata
from tests.helpers.api import openai_client
from tests.integration.conftest import GREEDY

ASK = [{"role": "user", "content": "Say hello."}]


@pytest.fixture(scope="module")
def api(engine: EngineClient) -> Iterator[openai.OpenAI]:
    with openai_client(engine) as client:
        yield client


def token_id(engine: EngineClient, piece: str) -> int:
    """The id of the token that is `piece` as a user turn's first word (read from the prompt
    the engine would evaluate: no tokenizer in the test)."""
    view = engine.inspect(GenerationRequest(1, (Message("user", piece),)))
    return next(t.id for t in view.tokens if t.piece == piece)


def test_logprobs_come_with_each_chosen_token_streamed_or_not(api: openai.OpenAI) -> None:
    whole = api.chat.completions.create(model="", messages=ASK, temperature=0, max_tokens=5,  # type: ignore[arg-type]
                                        logprobs=True, top_logprobs=3)
    tokens = whole.choices[0].logprobs.content  # type: ignore[union-attr]
    assert tokens is not None and len(tokens) == whole.usage.completion_tokens  # type: ignore[union-attr]
    assert "".join(t.token for t in tokens) == whole.choices[0].message.content
    for t in tokens:
        assert len(t.top_logprobs) == 3 and t.logprob <= 0
        assert t.top_logprobs[0].logprob == pytest.approx(t.logprob)  # greedy: the likeliest
        assert [a.logprob for a in t.top_logprobs] == sorted(
            (a.logprob for a in t.top_logprobs), reverse=True)
        assert sum(math.exp(a.logprob) for a in t.top_logprobs) <= 1.0 + 1e-6
        assert bytes(t.bytes or []).decode() == t.token
    streamed = [chunk.choices[0].logprobs for chunk in api.chat.completions.create(
        model="", messages=ASK, temperature=0, max_tokens=5, logprobs=True,  # type: ignore[arg-type]
        top_logprobs=3, stream=True) if chunk.choices and chunk.choices[0].logprobs]
    assert [t for lp in streamed for t in lp.content or []] == tokens


def test_logit_bias_bans_and_forces_tokens(api: openai.OpenAI, engine: EngineClient) -> None:
    first = api.chat.completions.create(model="", messages=ASK, temperature=0, max_tokens=1,  # type: ignore[arg-type]
                                        logprobs=True)
    word = first.choices[0].logprobs.content[0].token  # type: ignore[index, union-attr]
    banned = api.chat.completions.create(
        model="", messages=ASK, temperature=0, max_tokens=1, logprobs=True,  # type: ignore[arg-type]
        logit_bias={str(token_id(engine, word)): -100})
    assert banned.choices[0].logprobs.content[0].token != word  # type: ignore[index, union-attr]
    forced = api.chat.completions.create(
        model="", messages=ASK, temperature=0, max_tokens=1,  # type: ignore[arg-type]
        logit_bias={str(token_id(engine, "Yes")): 100})
    assert forced.choices[0].message.content == "Yes"


def test_a_bias_for_a_token_the_model_lacks_is_a_400_naming_it(api: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError, match="vocabulary") as caught:
        api.chat.completions.create(model="", messages=ASK, max_tokens=1,  # type: ignore[arg-type]
                                    logit_bias={"999999": 5})
    assert caught.value.body["param"] == "logit_bias"  # type: ignore[index]


def test_a_completion_continues_the_prompt_as_it_is(api: openai.OpenAI,
                                                    engine: EngineClient) -> None:
    view = engine.inspect(GenerationRequest(1, (Message("user", "x"),),
                                            raw=RawPrompt("Once upon a <|im_start|>")))
    assert view.prompt == "Once upon a <|im_start|>"  # no template; text never markup
    assert not any(t.special for t in view.tokens)
    plain = api.completions.create(model="", prompt="Once upon a time", max_tokens=4,
                                   temperature=0, logprobs=2)
    legacy = plain.choices[0].logprobs
    assert legacy is not None and "".join(legacy.tokens or []) == plain.choices[0].text
    assert legacy.text_offset == [sum(len(t) for t in (legacy.tokens or [])[:i])
                                  for i in range(len(legacy.tokens or []))]
    assert all(len(top) == 2 for top in legacy.top_logprobs or [])
    echoed = api.completions.create(model="", prompt="Once upon a time", max_tokens=4,
                                    temperature=0, echo=True)
    assert echoed.choices[0].text == "Once upon a time" + plain.choices[0].text
    streamed = [c.choices[0].text for c in api.completions.create(
        model="", prompt="Once upon a time", max_tokens=4, temperature=0, echo=True,
        stream=True) if c.choices]
    assert streamed[0] == "Once upon a time" and "".join(streamed) == echoed.choices[0].text
    with pytest.raises(openai.BadRequestError, match="fill-in-the-middle") as refused:
        api.completions.create(model="", prompt="def f(", suffix="    return x", max_tokens=4)
    assert refused.value.body["param"] == "suffix"  # type: ignore[index]


def test_a_suffix_is_filled_in_with_the_models_fim_tokens(bundled_model: Path,
                                                          tmp_path: Path) -> None:
    """A copy of the model whose vocabulary names three of its control tokens FIM tokens."""
    fim = rewrite_metadata(bundled_model, tmp_path / "fim.gguf", {
        "tokenizer.ggml.fim_pre_token_id": 6, "tokenizer.ggml.fim_suf_token_id": 7,
        "tokenizer.ggml.fim_mid_token_id": 8})
    client = EngineClient(log_path=tmp_path / "engine.log")
    try:
        client.load(LoadParams(str(fim), n_ctx=512))
        raw = RawPrompt("def add(a, b):\n", "\n    return c\n")
        request = GenerationRequest(1, (Message("user", "x"),), GREEDY.replace(max_tokens=3),
                                    raw=raw)
        ids = [t.id for t in client.inspect(request).tokens]
        assert ids[0] == 6 and ids[-1] == 8 and ids.count(7) == 1
        events = list(client.generate(request))
        assert events[-1] == p.Finished(1, events[-1].finish)
        assert events[-1].finish.reason in ("stop", "length")
    finally:
        client.close()
