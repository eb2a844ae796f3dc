"""Issue 40's honest replies, through the official SDKs on a fake engine host whose model has
Qwen3's template (tool calls, thinking): a forced call cut by the token limit says so and
leaks no markup, a prefilled Anthropic reply is continued, and the Responses API as the SDK
reads it (numbered events, the request echoed, retrieve / delete / input_items, kept across a
restart)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from inglenook.core.load import LoadParams
from inglenook.engine.client import EngineClient
from tests.helpers import sdk_clients
from tests.helpers.api import Served, fake_qwen3_engine, request, serving

oai, claude = sdk_clients.oai, sdk_clients.claude  # the fixtures, for `served`

CALL = ('<think>\nThe user wants the weather.\n</think>\n\n<tool_call>\n'
        '{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>')
SCRIPT = {"default": {"text": "Echo: {last}", "token_ms": 0},
          "replies": [{"match": "weather", "text": CALL, "token_ms": 0}]}
PARAMETERS = {"type": "object", "properties": {"city": {"type": "string"}},
              "required": ["city"]}
WEATHER = {"type": "function", "function": {"name": "get_weather",
                                            "description": "The weather in a city.",
                                            "parameters": PARAMETERS}}
ASK = "What is the weather in Paris?"
CUT = 9  # tokens: the thinking, then the call's first words


@pytest.fixture(scope="module")
def engine(bundled_model: Path, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[EngineClient]:
    folder = tmp_path_factory.mktemp("fake-qwen3-honest")
    with fake_qwen3_engine(bundled_model, folder, SCRIPT) as client:
        yield client


@pytest.fixture
def served(engine: EngineClient) -> Iterator[Served]:
    with serving(engine) as s:
        yield s




def test_a_forced_call_cut_by_the_limit_says_length_and_leaks_no_markup(
        oai: openai.OpenAI, claude: anthropic.Anthropic) -> None:
    for choice in ("required", {"type": "function", "function": {"name": "get_weather"}}):
        made = oai.chat.completions.create(model="", max_tokens=CUT, tools=[WEATHER],  # type: ignore[list-item]
                                           tool_choice=choice,  # type: ignore[arg-type]
                                           messages=[{"role": "user", "content": ASK}])
        assert made.choices[0].finish_reason == "length"
        assert "<tool_call>" not in (made.choices[0].message.content or "")
        assert not made.choices[0].message.tool_calls
    streamed = oai.chat.completions.create(model="", max_tokens=CUT, tools=[WEATHER],  # type: ignore[list-item]
                                           tool_choice="required", stream=True,
                                           messages=[{"role": "user", "content": ASK}])
    chunks = list(streamed)
    said = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert "<tool_call>" not in said and "get_weather" not in said
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"
    message = claude.messages.create(
        model="", max_tokens=CUT, tool_choice={"type": "any"},
        tools=[{"name": "get_weather", "description": "The weather in a city.",
                "input_schema": PARAMETERS}],
        messages=[{"role": "user", "content": ASK}])
    assert message.stop_reason == "max_tokens"
    assert not [b for b in message.content if b.type == "tool_use"]
    assert all("<tool_call>" not in getattr(b, "text", "") for b in message.content)
    response = oai.responses.create(model="", input=ASK, max_output_tokens=CUT,
                                    tool_choice="required",
                                    tools=[{"type": "function", "name": "get_weather",
                                            "parameters": PARAMETERS, "strict": False}])
    assert response.status == "incomplete"
    assert response.incomplete_details and response.incomplete_details.reason == \
        "max_output_tokens"
    assert "<tool_call>" not in response.output_text
    whole = oai.chat.completions.create(model="", tools=[WEATHER], tool_choice="required",  # type: ignore[list-item]
                                        messages=[{"role": "user", "content": ASK}])
    assert whole.choices[0].finish_reason == "tool_calls"  # under the limit: the call


def test_an_anthropic_prefill_is_continued_not_a_new_turn(claude: anthropic.Anthropic,
                                                          oai: openai.OpenAI) -> None:
    message = claude.messages.create(model="", max_tokens=20, messages=[
        {"role": "user", "content": "lighthouse"},
        {"role": "assistant", "content": "Echo:"}])
    assert message.content[0].text == " lighthouse"  # type: ignore[union-attr]
    made = oai.chat.completions.create(model="", max_tokens=20, messages=[
        {"role": "user", "content": "lighthouse"},
        {"role": "assistant", "content": "Echo:"}])
    assert made.choices[0].message.content == " lighthouse"


def test_responses_stream_numbers_its_events_from_zero(oai: openai.OpenAI) -> None:
    events = list(oai.responses.create(model="", input="hello there", stream=True))
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert events[0].type == "response.created" and events[-1].type == "response.completed"


def test_responses_echo_the_request_and_are_kept_for_the_sdks_routes(
        engine: EngineClient, served: Served, oai: openai.OpenAI) -> None:
    tool = {"type": "function", "name": "get_weather", "parameters": PARAMETERS,
            "strict": False, "description": "The weather in a city."}
    first = oai.responses.create(model="", input="remember the owl", tools=[tool])  # type: ignore[list-item]
    assert [t.name for t in first.tools] == ["get_weather"]  # type: ignore[union-attr]
    second = oai.responses.create(model="", input="and then?", previous_response_id=first.id)
    assert second.previous_response_id == first.id
    got = oai.responses.retrieve(second.id)
    assert got.id == second.id and got.output_text == second.output_text
    items = oai.responses.input_items.list(second.id, order="asc")
    texts = [part.text for item in items.data for part in item.content]  # type: ignore[union-attr]
    assert texts == ["remember the owl", first.output_text, "and then?"]
    served.server.stop()
    with serving(engine) as again, openai.OpenAI(base_url=again.base_url, api_key="x",
                                                 max_retries=0) as later:
        assert later.responses.retrieve(second.id).output_text == second.output_text
        third = later.responses.create(model="", input="once more",
                                       previous_response_id=second.id)
        assert third.usage and second.usage
        assert third.usage.input_tokens > second.usage.input_tokens  # the history came back
        deleted = later.responses.delete(second.id)
        assert deleted is None or getattr(deleted, "deleted", True)
        with pytest.raises(openai.NotFoundError):
            later.responses.retrieve(second.id)
        with pytest.raises(openai.BadRequestError, match="not found"):
            later.responses.create(model="", input="x", previous_response_id=second.id)


def test_responses_routes_refuse_an_unknown_id(served: Served) -> None:
    for method, path in (("GET", "/v1/responses/resp_nope"),
                         ("DELETE", "/v1/responses/resp_nope"),
                         ("GET", "/v1/responses/resp_nope/input_items")):
        answer: Any = request(served.port, method, path)
        assert answer.status == 404 and answer.json()["error"]["code"] == "response_not_found"


@pytest.fixture(scope="module")
def plain_engine(bundled_model: Path, tmp_path_factory: pytest.TempPathFactory
                 ) -> Iterator[EngineClient]:
    """The bundled model with its own template: no tool calls, no thinking."""
    folder = tmp_path_factory.mktemp("fake-plain")
    script = folder / "script.json"
    script.write_text(json.dumps(SCRIPT))
    client = EngineClient(log_path=folder / "engine.log",
                          command=[sys.executable, "-m", "tests.helpers.fake_host", str(script)])
    client.load(LoadParams(str(bundled_model)))
    yield client
    client.close()


def test_what_a_model_cannot_do_is_refused_by_name(plain_engine: EngineClient) -> None:
    with serving(plain_engine) as plain, \
            openai.OpenAI(base_url=plain.base_url, api_key="x", max_retries=0) as api, \
            anthropic.Anthropic(base_url=plain.url, api_key="x", max_retries=0) as claude:
        with pytest.raises(openai.BadRequestError) as caught:
            api.chat.completions.create(model="", tools=[WEATHER],  # type: ignore[list-item]
                                        messages=[{"role": "user", "content": ASK}])
        assert caught.value.param == "tools" and "cannot call tools" in str(caught.value)
        with pytest.raises(anthropic.BadRequestError, match="cannot call tools"):
            claude.messages.create(model="", max_tokens=20, messages=[
                {"role": "user", "content": ASK}], tools=[{
                    "name": "get_weather", "input_schema": PARAMETERS}])
        with pytest.raises(anthropic.BadRequestError, match="thinking"):
            claude.messages.create(model="", max_tokens=2048, messages=[
                {"role": "user", "content": ASK}],
                thinking={"type": "enabled", "budget_tokens": 1024})
        assert api.chat.completions.create(  # "none": nothing offered, nothing to refuse
            model="", tools=[WEATHER], tool_choice="none",  # type: ignore[list-item]
            messages=[{"role": "user", "content": ASK}]).choices[0].message.content


def test_reasoning_tokens_are_counted_in_usage(oai: openai.OpenAI) -> None:
    made = oai.chat.completions.create(model="", tools=[WEATHER],  # type: ignore[list-item]
                                       messages=[{"role": "user", "content": ASK}])
    details = made.usage and made.usage.completion_tokens_details
    assert details is not None and details.reasoning_tokens == 7  # <think> … </think>: 7 words
    plain = oai.chat.completions.create(model="", messages=[{"role": "user", "content": "hi"}])
    assert plain.usage and plain.usage.completion_tokens_details
    assert plain.usage.completion_tokens_details.reasoning_tokens == 0
    response = oai.responses.create(model="", input=ASK)
    assert response.usage and response.usage.output_tokens_details.reasoning_tokens == 7
