"""Tools through the API on the real engine: the bundled model with Qwen3's chat template (as
a copy of the model would have it), through the official openai and anthropic clients. The
tiny model need not call a tool; what is proved is that the tools and a whole tool round trip
(the assistant's call, the tool's result) reach the template the engine renders."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import jsonschema
import openai
import pytest

from inglenook.core.load import LoadParams
from inglenook.engine.client import EngineClient
from tests.helpers.api import Served, serving
from tests.templates import QWEN3

pytestmark = pytest.mark.integration
SAMPLING: dict[str, Any] = {"temperature": 0, "seed": 42}
PARAMETERS = {"type": "object", "properties": {"city": {"type": "string"}}}
TOOL: Any = {"type": "function", "function": {"name": "get_weather",
                                              "description": "The weather in a city.",
                                              "parameters": PARAMETERS}}
ASK = "What is the weather in Paris?"


@pytest.fixture(scope="module")
def served(bundled_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    client = EngineClient(log_path=tmp_path_factory.mktemp("logs") / "engine.log")
    client.load(LoadParams(str(bundled_model), n_ctx=2048, chat_template=QWEN3))
    with serving(client) as s:
        yield s
    client.close()


def test_openai_tools_and_a_tool_round_trip_reach_the_template(served: Served) -> None:
    with openai.OpenAI(base_url=served.base_url, api_key="x", max_retries=0) as api:
        def prompt_tokens(messages: list[Any], **extra: Any) -> int:
            reply = api.chat.completions.create(model="", messages=messages, max_tokens=2,
                                                extra_body=SAMPLING, **extra)
            assert reply.usage is not None
            return reply.usage.prompt_tokens

        asked: list[Any] = [{"role": "user", "content": ASK}]
        bare = prompt_tokens(asked)
        offered = prompt_tokens(asked, tools=[TOOL])
        assert offered > bare + 40  # the tool's spec and the instructions around it
        called = [*asked, {"role": "assistant", "content": None, "tool_calls": [{
            "id": "call0", "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
            {"role": "tool", "tool_call_id": "call0", "content": "sunny"}]
        assert prompt_tokens(called, tools=[TOOL]) > offered + 15


def test_anthropic_tools_and_a_tool_round_trip_reach_the_template(served: Served) -> None:
    tool: Any = {"name": "get_weather", "description": "The weather in a city.",
                 "input_schema": PARAMETERS}
    with anthropic.Anthropic(base_url=served.url, api_key="x", max_retries=0) as api:
        def input_tokens(messages: list[Any], **extra: Any) -> int:
            with api.messages.stream(model="", max_tokens=2, messages=messages,
                                     **extra) as stream:
                message = stream.get_final_message()
            return message.usage.input_tokens + (message.usage.cache_read_input_tokens or 0)

        asked: list[Any] = [{"role": "user", "content": ASK}]
        offered = input_tokens(asked, tools=[tool])
        assert offered > input_tokens(asked) + 40
        called = [*asked, {"role": "assistant", "content": [
            {"type": "tool_use", "id": "call0", "name": "get_weather",
             "input": {"city": "Paris"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call0",
                                          "content": "sunny"}]}]
        assert input_tokens(called, tools=[tool]) > offered + 15
        counted = api.messages.count_tokens(model="", messages=asked, tools=[tool])
        assert abs(counted.input_tokens - offered) <= 2  # the same prompt, counted


def test_tool_choice_required_or_named_is_always_a_valid_call(served: Served) -> None:
    """A grammar made from the tools' schemas, in the hermes shape the template teaches."""
    zone = {"type": "object", "properties": {"zone": {"type": "string", "maxLength": 20}},
            "required": ["zone"]}
    tools: Any = [TOOL, {"type": "function", "function": {"name": "get_time",
                                                          "parameters": zone}}]
    asked: Any = [{"role": "user", "content": ASK}]
    with openai.OpenAI(base_url=served.base_url, api_key="x", max_retries=0) as api:
        reply = api.chat.completions.create(model="", messages=asked, tools=tools,
                                            tool_choice="required", parallel_tool_calls=False,
                                            extra_body=SAMPLING)
        choice = reply.choices[0]
        assert choice.finish_reason == "tool_calls" and choice.message.tool_calls is not None
        (call,) = choice.message.tool_calls
        assert call.function.name in ("get_weather", "get_time")  # type: ignore[union-attr]
        streamed = [c.choices[0].delta for c in api.chat.completions.create(
            model="", messages=asked, tools=tools, temperature=1, seed=3, stream=True,
            tool_choice={"type": "function", "function": {"name": "get_time"}},
            parallel_tool_calls=False) if c.choices]
        calls = [t for d in streamed for t in d.tool_calls or []]
        assert [c.function.name for c in calls] == ["get_time"]  # type: ignore[union-attr]
        jsonschema.validate(json.loads(calls[0].function.arguments), zone)  # type: ignore[union-attr, arg-type]
        strict = {"type": "function", "function": {
            "name": "count", "strict": True,
            "parameters": {"type": "object", "properties": {"n": {"minimum": 0}}}}}
        with pytest.raises(openai.BadRequestError, match="minimum") as refused:
            api.chat.completions.create(model="", messages=asked, tools=[strict],
                                        tool_choice="required")
        assert refused.value.body["param"] == "tools"  # type: ignore[index]
