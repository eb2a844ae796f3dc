"""Replies in a format, enforced by a grammar while sampling, on the real model through the
official openai client: every seeded reply parses and matches its schema."""

from __future__ import annotations

import json
from collections.abc import Iterator

import jsonschema
import openai
import pytest

from inglenook.engine.client import EngineClient
from tests.helpers.api import openai_client

SCHEMA = {"type": "object", "additionalProperties": False, "required": ["name", "age", "pets"],
          "properties": {"name": {"type": "string", "maxLength": 12},
                         "age": {"type": "integer"},
                         "pets": {"type": "array", "maxItems": 3,
                                  "items": {"enum": ["cat", "dog", "owl"]}}}}
ASK = [{"role": "user", "content": "Describe a lighthouse keeper."}]


@pytest.fixture(scope="module")
def api(engine: EngineClient) -> Iterator[openai.OpenAI]:
    with openai_client(engine) as client:
        yield client


def test_twenty_seeded_replies_match_their_json_schema(api: openai.OpenAI) -> None:
    replies = []
    for seed in range(5):  # 4 choices each: choice i is sampled with seed + i
        answer = api.chat.completions.create(
            model="", messages=ASK, n=4, seed=seed * 4, temperature=1.0, max_tokens=96,  # type: ignore[arg-type]
            response_format={"type": "json_schema",
                             "json_schema": {"name": "keeper", "strict": True,
                                             "schema": SCHEMA}})
        replies += [c.message.content or "" for c in answer.choices]
    assert len(replies) == 20
    for reply in replies:
        jsonschema.validate(json.loads(reply), SCHEMA)
    assert len(set(replies)) > 1  # sampled, not one reply twenty times


def test_json_object_replies_are_an_object(api: openai.OpenAI) -> None:
    answer = api.chat.completions.create(
        model="", messages=ASK, max_tokens=96, temperature=0,  # type: ignore[arg-type]
        response_format={"type": "json_object"})
    assert isinstance(json.loads(answer.choices[0].message.content or ""), dict)


# 55,000 values, 2.6 MB: the engine was held for half a minute, every other request with it.
LONG_ENUM = {"type": "object", "properties": {"pick": {
    "enum": [f"choice {i:05d} of a list that is far too long" for i in range(55_000)]}}}


@pytest.mark.parametrize(("schema", "reason"), [
    ({"type": "object", "properties": 5}, "grammar"),
    ({"type": "integer", "minimum": 0}, "minimum cannot be enforced"),
    (LONG_ENUM, r"makes a grammar of \d MB; at most 256 KB is allowed"),
], ids=["malformed", "unenforced", "too-large"])
def test_a_schema_that_cannot_be_a_grammar_is_refused_with_the_reason(
        api: openai.OpenAI, schema: dict, reason: str) -> None:
    with pytest.raises(openai.BadRequestError, match=reason):
        api.chat.completions.create(
            model="", messages=ASK, max_tokens=8,  # type: ignore[arg-type]
            response_format={"type": "json_schema", "json_schema": {
                "name": "x", "schema": schema}})
