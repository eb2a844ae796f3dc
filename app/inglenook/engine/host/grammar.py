"""A reply's format as a grammar: llama.cpp samples only tokens that keep the reply inside it,
so a JSON reply parses and matches its schema whatever the model would rather write."""

from __future__ import annotations

import json
from typing import Any

from inglenook.core.messages import JSON_OBJECT

# What llama-cpp-python's converter turns into grammar. Any other keyword (minimum, maximum,
# uniqueItems, not…) would be dropped without a word, so a schema holding one is refused.
_ENFORCED = frozenset({
    "type", "properties", "required", "additionalProperties", "items", "prefixItems",
    "minItems", "maxItems", "enum", "const", "anyOf", "oneOf", "allOf", "$ref", "$defs",
    "definitions", "pattern", "format", "minLength", "maxLength"})
_NOTES = frozenset({"title", "description", "default", "examples", "$schema", "$id",
                    "$comment", "deprecated", "readOnly", "writeOnly"})
_FORMATS = frozenset({"date", "time", "date-time", "uuid"})
_SCHEMA_MAPS = ("properties", "$defs", "definitions")
_SCHEMA_LISTS = ("prefixItems", "anyOf", "oneOf", "allOf")


class RequestRefused(ValueError):
    """A request the engine cannot honour as asked: the reply fails with this message, which
    starts with the API field at fault in quotes when there is one ('suffix' …)."""


class GrammarError(RequestRefused):
    """A reply format that cannot become a grammar; the message says why."""


def grammar_for(reply_format: str) -> str:
    """The GBNF grammar of a GenerationRequest.reply_format ("" for free text), by
    llama-cpp-python's JSON-schema converter (a port of llama.cpp's own)."""
    from llama_cpp import llama_grammar  # pure Python; loaded only when a format is asked

    if not reply_format:
        return ""
    if reply_format == JSON_OBJECT:
        return llama_grammar.JSON_GBNF
    try:
        schema = json.loads(reply_format)
    except ValueError:
        raise GrammarError("The JSON schema is not JSON.") from None
    problems = sorted(set(unenforced(schema)))
    if problems:
        raise GrammarError("The JSON schema cannot be turned into a grammar: "
                           f"{', '.join(problems)} cannot be enforced while sampling.")
    try:
        return llama_grammar.json_schema_to_gbnf(reply_format)
    except (ValueError, KeyError, TypeError, AttributeError, AssertionError,
            RecursionError) as exc:
        raise GrammarError(f"The JSON schema cannot be turned into a grammar: {exc}") from None


def unenforced(schema: Any, depth: int = 0) -> list[str]:
    """The keywords of `schema` that no grammar would enforce, and remote $refs (nothing is
    fetched)."""
    if isinstance(schema, bool) or depth > 64:
        return [] if depth <= 64 else ["nesting over 64 levels"]
    if not isinstance(schema, dict):
        return ["a schema that is not an object"]
    found = [k for k in schema if k not in _ENFORCED and k not in _NOTES]
    if schema.get("format") not in (None, *_FORMATS):
        found.append(f"format {schema['format']!r}")
    ref = schema.get("$ref")
    if ref is not None and not (isinstance(ref, str) and ref.startswith("#")):
        found.append("a $ref outside the schema (nothing is fetched)")
    for key in _SCHEMA_MAPS:
        if isinstance(schema.get(key), dict):
            for sub in schema[key].values():
                found += unenforced(sub, depth + 1)
    for key in _SCHEMA_LISTS:
        if isinstance(schema.get(key), list):
            for sub in schema[key]:
                found += unenforced(sub, depth + 1)
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            found += unenforced(schema[key], depth + 1)
    return found


class BiasError(RequestRefused):
    """A logit bias for a token the model does not have (OpenAI's ids are the model's)."""


def check_biases(logit_bias: tuple[tuple[int, float], ...], n_vocab: int) -> None:
    outside = [t for t, _ in logit_bias if not 0 <= t < n_vocab]
    if outside:
        raise BiasError(f"'logit_bias' names token {outside[0]}, but this model's vocabulary "
                        f"has tokens 0 to {n_vocab - 1}.")
