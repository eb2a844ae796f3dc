"""A reply's format as a grammar: what it cannot enforce is refused by name, never dropped."""

from __future__ import annotations

import json

import pytest

from inglenook.engine.host.grammar import GrammarError, grammar_for


def test_free_text_has_no_grammar_and_json_has_one() -> None:
    assert grammar_for("") == ""
    assert "root" in grammar_for("json")
    schema = {"type": "object", "properties": {"minimum": {"type": "string"}},
              "required": ["minimum"]}  # a property may be called anything
    assert "minimum" in grammar_for(json.dumps(schema))


@pytest.mark.parametrize(("schema", "named"), [
    ({"type": "integer", "maximum": 3}, "maximum"),
    ({"type": "object", "properties": {"a": {"type": "array", "uniqueItems": True}}},
     "uniqueItems"),
    ({"anyOf": [{"type": "string", "format": "email"}]}, "format 'email'"),
    ({"$ref": "https://example.com/schema.json"}, "nothing is fetched"),
    ({"not": {"type": "null"}}, "not"),
])
def test_what_a_grammar_cannot_enforce_is_refused_by_name(schema: dict, named: str) -> None:
    with pytest.raises(GrammarError, match="cannot be enforced") as refused:
        grammar_for(json.dumps(schema))
    assert named in str(refused.value)


def test_a_schema_that_is_not_json_is_refused() -> None:
    with pytest.raises(GrammarError, match="not JSON"):
        grammar_for("{type: object")
