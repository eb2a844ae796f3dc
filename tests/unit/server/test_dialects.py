"""The API's dialects over HTTP on a fake engine host (scripted replies, no llama.cpp) whose
model has Qwen3's chat template: tool calls and reasoning through the official `openai` and
`anthropic` clients, streaming and not; fields refused by name; the security middleware on
every route of every dialect."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import ollama
import openai
import pytest

from inglenook.engine.client import EngineClient
from inglenook.server.errors import ApiError
from tests.helpers import sdk_clients
from tests.helpers.api import Served, fake_qwen3_engine, request, serving

oai, claude = sdk_clients.oai, sdk_clients.claude  # the fixtures, for `served`

TOKEN = "s3cret-token-for-tests"
CALL = ('<think>\nThe user wants the weather.\n</think>\n\n<tool_call>\n'
        '{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>')
SCRIPT = {"default": {"text": "Echo: {last}", "token_ms": 0},
          "replies": [{"match": "weather", "text": CALL, "token_ms": 0},
                      {"role": "tool", "match": "sunny", "text": "It is sunny in Paris.",
                       "token_ms": 0}]}
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}
ANTHROPIC_WEATHER = {"name": "get_weather", "description": "The weather in a city.",
                     "input_schema": WEATHER["function"]["parameters"]}  # type: ignore[index]
ASK = "What is the weather in Paris?"
ROUTES: list[tuple[str, dict[str, Any]]] = [
          ("/v1/chat/completions", {"model": "", "messages": [{"role": "user", "content": "x"}]}),
          ("/v1/completions", {"model": "", "prompt": "x"}),
          ("/v1/responses", {"model": "", "input": "x"}),
          ("/v1/messages", {"model": "", "max_tokens": 5,
                            "messages": [{"role": "user", "content": "x"}]}),
          ("/v1/messages/count_tokens", {"model": "",
                                         "messages": [{"role": "user", "content": "x"}]}),
          ("/v1/embeddings", {"model": "", "input": "x"})]


@pytest.fixture(scope="module")
def engine(bundled_model: Path, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[EngineClient]:
    with fake_qwen3_engine(bundled_model, tmp_path_factory.mktemp("fake-qwen3"), SCRIPT) as client:
        yield client


@pytest.fixture(scope="module")
def served(engine: EngineClient) -> Iterator[Served]:
    with serving(engine, max_body_bytes=64 * 1024) as s:
        yield s




# ---- OpenAI: tools and reasoning ---------------------------------------------------------------
def test_a_tool_call_comes_back_as_tool_calls_and_its_result_is_read_back(
        oai: openai.OpenAI) -> None:
    asked: list[Any] = [{"role": "user", "content": ASK}]
    reply = oai.chat.completions.create(model="", messages=asked, tools=[WEATHER])  # type: ignore[list-item]
    (choice,) = reply.choices
    assert choice.finish_reason == "tool_calls"
    (call,) = choice.message.tool_calls or []
    assert call.function.name == "get_weather"  # type: ignore[union-attr]
    assert json.loads(call.function.arguments) == {"city": "Paris"}  # type: ignore[union-attr]
    assert choice.message.content is None
    assert choice.message.model_extra == {"reasoning_content": "The user wants the weather."}
    history = [*asked, choice.message.model_dump(exclude_none=True),
               {"role": "tool", "tool_call_id": call.id, "content": "sunny, 21 °C"}]
    answer = oai.chat.completions.create(model="", messages=history, tools=[WEATHER])
    assert answer.choices[0].message.content == "It is sunny in Paris."
    assert answer.choices[0].finish_reason == "stop"


def test_a_streamed_tool_call_arrives_as_deltas(oai: openai.OpenAI) -> None:
    chunks = list(oai.chat.completions.create(
        model="", messages=[{"role": "user", "content": ASK}], tools=[WEATHER],  # type: ignore[list-item]
        stream=True, stream_options={"include_usage": True}))
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    calls = [t for d in deltas for t in d.tool_calls or []]
    assert [(t.index, t.function.name) for t in calls] == [(0, "get_weather")]  # type: ignore[union-attr]
    assert json.loads(calls[0].function.arguments) == {"city": "Paris"}  # type: ignore[union-attr, arg-type]
    thought = "".join((d.model_extra or {}).get("reasoning_content", "") for d in deltas)
    assert thought.strip() == "The user wants the weather."
    assert "<tool_call>" not in "".join(d.content or "" for d in deltas)
    assert chunks[-2].choices[0].finish_reason == "tool_calls"
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0


def test_without_tools_the_markup_is_text_and_tool_choice_none_offers_none(
        oai: openai.OpenAI) -> None:
    for extra in ({}, {"tools": [WEATHER], "tool_choice": "none"}):
        reply = oai.chat.completions.create(
            model="", messages=[{"role": "user", "content": ASK}], **extra)  # type: ignore[arg-type]
        assert "<tool_call>" in (reply.choices[0].message.content or "")
        assert reply.choices[0].finish_reason == "stop"


@pytest.mark.parametrize(("fields", "param"), [
    ({"tool_choice": "required"}, "tool_choice"),
    ({"tool_choice": {"type": "function", "function": {"name": "get_time"}},
      "tools": [WEATHER]}, "tool_choice.function.name"),
    ({"tools": [{**WEATHER, "function": {**WEATHER["function"], "strict": True}}]},
     "tools[0].function.strict"),
    ({"logit_bias": {"15": 100.5}}, "logit_bias.15"),
    ({"reasoning_effort": "high"}, "reasoning_effort"),
    ({"frobnicate": 1}, "frobnicate"),
    ({"tools": [{"type": "function", "function": {"name": "no spaces"}}]},
     "tools[0].function.name"),
    ({"messages": [{"role": "user", "content": "x", "name": "bob"}]}, "messages[0].name"),
])
def test_what_cannot_be_honoured_is_refused_by_name(served: Served, fields: dict[str, Any],
                                                     param: str) -> None:
    body = {"model": "", "messages": [{"role": "user", "content": "x"}], **fields}
    response = request(served.port, "POST", "/v1/chat/completions", body)
    assert response.status == 400, response.body
    assert response.json()["error"]["param"] == param


def test_an_unknown_model_is_a_404_in_both_dialects(
        oai: openai.OpenAI, claude: anthropic.Anthropic) -> None:
    with pytest.raises(openai.NotFoundError, match="gpt-4o"):
        oai.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "x"}])
    with pytest.raises(anthropic.NotFoundError, match="claude"):
        claude.messages.create(model="claude-sonnet-4-5", max_tokens=5,
                               messages=[{"role": "user", "content": "x"}])


# ---- Anthropic ----------------------------------------------------------------------------------
def test_anthropic_messages_with_a_system_prompt(claude: anthropic.Anthropic) -> None:
    message = claude.messages.create(model="", max_tokens=50, system="Be brief.",
                                     messages=[{"role": "user", "content": "hello there"}])
    assert [b.type for b in message.content] == ["text"]
    assert message.content[0].text == "Echo: hello there"  # type: ignore[union-attr]
    assert message.stop_reason == "end_turn" and message.role == "assistant"
    assert message.usage.output_tokens == 3 and message.usage.input_tokens > 0
    cut = claude.messages.create(model="", max_tokens=1,
                                 messages=[{"role": "user", "content": "hello there"}])
    assert cut.stop_reason == "max_tokens"


def test_anthropic_tool_use_round_trip(claude: anthropic.Anthropic) -> None:
    asked: list[Any] = [{"role": "user", "content": ASK}]
    message = claude.messages.create(model="", max_tokens=200, messages=asked,
                                     tools=[ANTHROPIC_WEATHER])  # type: ignore[list-item]
    assert [b.type for b in message.content] == ["thinking", "tool_use"]
    thinking, use = message.content
    assert thinking.thinking == "The user wants the weather."  # type: ignore[union-attr]
    assert (use.name, use.input) == ("get_weather", {"city": "Paris"})  # type: ignore[union-attr]
    assert message.stop_reason == "tool_use"
    history = [*asked, {"role": "assistant", "content": [b.model_dump() for b in message.content]},
               {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id,  # type: ignore[union-attr]
                                             "content": "sunny, 21 °C"}]}]
    answer = claude.messages.create(model="", max_tokens=200, messages=history,
                                    tools=[ANTHROPIC_WEATHER])  # type: ignore[list-item]
    assert answer.content[0].text == "It is sunny in Paris."  # type: ignore[union-attr]


def test_anthropic_streaming_events_build_the_same_message(claude: anthropic.Anthropic) -> None:
    with claude.messages.stream(model="", max_tokens=200, tools=[ANTHROPIC_WEATHER],  # type: ignore[list-item]
                                messages=[{"role": "user", "content": ASK}]) as stream:
        kinds = [event.type for event in stream]
        message = stream.get_final_message()
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    assert "thinking" in kinds and "input_json" in kinds
    assert [b.type for b in message.content] == ["thinking", "tool_use"]
    assert message.content[1].input == {"city": "Paris"}  # type: ignore[union-attr]
    assert message.stop_reason == "tool_use" and message.usage.output_tokens > 0
    with claude.messages.stream(model="", max_tokens=50,
                                messages=[{"role": "user", "content": "hi you"}]) as stream:
        assert stream.get_final_text() == "Echo: hi you"


def test_anthropic_count_tokens(claude: anthropic.Anthropic) -> None:
    short = claude.messages.count_tokens(model="", messages=[{"role": "user", "content": "a"}])
    longer = claude.messages.count_tokens(
        model="", system="Be brief.", messages=[{"role": "user", "content": "a b c d e"}])
    assert 0 < short.input_tokens < longer.input_tokens


@pytest.mark.parametrize(("fields", "param"), [
    ({"max_tokens": None}, "max_tokens"),
    ({"tool_choice": {"type": "tool", "name": "nope"}, "tools": [ANTHROPIC_WEATHER]},
     "tool_choice"),
    ({"tool_choice": {"type": "any"}}, "tool_choice"),
    ({"thinking": {"type": "sometimes"}}, "thinking.type"),
    ({"tools": [{"type": "web_search_20250305", "name": "web_search"}]}, "tools[0].type"),
    ({"messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]},
     "messages[0].content[0].source"),  # an image needs a base64 source
    ({"messages": [{"role": "assistant", "content": [{"type": "image", "source": {}}]}]},
     "messages[0].content[0]"),  # and comes from the user
    ({"container": "x"}, "container"),
])
def test_anthropic_refuses_what_it_cannot_honour_by_name(
        served: Served, fields: dict[str, Any], param: str) -> None:
    body = {"model": "", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}],
            **fields}
    response = request(served.port, "POST", "/v1/messages",
                       {k: v for k, v in body.items() if v is not None})
    assert response.status == 400, response.body
    error = response.json()
    assert error["type"] == "error" and error["error"]["param"] == param


# ---- one security middleware on every route -----------------------------------------------------
@pytest.mark.parametrize(("path", "body"), ROUTES)
def test_every_route_refuses_a_foreign_host_an_origin_a_huge_body_and_bad_json(
        served: Served, path: str, body: dict[str, Any]) -> None:
    assert request(served.port, "POST", path, body,
                   headers={"Host": "evil.example"}).status == 403
    assert request(served.port, "POST", path, body,
                   headers={"Origin": "https://evil.example"}).status == 403
    huge = json.dumps({**body, "system": "x" * 100_000}).encode()
    assert request(served.port, "POST", path, huge).status == 413
    bad = request(served.port, "POST", path, b"{not json")
    assert bad.status == 400 and bad.json()["error"]["code"] == "invalid_json"
    assert request(served.port, "POST", path, body).status == 200


def test_anthropic_clients_send_the_token_as_x_api_key(engine: EngineClient) -> None:
    with serving(engine, token=TOKEN) as s:
        for key in ("wrong", ""):
            response = request(s.port, "POST", "/v1/messages", ROUTES[2][1],
                               headers={"x-api-key": key} if key else {})
            assert response.status == 401
        with anthropic.Anthropic(base_url=s.url, api_key=TOKEN, max_retries=0) as good:
            assert good.messages.create(model="", max_tokens=5,
                                        messages=[{"role": "user", "content": "x"}]).content


# ---- Ollama -------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def ollama_served(engine: EngineClient) -> Iterator[Served]:
    with serving(engine, max_body_bytes=64 * 1024, ollama=True) as s:
        yield s


@pytest.fixture(scope="module")
def olla(ollama_served: Served) -> Iterator[ollama.Client]:
    with ollama.Client(host=ollama_served.url) as client:
        yield client


@pytest.fixture(scope="module")
def model(olla: ollama.Client) -> str:
    """Ollama's clients need a name: the one /api/tags lists."""
    return olla.list().models[0].model or ""


def test_ollama_routes_are_off_unless_turned_on(served: Served) -> None:
    assert request(served.port, "GET", "/api/tags").status == 404


def test_ollama_lists_and_shows_the_model(ollama_served: Served, olla: ollama.Client) -> None:
    client = olla
    (listed,) = client.list().models
    shown = client.show(listed.model or "")
    assert set(shown.capabilities or []) == {"completion", "tools", "thinking"}
    assert [m.model for m in client.ps().models] == [listed.model]
    assert request(ollama_served.port, "GET", "/api/version").json()["version"]


def test_ollama_chat_tool_round_trip_streamed_and_not(olla: ollama.Client, model: str) -> None:
    client = olla
    asked: list[Any] = [{"role": "user", "content": ASK}]
    reply = client.chat(model=model, messages=asked, tools=[WEATHER], stream=False)
    (call,) = reply.message.tool_calls or []
    assert (call.function.name, dict(call.function.arguments)) == ("get_weather",
                                                                   {"city": "Paris"})
    assert reply.message.thinking == "The user wants the weather." and reply.done
    parts = list(client.chat(model=model, messages=asked, tools=[WEATHER], stream=True))
    assert [c.function.name for p in parts for c in p.message.tool_calls or []] == [
        "get_weather"]
    assert parts[-1].done and parts[-1].done_reason == "stop" and parts[-1].eval_count
    history = [*asked, reply.message,
               {"role": "tool", "tool_name": "get_weather", "content": "sunny, 21 °C"}]
    answer = client.chat(model=model, messages=history, tools=[WEATHER], stream=False)
    assert answer.message.content == "It is sunny in Paris."


def test_ollama_generate_streams_ndjson(olla: ollama.Client, model: str) -> None:
    client = olla
    parts = list(client.generate(model=model, prompt="hi you", options={"seed": 3},
                                 stream=True))
    assert "".join(p.response for p in parts) == "Echo: hi you" and parts[-1].done


def test_ollama_refuses_what_is_not_there(ollama_served: Served, olla: ollama.Client,
                                         model: str) -> None:
    client = olla
    with pytest.raises(ollama.ResponseError) as caught:
        client.chat(model="no-such-model", messages=[{"role": "user", "content": "x"}])
    assert caught.value.status_code == 404 and "no-such-model" in caught.value.error
    for path, body in (("/api/chat", {"messages": [{"role": "user", "content": "x"}]}),
                       ("/api/generate", {"prompt": "x"}), ("/api/embed", {"input": "x"}),
                       ("/api/embeddings", {"prompt": "x"})):
        assert request(ollama_served.port, "POST", path, body,
                       headers={"Host": "evil.example"}).status == 403
        assert request(ollama_served.port, "POST", path, body,
                       headers={"Origin": "https://evil.example"}).status == 403
        assert request(ollama_served.port, "POST", path, b"{not json").status == 400
        huge = json.dumps({**body, "system": "x" * 100_000}).encode()
        assert request(ollama_served.port, "POST", path, huge).status == 413
        assert request(ollama_served.port, "POST", path, {**body, "nope": 1}).status == 400


# ---- embeddings -------------------------------------------------------------------------------
def test_openai_embeddings_float_and_base64_with_the_warning(served: Served) -> None:
    with openai.OpenAI(base_url=served.base_url, api_key="x", max_retries=0) as api:
        raw = api.embeddings.with_raw_response.create(model="", input=["a", "b", "a"])
        assert "not an embedding model" in raw.headers["x-inglenook-warning"].lower()
        made = raw.parse()  # the client asks for base64 and decodes it
        vectors = [d.embedding for d in made.data]
        assert len(vectors) == 3 and len(vectors[0]) == 8 and vectors[0] == vectors[2]
        assert abs(sum(v * v for v in vectors[1]) - 1) < 1e-5 and made.usage.total_tokens
        floats = api.embeddings.create(model="", input="a", encoding_format="float")
        assert floats.data[0].embedding == pytest.approx(vectors[0], abs=1e-6)
        tokens = api.embeddings.create(model="", input=[[1, 2, 3], [4]])
        assert len(tokens.data) == 2
        for bad, param in (({"dimensions": 3}, "dimensions"), ({"user": 3}, "user")):
            with pytest.raises(openai.BadRequestError, match=param):
                api.embeddings.create(model="", input="a", **bad)  # type: ignore[arg-type]
        with pytest.raises(openai.BadRequestError, match="too long"):
            api.embeddings.create(model="", input="x" * 2000)  # OpenAI cuts nothing
        assert api.embeddings.create(model="", input="a", dimensions=8).data
    for body in ({"input": []}, {"input": ["a", [1]]}, {"input": "a", "encoding_format": "hex"},
                 {"input": "a", "nope": 1}):
        assert request(served.port, "POST", "/v1/embeddings", body).status == 400
    assert any(r.route == "/v1/embeddings" and r.prompt_tokens and r.status == 200
               for r in served.server.board.get().recent)


def test_ollama_embed_and_the_older_embeddings(olla: ollama.Client, model: str) -> None:
    made = olla.embed(model=model, input=["a", "b"])
    assert len(made.embeddings) == 2 and len(made.embeddings[0]) == 8
    assert olla.embed(model=model, input="x" * 2000).embeddings  # Ollama cuts by default
    with pytest.raises(ollama.ResponseError, match="too long") as caught:
        olla.embed(model=model, input="x" * 2000, truncate=False)
    assert caught.value.status_code == 400
    legacy = olla.embeddings(model=model, prompt="a")
    assert list(legacy.embedding) == pytest.approx(made.embeddings[0], abs=1e-6)


# ---- OpenAI Responses ---------------------------------------------------------------------------
RESPONSES_WEATHER: Any = {"type": "function", "name": "get_weather",
                          "parameters": WEATHER["function"]["parameters"]}  # type: ignore[index]


def test_responses_tool_call_round_trip(oai: openai.OpenAI) -> None:
    first = oai.responses.create(model="", input=ASK, instructions="Be brief.",
                                 tools=[RESPONSES_WEATHER], store=False)
    assert [item.type for item in first.output] == ["reasoning", "function_call"]
    call = first.output[1]
    assert (call.name, json.loads(call.arguments)) == ("get_weather", {"city": "Paris"})  # type: ignore[union-attr]
    assert first.status == "completed" and first.usage and first.usage.output_tokens > 0
    history: list[Any] = [{"role": "user", "content": ASK}, call.model_dump(exclude_none=True),
                          {"type": "function_call_output", "call_id": call.call_id,  # type: ignore[union-attr]
                           "output": "sunny, 21 °C"}]
    answer = oai.responses.create(model="", input=history, tools=[RESPONSES_WEATHER],
                                  store=False)
    assert answer.output_text == "It is sunny in Paris."


def test_responses_stream_events(oai: openai.OpenAI) -> None:
    events = list(oai.responses.create(model="", input="hello there", stream=True, store=False))
    kinds = [e.type for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed"
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")  # type: ignore[union-attr]
    assert text == "Echo: hello there"
    assert events[-1].response.output_text == "Echo: hello there"  # type: ignore[union-attr]
    with oai.responses.stream(model="", input=ASK, tools=[RESPONSES_WEATHER],
                              store=False) as stream:
        final = stream.get_final_response()
    assert [item.type for item in final.output] == ["reasoning", "function_call"]


def test_responses_continue_from_a_kept_response(oai: openai.OpenAI) -> None:
    first = oai.responses.create(model="", input="hello there", instructions="Be brief.")
    alone = oai.responses.create(model="", input="and again", store=False)
    second = oai.responses.create(model="", input="and again", previous_response_id=first.id)
    assert second.output_text == "Echo: and again"
    # The fake engine counts words + 4 per turn: the first exchange (without its instructions,
    # which are not carried over), then this input.
    assert first.usage and alone.usage and second.usage
    assert second.usage.input_tokens == (2 + 4) + (3 + 4) + alone.usage.input_tokens
    third = oai.responses.create(model="", input="once more", previous_response_id=second.id,
                                 stream=False)
    assert third.usage and third.usage.input_tokens == second.usage.input_tokens + 7 + 6
    with pytest.raises(openai.BadRequestError, match="not found"):  # store: false keeps nothing
        oai.responses.create(model="", input="x", previous_response_id=alone.id)


def test_a_kept_response_is_its_principals_only_and_the_store_is_bounded(tmp_path: Path
                                                                        ) -> None:
    from inglenook.server.response_store import ResponseStore

    def said(text: str) -> list[dict[str, Any]]:
        return [{"type": "message", "role": "user", "content": text}]

    store = ResponseStore(tmp_path / "r.db", max_responses=2, max_chars=150, max_principals=2)
    store.put("api-token:1", "a", said("hi"), 1, {})
    assert store.get("api-token:2", "a") is None and store.get("api-token:1", "a")
    store.put("p", "b", said("x" * 60), 1, {})
    store.put("p", "c", said("y" * 60), 1, {})  # over 150 characters: p's oldest go
    assert store.get("p", "b") is None and store.get("p", "c")
    store.put("p", "d", [], 0, {})
    store.put("p", "e", [], 0, {})  # over 2 responses: p's oldest go, never another's
    assert store.get("p", "c") is None and store.get("api-token:1", "a") and len(store) == 3
    store.put("q", "f", [], 0, {})  # a third principal: the shelf used least recently goes
    assert store.get("p", "d") is None and store.get("api-token:1", "a")
    store.close()
    again = ResponseStore(tmp_path / "r.db")  # the profile's file: a restart keeps them
    assert again.get("api-token:1", "a") == said("hi") and again.get("q", "f") == []
    assert again.delete("q", "f") and again.get("q", "f") is None and not again.delete("q", "f")


@pytest.mark.parametrize(("fields", "param"), [
    ({"previous_response_id": "resp_1"}, "previous_response_id"),  # never made
    ({"store": "yes"}, "store"),
    ({"background": True}, "background"),
    ({"tools": [{"type": "web_search"}]}, "tools[0].type"),
    ({"tool_choice": "required"}, "tool_choice"),
    ({"input": [{"type": "input_image", "image_url": "x"}]}, "input[0]"),
])
def test_responses_refuse_what_they_cannot_honour(served: Served, fields: dict[str, Any],
                                                  param: str) -> None:
    response = request(served.port, "POST", "/v1/responses",
                       {"model": "", "input": "x", **fields})
    assert response.status == 400 and response.json()["error"]["param"] == param


def test_anthropic_and_responses_force_calls_as_openai_does() -> None:
    from inglenook.core.messages import ForcedCall
    from inglenook.server.anthropic import parse_messages
    from inglenook.server.openai_responses import parse_responses

    asked = {"model": "", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}],
             "tools": [ANTHROPIC_WEATHER]}
    name = ANTHROPIC_WEATHER["name"]
    assert parse_messages({**asked, "tool_choice": {"type": "any"}}).forced_call == ForcedCall()
    one = parse_messages({**asked, "tool_choice": {"type": "tool", "name": name,
                                                   "disable_parallel_tool_use": True}})
    assert one.forced_call == ForcedCall(name, False) and not one.parallel_tool_calls
    body = {"model": "", "input": "x", "tools": [RESPONSES_WEATHER]}
    assert parse_responses({**body, "tool_choice": "required"}).forced_call == ForcedCall()
    named = parse_responses({**body, "parallel_tool_calls": False, "tool_choice": {
        "type": "function", "name": RESPONSES_WEATHER["name"]}})
    assert named.forced_call == ForcedCall(RESPONSES_WEATHER["name"], False)


def test_ollamas_format_becomes_the_replys_format() -> None:
    from inglenook.server import ollama as dialect

    def call(fmt: object) -> str:
        body = {"model": "m", "messages": [{"role": "user", "content": "x"}], "format": fmt}
        return dialect.parse_chat(body).reply_format

    assert call("") == "" and call("json") == "json"
    assert json.loads(call({"type": "object"})) == {"type": "object"}
    with pytest.raises(ApiError) as refused:
        call("yaml")
    assert refused.value.param == "format"
