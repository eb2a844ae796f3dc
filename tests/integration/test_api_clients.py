"""The API as real clients use it, on the real model through the official SDKs: structured
output on every route (Responses' text.format, Anthropic's output_config), the fields that
only name or cache a request, the default reply cap, and Claude Code's max_tokens of 32,000
on a small context."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Literal

import anthropic
import jsonschema
import openai
import pytest
from pydantic import BaseModel, Field

from inglenook.engine.client import EngineClient
from tests.helpers import sdk_clients
from tests.helpers.api import Served, request, serving

oai, claude = sdk_clients.oai, sdk_clients.claude  # the fixtures, for `served`

SCHEMA = {"type": "object", "additionalProperties": False, "required": ["name", "age"],
          "properties": {"name": {"type": "string", "maxLength": 12},
                         "age": {"type": "integer"}}}
ASK = "Describe a lighthouse keeper."


class Keeper(BaseModel):
    name: str = Field(max_length=12)
    age: int


class Pet(BaseModel):  # Anthropic's structured outputs drop maxLength: an enum bounds it
    pet: Literal["cat", "dog", "owl"]
    age: int


@pytest.fixture(scope="module")
def served(engine: EngineClient) -> Iterator[Served]:
    with serving(engine, default_max_tokens=5) as s:
        yield s




def test_responses_parse_gets_its_schema(oai: openai.OpenAI) -> None:
    parsed = oai.responses.parse(model="", input=ASK, text_format=Keeper, temperature=0,
                                 max_output_tokens=200)
    assert isinstance(parsed.output_parsed, Keeper)
    plain = oai.responses.create(model="", input=ASK, temperature=0, max_output_tokens=200,
                                 text={"format": {"type": "json_schema", "name": "keeper",
                                                  "schema": SCHEMA, "strict": True},
                                       "verbosity": "low"})
    jsonschema.validate(json.loads(plain.output_text), SCHEMA)
    anything = oai.responses.create(model="", input=ASK + " As JSON.", temperature=0,
                                    max_output_tokens=60,
                                    text={"format": {"type": "json_object"}})
    assert anything.output_text.lstrip().startswith("{")  # the grammar held from the start


def test_anthropic_structured_output(claude: anthropic.Anthropic) -> None:
    made = claude.messages.create(model="", max_tokens=200, extra_body={"temperature": 0},
                                  messages=[{"role": "user", "content": ASK}],
                                  output_config={"format": {"type": "json_schema",
                                                            "schema": SCHEMA}})
    jsonschema.validate(json.loads(made.content[0].text), SCHEMA)  # type: ignore[union-attr]
    parsed = claude.messages.parse(model="", max_tokens=200, extra_body={"temperature": 0},
                                   messages=[{"role": "user", "content": ASK}],
                                   output_format=Pet)
    assert isinstance(parsed.parsed_output, Pet)


def test_fields_that_only_name_or_cache_are_accepted(oai: openai.OpenAI, served: Served
                                                     ) -> None:
    base = {"model": "", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4,
            "temperature": 0}
    plain = request(served.port, "POST", "/v1/chat/completions", base).json()
    for extra in ({"cache_prompt": True}, {"prompt_cache_key": "session-1"},
                  {"safety_identifier": "user-1"}, {"verbosity": "low"}, {"audio": None},
                  {"repetition_penalty": 1.0}):
        got = request(served.port, "POST", "/v1/chat/completions", {**base, **extra})
        assert got.status == 200, (extra, got.body)
        assert got.json()["choices"][0]["message"] == plain["choices"][0]["message"]
    for extra in ({"audio": {"voice": "alloy"}}, {"cache_prompt": False},
                  {"repetition_penalty": 1.1, "repeat_penalty": 1.1}):
        assert request(served.port, "POST", "/v1/chat/completions",
                       {**base, **extra}).status == 400
    repeated = {**base, "max_tokens": 24}
    one = request(served.port, "POST", "/v1/chat/completions",
                  {**repeated, "repetition_penalty": 1.5}).json()
    two = request(served.port, "POST", "/v1/chat/completions",
                  {**repeated, "repeat_penalty": 1.5}).json()
    assert one["choices"][0]["message"] == two["choices"][0]["message"]


def test_a_request_without_a_limit_gets_the_servers(oai: openai.OpenAI) -> None:
    made = oai.chat.completions.create(model="", temperature=0, messages=[
        {"role": "user", "content": "Count from one to one hundred in words."}])
    assert made.usage is not None and made.usage.completion_tokens == 5
    assert made.choices[0].finish_reason == "length"


def test_claude_codes_max_tokens_does_not_refuse_a_prompt_that_fits(
        claude: anthropic.Anthropic, served: Served) -> None:
    n_ctx = served.server.link.model_info("").n_ctx  # type: ignore[union-attr]
    words = "lighthouse " * int(n_ctx * 0.55)  # over half the context, under all of it
    # Claude Code streams (the SDK refuses a max_tokens this large without streaming). The
    # reply may run to the context's end: the first words are enough to show it was taken.
    with claude.messages.stream(model="", max_tokens=32000, extra_body={"temperature": 0},
                                messages=[{"role": "user", "content": words + "\nSay yes."}]
                                ) as stream:
        assert next(stream.text_stream, None) is not None
    counted = claude.messages.count_tokens(model="", messages=[
        {"role": "user", "content": words + "\nSay yes."}])
    assert n_ctx // 2 < counted.input_tokens < n_ctx - 512
    with pytest.raises(anthropic.BadRequestError) as caught, claude.messages.stream(
            model="", max_tokens=32000,
            messages=[{"role": "user", "content": "lighthouse " * (n_ctx * 2)}]) as stream:
        stream.get_final_message()
    message = str(caught.value)
    assert "Start a new chat" not in message and "max_tokens" in message


def test_anthropic_stop_sequences_say_which_one_stopped(claude: anthropic.Anthropic) -> None:
    ask: dict = {"model": "", "max_tokens": 40, "extra_body": {"temperature": 0},
                 "messages": [{"role": "user", "content": "Count from one to ten in words."}]}
    plain = claude.messages.create(**ask)
    said = plain.content[0].text  # type: ignore[union-attr]
    word = said.split()[2].strip(",.")  # greedy: the same text comes again, up to this word
    stopped = claude.messages.create(**ask, stop_sequences=["never-said-zz", word])
    assert stopped.stop_reason == "stop_sequence" and stopped.stop_sequence == word
    assert stopped.content[0].text == said[:said.index(word)]  # type: ignore[union-attr]
    with claude.messages.stream(**ask, stop_sequences=[word]) as stream:
        final = stream.get_final_message()
    assert final.stop_reason == "stop_sequence" and final.stop_sequence == word
    assert plain.stop_reason in ("end_turn", "max_tokens") and plain.stop_sequence is None


def test_seeded_choices_come_again_with_the_same_seed(oai: openai.OpenAI) -> None:
    def choices() -> list[str | None]:
        made = oai.chat.completions.create(
            model="", n=3, seed=7, temperature=1.0, max_tokens=12,
            messages=[{"role": "user", "content": "Name a colour."}])
        return [c.message.content for c in sorted(made.choices, key=lambda c: c.index)]

    first = choices()
    assert choices() == first and choices() == first
    assert len(set(first)) > 1  # each choice a sample of its own
