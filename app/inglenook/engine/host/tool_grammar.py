"""A forced tool call as a grammar: OpenAI's `tool_choice` "required" or a named function,
enforced while sampling in the shape the model's tool-call parser reads (tools/parsers.py),
so the reply is always a call the window's parsers and the API's `tool_calls` can read.

    hermes   `<tool_call>\n{"name": "f", "arguments": {…}}\n</tool_call>`, one or more
    llama    one `{"name": "f", "parameters": {…}}`

The arguments follow the function's JSON schema through llama-cpp-python's converter, as a
reply format does (grammar.py). A keyword the grammar cannot enforce is left to the model,
except in a `strict` function's schema, where it is refused by name (strict is a promise).
A model that thinks first may reason before the call (its own markers, then the call).
"""

from __future__ import annotations

import json
import re
from typing import Any

from inglenook.core.load import ModelInfo
from inglenook.core.messages import ForcedCall, GenerationRequest
from inglenook.core.reasoning import ReasoningFormat
from inglenook.core.reply_format import unenforced
from inglenook.engine.host.grammar import GrammarError, check_size, grammar_for

FORCED_FORMATS = ("hermes", "llama")
_HERMES_OPEN, _HERMES_CLOSE = json.dumps("<tool_call>\n"), json.dumps("\n</tool_call>")
_ROOT = re.compile(r"^root ::=", re.MULTILINE)


def reply_grammar(request: GenerationRequest, info: ModelInfo) -> str:
    """The grammar a reply is sampled under: its forced call's, its format's, or none."""
    forced = request.forced_call
    if forced is None:
        return grammar_for(request.reply_format)
    if request.reply_format:
        raise GrammarError("'response_format' cannot be used with a forced tool call.")
    return tool_call_grammar(request.tools, forced, info.tool_format, info.traits.reasoning)


def gbnf_text(text: str) -> str:
    """`text` as a GBNF string literal."""
    return json.dumps(text)


def call_schema(tool: dict[str, Any], arguments_key: str) -> dict[str, Any]:
    function = tool.get("function", {})
    parameters = function.get("parameters") or {"type": "object", "properties": {}}
    return {"type": "object", "additionalProperties": False,
            "required": ["name", arguments_key],
            "properties": {"name": {"const": function.get("name", "")},
                           arguments_key: parameters}}


def tool_call_grammar(tools: tuple[dict[str, Any], ...], forced: ForcedCall, tool_format: str,
                      reasoning: ReasoningFormat | None) -> str:
    """The GBNF grammar of a reply that calls `forced.name` (or any of `tools`)."""
    from llama_cpp import llama_grammar  # pure Python

    if tool_format not in FORCED_FORMATS:
        raise GrammarError("'tool_choice' cannot force a call with this model: its chat "
                           "template has no tool-call format a grammar can force (hermes or "
                           "llama). Leave it \"auto\".")
    chosen = [t for t in tools if not forced.name or t.get("function", {}).get("name")
              == forced.name]
    if not chosen:
        raise GrammarError(f"'tool_choice' names the function {forced.name!r}, which 'tools' "
                           "does not offer." if forced.name else
                           "'tool_choice' \"required\" needs at least one tool in 'tools'.")
    for tool in chosen:
        name = tool.get("function", {}).get("name", "")
        problems = sorted(set(unenforced(tool["function"].get("parameters") or {})))
        if name in forced.strict and problems:
            raise GrammarError(f"'tools': the strict function {name!r} has a schema a grammar "
                               f"cannot enforce: {', '.join(problems)}.")
    key = "parameters" if tool_format == "llama" else "arguments"
    schemas = [call_schema(t, key) for t in chosen]
    schema = schemas[0] if len(schemas) == 1 else {"anyOf": schemas}
    try:
        body = llama_grammar.json_schema_to_gbnf(json.dumps(schema))
    except (ValueError, KeyError, TypeError, AttributeError, AssertionError,
            RecursionError) as exc:
        raise GrammarError(f"The tools' schemas cannot be turned into a grammar: {exc}") from None
    body = _ROOT.sub("tool-call-json ::=", body)
    if tool_format == "llama":
        call, more = "tool-call-json", ""
    else:
        call = f"{_HERMES_OPEN} tool-call-json {_HERMES_CLOSE}"
        more = ' ("\\n" tool-call-block)*' if forced.parallel else ""
    think = _thinking(reasoning)
    head = "tool-thinking " if think else ""
    rules = [f"root ::= {head}tool-call-block{more}", f"tool-call-block ::= {call}"]
    if think:
        rules.append(f"tool-thinking ::= {think}")
    grammar = "\n".join(rules) + "\n" + body
    check_size(grammar, "The tools' schemas")
    return grammar


def _thinking(reasoning: ReasoningFormat | None) -> str:
    """The reasoning a model may write before its call ("" for one that does not think)."""
    if reasoning is None or not reasoning.open:
        return ""
    inside = f'[^{re.escape(reasoning.close[0])}]* {gbnf_text(reasoning.close)} [ \\n]*'
    if reasoning.starts_open:  # the generation prompt opened it: the reply closes it
        return inside
    return f'({gbnf_text(reasoning.open)} {inside})?'
