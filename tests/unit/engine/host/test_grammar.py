"""A reply's format as a grammar: what it cannot enforce is refused by name, never dropped;
logit biases and log-probabilities."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from inglenook.core.messages import GenerationRequest, Message
from inglenook.core.replies import TokenLogprob, TokenOdds
from inglenook.engine import protocol as p
from inglenook.engine.host.grammar import (
    BiasError,
    GrammarError,
    alternatives,
    check_biases,
    grammar_for,
)
from inglenook.engine.host.llama import odds_of


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


def test_a_bias_outside_the_vocabulary_is_refused_by_name() -> None:
    check_biases(((0, 1.0), (9, -100.0)), 10)
    with pytest.raises(BiasError, match="'logit_bias' names token 10"):
        check_biases(((10, 1.0),), 10)


def test_odds_are_a_log_softmax_of_the_raw_logits_with_the_best_first() -> None:
    logits = np.array([0.0, 2.0, 1.0, 2.0], dtype=np.float32)
    chosen, top = odds_of(logits, 2, 3)
    lse = math.log(sum(math.exp(x) for x in logits))
    assert chosen == pytest.approx(1.0 - lse)
    assert [t for t, _ in top] == [1, 3, 2] and top[0][1] == pytest.approx(2.0 - lse)
    assert odds_of(logits, 0, 0)[1] == []


def test_logprobs_and_biases_cross_the_pipe_typed() -> None:
    event = p.Logprobs(3, (TokenLogprob(TokenOdds("a", -0.5, (97,)),
                                        (TokenOdds("b", -1.0, (98,)),)),))
    assert p.decode(p.encode(event)[4:]) == event
    ask = p.Generate(GenerationRequest(1, (Message("user", "x"),), logit_bias=((5, -100.0),),
                                       logprobs=2))
    assert p.decode(p.encode(ask)[4:]) == ask


def test_a_grammar_of_too_many_alternatives_is_refused_with_the_limit() -> None:
    """A 55,000-value enum (3.8 MB) held the engine for 34 s, every other reply with it."""
    schema = {"type": "object", "properties": {"pick": {
        "enum": [f"choice number {i:05d} of a list far too long" for i in range(55_000)]}}}
    assert len(json.dumps(schema)) > 2_500_000
    with pytest.raises(GrammarError, match=r"The JSON schema makes a grammar of 3 MB; at most "
                                           r"256 KB is allowed"):
        grammar_for(json.dumps(schema))
    few_bytes = {"enum": [f"{i}" for i in range(5_000)]}  # 5,000 short values: under 256 KB
    with pytest.raises(GrammarError, match=r"makes a grammar of 5,00\d alternatives .* at most "
                                           r"2,000 are allowed"):
        grammar_for(json.dumps(few_bytes))
    written_out = {"type": "string", "minLength": 100_000}  # each character a rule element
    with pytest.raises(GrammarError, match="at most 256 KB is allowed"):
        grammar_for(json.dumps(written_out))
    assert grammar_for(json.dumps({"enum": [f"{i}" for i in range(1_500)]}))


def test_alternatives_are_counted_outside_literals_classes_and_comments() -> None:
    assert alternatives('root ::= "a|b" | [|] # x | y\n') == 2
    assert alternatives('root ::= "\\"|" | other\nother ::= "q"') == 3
