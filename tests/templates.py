"""Chat templates of reasoning and tool-calling models, condensed from the ones published with
the models: each keeps the markers its model writes, how it opens a reply, and how it reads
`tools`, `tool_calls`, `tool` messages, `reasoning_content`, `enable_thinking` and
`reasoning_effort`, without the rest of the prompt. Shared by the unit, GUI and integration
tests (the last write them into copies of the bundled model).
"""

from __future__ import annotations

# Qwen3: <think> blocks, earlier reasoning read back from `reasoning_content` (after the last
# question only), thinking switched off by an empty block, Hermes-style <tool_call> JSON.
QWEN3 = """\
{%- if tools %}<|im_start|>system
{% if messages[0].role == 'system' %}{{ messages[0].content }}

{% endif %}# Tools

You may call one or more functions to assist with the user query.

You are provided with function signatures within <tools></tools> XML tags:
<tools>{% for tool in tools %}
{{ tool | tojson }}{% endfor %}
</tools>

For each function call, return a json object with function name and arguments within \
<tool_call></tool_call> XML tags:
<tool_call>
{"name": <function-name>, "arguments": <args-json-object>}
</tool_call><|im_end|>
{% elif messages[0].role == 'system' %}<|im_start|>system
{{ messages[0].content }}<|im_end|>
{% endif %}
{%- set ns = namespace(last_query_index=messages|length - 1) %}
{%- for message in messages[::-1] %}{% set index = (messages|length - 1) - loop.index0 %}
{%- if message.role == "user" and ns.last_query_index == messages|length - 1 %}\
{% set ns.last_query_index = index %}{% endif %}{% endfor %}
{%- for message in messages %}
{%- if message.role == "user" or (message.role == "system" and not loop.first) %}\
<|im_start|>{{ message.role }}
{{ message.content }}<|im_end|>
{% elif message.role == "assistant" %}
{%- set content = message.content %}{% set reasoning_content = '' %}
{%- if message.reasoning_content is string %}{% set reasoning_content = \
message.reasoning_content %}{% endif %}
{%- if loop.index0 > ns.last_query_index and reasoning_content %}<|im_start|>assistant
<think>
{{ reasoning_content.strip('\\n') }}
</think>

{{ content.lstrip('\\n') }}
{%- else %}<|im_start|>assistant
{{ content }}
{%- endif %}
{%- for tool_call in message.tool_calls or [] %}{% set tool_call = tool_call.function %}
<tool_call>
{"name": "{{ tool_call.name }}", "arguments": {{ tool_call.arguments | tojson }}}
</tool_call>{% endfor %}<|im_end|>
{% elif message.role == "tool" %}<|im_start|>user
<tool_response>
{{ message.content }}
</tool_response><|im_end|>
{% endif %}{% endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% if enable_thinking is defined and enable_thinking is false %}<think>

</think>

{% endif %}{% endif %}"""

# DeepSeek-R1 distills: the generation prompt opens the think block; earlier replies are sent
# without their reasoning (the template cuts anything up to </think>).
DEEPSEEK_R1 = """\
{{ bos_token }}{% set ns = namespace(system='') %}{% for message in messages %}\
{% if message.role == 'system' %}{% set ns.system = message.content %}{% endif %}{% endfor %}\
{{ ns.system }}{% for message in messages %}{% if message.role == 'user' %}\
{{ '<｜User｜>' + message.content }}{% elif message.role == 'assistant' %}\
{% set content = message.content %}{% if '</think>' in content %}\
{% set content = content.split('</think>')[-1] %}{% endif %}\
{{ '<｜Assistant｜>' + content + '<｜end▁of▁sentence｜>' }}{% endif %}{% endfor %}\
{% if add_generation_prompt %}{{ '<｜Assistant｜><think>\\n' }}{% endif %}"""

# Magistral Small (2509): [THINK]…[/THINK] as control tokens; Mistral's `name[ARGS]{…}` calls.
MAGISTRAL = """\
{{ bos_token }}[SYSTEM_PROMPT]First draft your thinking process (inner monologue) until you \
arrive at a response. Write it between [THINK] and [/THINK].\
{% for message in messages %}{% if message.role == 'system' %}

{{ message.content }}{% endif %}{% endfor %}[/SYSTEM_PROMPT]\
{%- for message in messages %}{%- if message.role == "user" %}\
{%- if tools and loop.last %}[AVAILABLE_TOOLS]{{ tools | tojson }}[/AVAILABLE_TOOLS]\
{% endif %}[INST]{{ message.content }}[/INST]\
{%- elif message.role == "assistant" %}{{ message.content }}\
{%- for tool_call in message.tool_calls or [] %}[TOOL_CALLS]{{ tool_call.function.name }}\
[ARGS]{{ tool_call.function.arguments | tojson }}{% endfor %}{{ eos_token }}\
{%- elif message.role == "tool" %}[TOOL_RESULTS]{{ message.content }}[/TOOL_RESULTS]\
{%- endif %}{% endfor %}"""

# gpt-oss (harmony): analysis and final channels, calls to `functions.NAME` on commentary.
GPT_OSS = """\
<|start|>system<|message|>You are ChatGPT, a large language model.
Reasoning: {{ reasoning_effort | default("medium") }}

# Valid channels: analysis, commentary, final. Channel must be included for every message.
{%- if tools %}
Calls to these tools must go to the commentary channel: 'functions'.{% endif %}<|end|>
{%- if tools %}<|start|>developer<|message|># Tools

## functions

namespace functions {
{% for tool in tools %}{% set tool = tool.function %}
// {{ tool.description }}
type {{ tool.name }} = (_: {
{% for name, spec in tool.parameters.properties.items() %}{{ name }}: {{ spec.type }},
{% endfor %}}) => any;
{% endfor %}
} // namespace functions<|end|>{% endif %}
{%- for message in messages %}
{%- if message.role == 'system' %}<|start|>developer<|message|># Instructions

{{ message.content }}<|end|>
{%- elif "tool_calls" in message %}{% set tool_call = message.tool_calls[0].function %}\
<|start|>assistant to=functions.{{ tool_call.name }}<|channel|>commentary json<|message|>\
{{ tool_call.arguments | tojson }}<|call|>
{%- elif message.role == "tool" %}<|start|>functions.{{ message.name }} to=assistant\
<|channel|>commentary<|message|>{{ message.content | tojson }}<|end|>
{%- elif message.role == "assistant" %}<|start|>assistant<|channel|>final<|message|>\
{{ message.content }}<|end|>
{%- else %}<|start|>{{ message.role }}<|message|>{{ message.content }}<|end|>{% endif %}
{%- endfor %}{%- if add_generation_prompt %}<|start|>assistant{% endif %}"""

# The control tokens each family's markup is made of (a copy of the bundled model gets them in
# its own control-token slots 3…, so their embeddings stay valid).
CONTROL_TOKENS = {
    "qwen3": (),  # <think> and <tool_call> are ordinary (user-defined) tokens in Qwen3
    "deepseek-r1": (),  # so are its think tags
    "magistral": ("[THINK]", "[/THINK]", "[TOOL_CALLS]", "[ARGS]", "[INST]", "[/INST]",
                  "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]", "[AVAILABLE_TOOLS]",
                  "[/AVAILABLE_TOOLS]", "[TOOL_RESULTS]", "[/TOOL_RESULTS]"),
    "gpt-oss": ("<|start|>", "<|message|>", "<|end|>", "<|channel|>", "<|constrain|>",
                "<|return|>", "<|call|>"),
}
