"""Which tool-call format a chat template teaches, and the tool definitions, calls and results
rendered the way templates read them.

The templates here are condensed from the real ones (Qwen3, Llama 3.2/3.1, Mistral Nemo and
Small 3.2, gpt-oss, as published with the models): each keeps the markers its model writes and
the way it reads `tools`, `tool_calls` and `tool` messages, without the rest of the prompt.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from jinja2.sandbox import ImmutableSandboxedEnvironment

from inglenook.models.gguf import read_header
from inglenook.tools.catalog import ToolCatalog, ToolInfo
from inglenook.tools.formats import ToolCall, assistant_turn, tool_format, tool_turn
from inglenook.tools.parsers import parse_tool_calls

QWEN3 = """\
{%- if tools %}<|im_start|>system
# Tools
You are provided with function signatures within <tools></tools> XML tags:
<tools>{% for tool in tools %}
{{ tool | tojson }}{% endfor %}
</tools>
For each function call, return a json object with function name and arguments within \
<tool_call></tool_call> XML tags:
<tool_call>
{"name": <function-name>, "arguments": <args-json-object>}
</tool_call><|im_end|>
{% endif %}
{%- for message in messages %}
{%- if message.role == "assistant" %}<|im_start|>assistant
{{ message.content }}
{%- for tool_call in message.tool_calls or [] %}{% set tool_call = tool_call.function %}
<tool_call>
{"name": "{{ tool_call.name }}", "arguments": {{ tool_call.arguments | tojson }}}
</tool_call>{% endfor %}<|im_end|>
{% elif message.role == "tool" %}<|im_start|>user
<tool_response>
{{ message.content }}
</tool_response><|im_end|>
{% else %}<|im_start|>{{ message.role }}
{{ message.content }}<|im_end|>
{% endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% if enable_thinking is defined and enable_thinking is false %}<think>

</think>

{% endif %}{% endif %}"""

LLAMA32 = """\
{%- if not tools is defined %}{% set tools = none %}{% endif %}
<|start_header_id|>system<|end_header_id|>

{% if tools is not none %}Environment: ipython
Respond in the format {"name": function name, "parameters": dictionary of argument name and \
its value}. Do not use variables.

{% for t in tools %}{{ t | tojson }}

{% endfor %}{% endif %}<|eot_id|>
{%- for message in messages %}
{%- if 'tool_calls' in message %}{% set tool_call = message.tool_calls[0].function %}\
<|start_header_id|>assistant<|end_header_id|>

{"name": "{{ tool_call.name }}", "parameters": {{ tool_call.arguments | tojson }}}<|eot_id|>
{%- elif message.role == "tool" %}<|start_header_id|>ipython<|end_header_id|>

{{ message.content }}<|eot_id|>
{%- else %}<|start_header_id|>{{ message.role }}<|end_header_id|>

{{ message.content | trim }}<|eot_id|>
{%- endif %}{% endfor %}
{%- if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>

{% endif %}"""

# Llama 3.1's built-in tools are called after <|python_tag|>; custom ones as in 3.2.
LLAMA31_BUILTIN = """\
{%- if builtin_tools is defined or tools is not none %}Environment: ipython
{% endif %}{%- for message in messages %}{%- if 'tool_calls' in message %}\
{{ "<|start_header_id|>assistant<|end_header_id|>\\n\\n<|python_tag|>" + \
message.tool_calls[0].function.name + ".call()" }}{% endif %}{% endfor %}"""

MISTRAL_NEMO = """\
{%- if not tools is defined %}{% set tools = none %}{% endif %}
{%- for message in messages %}
{%- if message.role == "user" %}
{%- if tools is not none and loop.last %}[AVAILABLE_TOOLS][{% for tool in tools %}\
{% set tool = tool.function %}{"type": "function", "function": {"name": "{{ tool.name }}", \
"description": "{{ tool.description }}", "parameters": {{ tool.parameters | tojson }}}}\
{{ ", " if not loop.last }}{% endfor %}][/AVAILABLE_TOOLS]{% endif %}\
[INST]{{ message.content }}[/INST]
{%- elif message.tool_calls is defined and message.tool_calls is not none %}[TOOL_CALLS][\
{%- for tool_call in message.tool_calls %}
{%- if tool_call.id is not defined or tool_call.id | length != 9 %}\
{{ raise_exception("Tool call IDs should be alphanumeric strings with length 9!") }}{% endif %}\
{"name": "{{ tool_call.function.name }}", \
"arguments": {{ tool_call.function.arguments | tojson }}, "id": "{{ tool_call.id }}"}\
{{ ", " if not loop.last }}{% endfor %}]</s>
{%- elif message.role == "tool" %}
{%- if message.tool_call_id is not defined or message.tool_call_id | length != 9 %}\
{{ raise_exception("Tool call IDs should be alphanumeric strings with length 9!") }}{% endif %}\
[TOOL_RESULTS]{"content": {{ message.content | tojson }}, \
"call_id": "{{ message.tool_call_id }}"}[/TOOL_RESULTS]
{%- else %}{{ message.content }}</s>{% endif %}{% endfor %}"""

MISTRAL_SMALL_32 = """\
{%- for message in messages %}{%- if message.role == "user" %}\
{%- if tools %}[AVAILABLE_TOOLS]{{ tools | tojson }}[/AVAILABLE_TOOLS]{% endif %}\
[INST]{{ message.content }}[/INST]{%- elif message.get('tool_calls') %}\
{%- for tool_call in message.tool_calls %}[TOOL_CALLS]{{ tool_call.function.name }}\
[CALL_ID]{{ tool_call.id }}[ARGS]{{ tool_call.function.arguments | tojson }}{% endfor %}</s>\
{%- elif message.role == "tool" %}[TOOL_RESULTS]{{ message.tool_call_id }}[TOOL_CONTENT]\
{{ message.content }}[/TOOL_RESULTS]{%- else %}{{ message.content }}</s>{% endif %}{% endfor %}"""

GPT_OSS = """\
<|start|>system<|message|>Reasoning: {{ reasoning_effort | default("medium") }}

# Valid channels: analysis, commentary, final. Channel must be included for every message.
{%- if tools %}
Calls to these tools must go to the commentary channel: 'functions'.{% endif %}<|end|>
{%- if tools %}<|start|>developer<|message|># Tools

## functions

namespace functions {
{% for tool in tools %}{% set tool = tool.function %}
// {{ tool.description }}
type {{ tool.name }} = (_: {
{% for name, spec in tool.parameters.properties.items() %}{{ name }}\
{{ "?" if name not in (tool.parameters.required or []) }}: {{ spec.type }},
{% endfor %}}) => any;
{% endfor %}
} // namespace functions<|end|>{% endif %}
{%- for message in messages %}
{%- if "tool_calls" in message %}{% set tool_call = message.tool_calls[0].function %}\
<|start|>assistant to=functions.{{ tool_call.name }}<|channel|>commentary json<|message|>\
{{ tool_call.arguments | tojson }}<|call|>
{%- elif message.role == "tool" %}<|start|>functions.{{ message.name }} to=assistant\
<|channel|>commentary<|message|>{{ message.content | tojson }}<|end|>
{%- else %}<|start|>{{ message.role }}<|message|>{{ message.content }}<|end|>{% endif %}
{%- endfor %}{%- if add_generation_prompt %}<|start|>assistant{% endif %}"""

GEMMA2 = """\
{{ bos_token }}{% for message in messages %}{% if message['role'] == 'assistant' %}\
{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}\
{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}\
{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\\n'}}{% endif %}"""

QWEN3_CODER_XML = """\
{%- if tools %}<tools>{% for tool in tools %}{{ tool | tojson }}{% endfor %}</tools>
<tool_call>
<function=example_function_name>
<parameter=example_parameter_1>value_1</parameter>
</function>
</tool_call>{% endif %}"""


@pytest.mark.parametrize(("source", "expected"), [
    (QWEN3, "hermes"), (LLAMA32, "llama"), (LLAMA31_BUILTIN, "llama"),
    (MISTRAL_NEMO, "mistral"), (MISTRAL_SMALL_32, "mistral"), (GPT_OSS, "harmony"),
    (GEMMA2, None), (QWEN3_CODER_XML, None),
])
def test_the_format_comes_from_the_template(source: str, expected: str | None) -> None:
    assert tool_format(source) == expected


def test_the_bundled_models_template_has_no_tool_support(bundled_model: Path) -> None:
    template = read_header(bundled_model).chat_template
    assert template and tool_format(template) is None


ADD = ToolInfo("calc", "add", "Add two numbers.",
               {"type": "object", "title": "addArguments", "required": ["a", "b"],
                "properties": {"a": {"type": "number"}, "b": {"type": "number"}}})
NOW = ToolInfo("clock", "now", "The time.", {"type": "object"})


def render(source: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)

    def raise_exception(message: str) -> None:
        raise ValueError(message)

    env.globals["raise_exception"] = raise_exception
    return env.from_string(source).render(messages=messages, tools=tools, bos_token="<s>",
                                          add_generation_prompt=True)


def test_tool_definitions_are_openai_function_specs() -> None:
    (spec, no_args) = ToolCatalog([ADD, NOW]).template_tools()
    assert spec == {"type": "function", "function": {
        "name": "add", "description": "Add two numbers.",
        "parameters": {"type": "object", "required": ["a", "b"],
                       "properties": {"a": {"type": "number"}, "b": {"type": "number"}}}}}
    # gpt-oss walks parameters.properties: a tool without arguments still has them
    assert no_args["function"]["parameters"] == {"type": "object", "properties": {}}


CALL = ToolCall("add", {"a": 2, "b": 3}, "Ab3dE6gH9")
CONVERSATION = [{"role": "user", "content": "What is 2 + 3?"},
                assistant_turn("", [CALL]), tool_turn(CALL, "5.0"),
                {"role": "user", "content": "Thanks"}]


@pytest.mark.parametrize(("source", "reply_opens"), [
    (QWEN3, "<|im_start|>assistant\n"),
    (LLAMA32, "<|start_header_id|>assistant<|end_header_id|>\n\n"),
    (MISTRAL_NEMO, "[/INST]"), (MISTRAL_SMALL_32, "[/INST]"),
    (GPT_OSS, "<|start|>assistant"),  # the generation prompt: the header goes on from there
])
def test_tools_calls_and_results_render_through_each_template(
        source: str, reply_opens: str) -> None:
    """What the model sees: the tool's definition, its own earlier call in its own syntax
    (which parses back to the same call: what the model writes after the generation prompt)
    and the result."""
    tools = ToolCatalog([ADD, NOW]).template_tools()
    prompt = render(source, CONVERSATION, tools)
    assert "Add two numbers." in prompt and "5.0" in prompt
    fmt = tool_format(source)
    assert fmt is not None
    reply = prompt.index(reply_opens, prompt.index("What is 2 + 3?")) + len(reply_opens)
    parsed = parse_tool_calls(fmt, prompt[reply:prompt.index("5.0")])
    assert [(c.name, dict(c.arguments)) for c in parsed.calls] == [("add", {"a": 2, "b": 3})]


def test_the_same_tool_name_on_two_servers_gets_the_server_in_front() -> None:
    other = ToolInfo("web", "add", "Add a bookmark.")
    catalog = ToolCatalog([ADD, other, NOW])
    assert catalog.names == ("calc_add", "web_add", "now")
    assert catalog.find("web_add") == other and catalog.find("add") is None
    assert catalog.function_name(NOW) == "now"


def test_names_models_cannot_write_are_cleaned_and_kept_apart() -> None:
    odd = ToolInfo("s", "read file (fast)!")
    long_a = ToolInfo("a", "x" * 80)
    long_b = ToolInfo("b", "x" * 80)
    catalog = ToolCatalog([odd, long_a, long_b])
    assert catalog.find("read_file_fast") == odd
    names = catalog.names
    assert len(set(names)) == 3 and all(len(n) <= 64 for n in names)
    assert sorted((catalog.find(n) for n in names), key=repr) == sorted(
        [odd, long_a, long_b], key=repr)


def test_a_tool_message_names_its_call() -> None:
    assert tool_turn(CALL, "5.0") == {"role": "tool", "content": "5.0",
                                      "tool_call_id": "Ab3dE6gH9", "name": "add"}
    assert json.dumps(assistant_turn("Adding.", [CALL]))  # plain data: storable as JSON
