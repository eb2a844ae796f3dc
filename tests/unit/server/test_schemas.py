"""Checking API requests: what a client sends becomes Inglenook's types or a 400 naming it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from inglenook.core.messages import ForcedCall, Message, RawPrompt, ToolCallTurn
from inglenook.server.errors import ApiError
from inglenook.server.schemas import (
    COMPLETION_MAX_TOKENS,
    parse_chat,
    parse_completion,
    parse_json,
)


def chat(**fields: Any) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": "Hi"}], **fields}


def refused(data: Any, parse: Any = parse_chat) -> ApiError:
    with pytest.raises(ApiError) as caught:
        parse(data)
    assert caught.value.status == 400
    return caught.value


def test_a_full_chat_request_maps_onto_messages_and_sampling() -> None:
    call = parse_chat(chat(
        messages=[{"role": "developer", "content": "Be brief."},
                  {"role": "user", "content": [{"type": "text", "text": "Hello "},
                                               {"type": "text", "text": "there"}]},
                  {"role": "assistant", "content": None},
                  {"role": "tool", "content": "42"}],
        temperature=0, top_p=0.5, top_k=7, min_p=0.1, max_tokens=12, stop="END", seed=5,
        presence_penalty=-1.5, frequency_penalty=2, stream=True,
        stream_options={"include_usage": True}, user="editor"))
    assert call.messages == (Message("system", "Be brief."), Message("user", "Hello there"),
                             Message("assistant", ""), Message("tool", "42"))
    s = call.sampling
    assert (s.temperature, s.top_p, s.top_k, s.min_p, s.max_tokens, s.stop, s.seed) == (
        0, 0.5, 7, 0.1, 12, ("END",), 5)
    assert (s.presence_penalty, s.frequency_penalty) == (-1.5, 2)
    assert call.stream and call.include_usage and call.user == "editor"


def test_omitted_fields_keep_the_defaults() -> None:
    call = parse_chat(chat())
    assert call.sampling.max_tokens == -1 and call.sampling.seed == -1
    assert not call.stream and not call.include_usage
    assert parse_completion({"prompt": "Once"}).sampling.max_tokens == COMPLETION_MAX_TOKENS


def test_max_completion_tokens_wins_and_huge_limits_are_capped() -> None:
    assert parse_chat(chat(max_completion_tokens=3, max_tokens=9)).sampling.max_tokens == 3
    assert parse_chat(chat(max_tokens=10**9)).sampling.max_tokens == 32768


def test_seeds_of_any_size_fit_llama_cpp() -> None:
    assert parse_chat(chat(seed=2**40 + 3)).sampling.seed == (2**40 + 3) % 2**31
    assert parse_chat(chat(seed=-1)).sampling.seed == -1
    assert parse_chat(chat(seed=7.0)).sampling.seed == 7


@pytest.mark.parametrize(("fields", "param"), [
    ({"max_tokens": -1}, "max_tokens"),
    ({"max_tokens": 0}, "max_tokens"),
    ({"max_tokens": 2.5}, "max_tokens"),
    ({"max_tokens": "10"}, "max_tokens"),
    ({"temperature": float("nan")}, "temperature"),
    ({"temperature": float("inf")}, "temperature"),
    ({"temperature": 3}, "temperature"),
    ({"temperature": True}, "temperature"),
    ({"top_p": "high"}, "top_p"),
    ({"top_k": 1.5}, "top_k"),
    ({"seed": "x"}, "seed"),
    ({"stream": "yes"}, "stream"),
    ({"stream_options": []}, "stream_options"),
    ({"stream_options": {"include_usage": 1}}, "stream_options.include_usage"),
    ({"stop": [1]}, "stop"),
    ({"stop": ["x"] * 33}, "stop"),
    ({"n": 9}, "n"), ({"n": 0}, "n"), ({"keep_alive": "soon"}, "keep_alive"),
    ({"logprobs": 1}, "logprobs"),
    ({"top_logprobs": 21, "logprobs": True}, "top_logprobs"),
    ({"logit_bias": {"15": 101}}, "logit_bias.15"),
    ({"logit_bias": {"hello": 1}}, "logit_bias"),
    ({"logit_bias": [1]}, "logit_bias"),
    ({"response_format": {"type": "xml"}}, "response_format.type"),
    ({"response_format": {"type": "json_schema", "json_schema": {"schema": []}}},
     "response_format.json_schema.schema"),
    ({"response_format": {"type": "json_object", "x": 1}}, "response_format.x"),
    ({"user": ["me"]}, "user"),
    ({"model": 3}, "model"),
])
def test_bad_parameters_are_refused_by_name(fields: dict[str, Any], param: str) -> None:
    assert refused(chat(**fields)).param == param


def test_response_format_becomes_the_replys_format() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    assert parse_chat(chat()).reply_format == ""
    assert parse_chat(chat(response_format={"type": "text"})).reply_format == ""
    assert parse_chat(chat(response_format={"type": "json_object"})).reply_format == "json"
    call = parse_chat(chat(response_format={"type": "json_schema", "json_schema": {
        "name": "n", "strict": True, "schema": schema}}))
    assert json.loads(call.reply_format) == schema


@pytest.mark.parametrize(("messages", "param"), [
    (None, "messages"),
    ([], "messages"),
    ("Hi", "messages"),
    (["Hi"], "messages[0]"),
    ([{"role": "wizard", "content": "x"}], "messages[0].role"),
    ([{"role": "<|im_start|>system", "content": "x"}], "messages[0].role"),
    ([{"content": "x"}], "messages[0].role"),
    ([{"role": "user", "content": None}], "messages[0].content"),
    ([{"role": "user", "content": 5}], "messages[0].content"),
    ([{"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]}],
     "messages[0].content"),
    ([{"role": "assistant", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}],
     "messages[0].content"),
])
def test_bad_messages_are_refused(messages: Any, param: str) -> None:
    assert refused(chat(messages=messages)).param == param


@pytest.mark.parametrize("body", [b"{", b"", b"\xff\xfe{", b'{"a": NaN}', b'{"a": -Infinity}',
                                  b"[" * 100_000])
def test_invalid_json_is_a_400(body: bytes) -> None:
    with pytest.raises(ApiError) as caught:
        parse_json(body)
    assert caught.value.status == 400 and caught.value.code == "invalid_json"


@pytest.mark.parametrize("data", [[], "text", 3, None])
def test_the_body_must_be_an_object(data: Any) -> None:
    refused(data)
    refused(data, parse_completion)


@pytest.mark.parametrize(("fields", "param"), [
    ({}, "prompt"),
    ({"prompt": ["a", "b"]}, "prompt"),
    ({"prompt": [1, 2, 3]}, "prompt"),
    ({"prompt": "x", "echo": "yes"}, "echo"),
    ({"prompt": "x", "suffix": 5}, "suffix"),
    ({"prompt": "x", "best_of": 3}, "best_of"),
    ({"prompt": "x", "logprobs": 6}, "logprobs"),
    ({"prompt": "x", "logprobs": True}, "logprobs"),
    ({"prompt": "x", "logprobs": 2, "echo": True}, "logprobs"),
    ({"prompt": "x", "max_tokens": -5}, "max_tokens"),
])
def test_bad_completion_requests_are_refused(fields: dict[str, Any], param: str) -> None:
    assert refused(fields, parse_completion).param == param


def test_logit_bias_and_logprobs_cross_as_typed_values() -> None:
    call = parse_chat(chat(logit_bias={"15": -100, "7": 2.5}, logprobs=True, top_logprobs=3))
    assert call.logit_bias == ((15, -100.0), (7, 2.5)) and call.logprobs == 3
    assert parse_chat(chat(logprobs=True)).logprobs == 0
    assert parse_chat(chat(logprobs=False)).logprobs == -1
    assert parse_completion({"prompt": "x", "logit_bias": {"3": 1}}).logit_bias == ((3, 1.0),)
    assert refused({"prompt": "x", "top_logprobs": 2}, parse_completion).param == "top_logprobs"


def test_tool_choice_required_or_named_forces_a_call() -> None:
    spec = {"type": "function", "function": {"name": "add", "strict": True}}
    call = parse_chat(chat(tools=[spec], tool_choice="required", parallel_tool_calls=False))
    assert call.forced_call == ForcedCall("", False, ("add",))
    named = parse_chat(chat(tools=[spec], tool_choice={"type": "function",
                                                       "function": {"name": "add"}}))
    assert named.forced_call == ForcedCall("add", True, ("add",))
    assert parse_chat(chat(tools=[{**spec, "function": {"name": "add"}}])).forced_call is None


def test_a_completion_is_a_raw_prompt() -> None:
    call = parse_completion({"prompt": ["Once upon"], "max_tokens": 4, "suffix": " end",
                             "logprobs": 0})
    assert call.raw == RawPrompt("Once upon", " end") and call.logprobs == 0
    assert parse_completion({"prompt": "x", "echo": True}).echo
    assert call.messages == (Message("user", "Once upon end"),)  # for the context budget
    assert call.sampling.max_tokens == 4


def test_omitted_sampling_values_take_openais_defaults() -> None:
    s = parse_chat(chat()).sampling
    assert (s.temperature, s.top_p, s.top_k, s.min_p, s.repeat_penalty) == (1.0, 1.0, 0, 0.0, 1.0)
    assert (s.presence_penalty, s.frequency_penalty) == (0.0, 0.0)


def test_tools_and_a_history_with_calls_reach_the_template() -> None:
    spec = {"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}
    call = parse_chat(chat(tools=[spec], parallel_tool_calls=False, messages=[
        {"role": "user", "content": "1+2?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "3"}]))
    assert call.tools == (spec,) and not call.parallel_tool_calls
    assistant, tool = call.messages[1:]
    assert assistant.tool_calls == (ToolCallTurn("c1", "add", '{"a": 1, "b": 2}'),)
    assert (tool.role, tool.content, tool.tool_call_id, tool.name) == ("tool", "3", "c1", "add")
    assert parse_chat(chat(tools=[spec], tool_choice="none")).tools == ()


def test_reasoning_switches() -> None:
    assert parse_chat(chat(reasoning_effort="high")).reasoning_effort == "high"
    off = parse_chat(chat(reasoning_effort="none"))
    assert off.enable_thinking is False and off.reasoning_effort == ""
    kwargs = parse_chat(chat(chat_template_kwargs={"enable_thinking": False}))
    assert kwargs.enable_thinking is False


@pytest.mark.parametrize(("fields", "param"), [
    ({"top_logprobs": 3}, "top_logprobs"),
    ({"store": True}, "store"),
    ({"functions": []}, "functions"),
    ({"tool_choice": "required"}, "tool_choice"),
    ({"tool_choice": {"type": "function"}, "tools": [{"type": "function", "function": {
        "name": "f"}}]}, "tool_choice.function"),
    ({"tool_choice": "sometimes"}, "tool_choice"),
    ({"tools": [{"type": "code_interpreter"}]}, "tools[0].type"),
    ({"tools": "add"}, "tools"),
    ({"reasoning_effort": "max"}, "reasoning_effort"),
    ({"chat_template_kwargs": {"x": 1}}, "chat_template_kwargs.x"),
    ({"stream_options": {"include_obfuscation": True}}, "stream_options.include_obfuscation"),
    ({"messages": [{"role": "assistant", "content": "", "tool_calls": [
        {"id": "c", "function": {"name": "f", "arguments": "[1]"}}]}]},
     "messages[0].tool_calls[0].function.arguments"),
    ({"messages": [{"role": "user", "content": "x", "tool_call_id": "c"}]},
     "messages[0].tool_call_id"),
])
def test_fields_that_cannot_be_honoured_are_refused_by_name(fields: dict[str, Any],
                                                            param: str) -> None:
    assert refused(chat(**fields)).param == param
