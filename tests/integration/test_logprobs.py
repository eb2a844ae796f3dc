"""logit_bias and logprobs on the real model through the official openai client, greedy."""

from __future__ import annotations

import math
from collections.abc import Iterator

import openai
import pytest

from inglenook.core.messages import GenerationRequest, Message
from inglenook.engine.client import EngineClient
from tests.helpers.api import Served, serving

ASK = [{"role": "user", "content": "Say hello."}]


@pytest.fixture(scope="module")
def api(engine: EngineClient) -> Iterator[openai.OpenAI]:
    served: Served
    with serving(engine) as served, openai.OpenAI(
            base_url=served.base_url, api_key="unused", max_retries=0) as client:
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
