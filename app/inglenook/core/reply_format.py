"""A reply's format as the window and the engine read it: what a JSON schema may hold to be
enforced while sampling, whether a schema the user typed is one, and how a JSON reply is shown
(pretty-printed, checked against its schema). The grammar itself is made in the engine
(engine/host/grammar.py)."""

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


def schema_problem(text: str) -> str:
    """Why `text` cannot be a reply's schema ("" when it can): not JSON, not a JSON Schema,
    or a keyword no grammar enforces."""
    import jsonschema  # only when a schema is typed or a JSON reply shown

    try:
        schema = json.loads(text)
    except (ValueError, RecursionError) as exc:
        return f"This is not JSON: {exc}."
    if not isinstance(schema, dict):
        return "A JSON Schema is an object ({…})."
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as exc:
        return f"This is not a valid JSON Schema: {_short(exc.message)}"
    problems = sorted(set(unenforced(schema)))
    if problems:
        return f"Replies cannot be held to {', '.join(problems)} while they are written."
    return ""


def shown_reply(content: str, reply_format: str) -> tuple[str, str, str]:
    """A JSON reply as the chat shows it: (markdown: a json code block, the JSON to copy,
    what is wrong with it or ""). A reply that does not parse is shown as it is."""
    import jsonschema

    try:
        value = json.loads(content)
    except (ValueError, RecursionError):
        return _fenced(content), content, "This reply is not valid JSON."
    pretty = json.dumps(value, indent=2, ensure_ascii=False)
    problem = ""
    if reply_format != JSON_OBJECT:
        try:
            schema = json.loads(reply_format)
            error = jsonschema.validators.validator_for(schema)(schema).iter_errors(value)
            first = next(iter(error), None)
        except (ValueError, RecursionError, jsonschema.SchemaError, TypeError):
            first = None
        if first is not None:
            where = "/".join(str(p) for p in first.absolute_path)
            problem = (f"This reply does not match its schema{f' at {where}' if where else ''}: "
                       f"{_short(first.message)}")
    return _fenced(pretty), pretty, problem


def _fenced(text: str) -> str:
    """`text` as a json code block, fenced longer than any run of backticks in it."""
    longest, run = 0, 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    fence = "`" * max(3, longest + 1)
    return f"{fence}json\n{text}\n{fence}"


def _short(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"
