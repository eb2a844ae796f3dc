"""A reply's format as a grammar: llama.cpp samples only tokens that keep the reply inside it,
so a JSON reply parses and matches its schema whatever the model would rather write.

A grammar is bounded (`check_size`): llama.cpp follows every alternative that fits what was
written so far, for each token it checks, at every step of the reply. A 55,000-value enum
(3.8 MB) held the engine for 34 s, and every other reply with it. At most MAX_GRAMMAR_BYTES of
grammar (repetitions such as minLength and maxItems are written out in it) and
MAX_ALTERNATIVES alternatives (an enum's values, anyOf's branches, a pattern's `|`): about
what OpenAI's structured outputs allow (1,000 enum values, 120,000 characters of names and
values), at a few milliseconds a step on a small CPU.
"""

from __future__ import annotations

import json
import re

from inglenook.core.messages import JSON_OBJECT
from inglenook.core.reply_format import unenforced
from inglenook.core.units import describe_size

MAX_GRAMMAR_BYTES = 256_000
MAX_ALTERNATIVES = 2_000
# What is not an alternative's `|`: string literals, character classes, comments.
_NOT_SYNTAX = re.compile(r'"(?:\\.|[^"\\])*"|\[(?:\\.|[^\]\\])*\]|#[^\n]*')


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
        grammar = llama_grammar.json_schema_to_gbnf(reply_format)
    except (ValueError, KeyError, TypeError, AttributeError, AssertionError,
            RecursionError) as exc:
        raise GrammarError(f"The JSON schema cannot be turned into a grammar: {exc}") from None
    check_size(grammar, "The JSON schema")
    return grammar


def alternatives(grammar: str) -> int:
    """How many alternatives a GBNF grammar's rules hold: one per rule, and one more per `|`
    outside literals, classes and comments."""
    syntax = _NOT_SYNTAX.sub("", grammar)
    return syntax.count("::=") + syntax.count("|")


def check_size(grammar: str, what: str) -> None:
    """GrammarError, saying the limit, when the grammar made of `what` is too large."""
    size = len(grammar.encode("utf-8"))
    if size > MAX_GRAMMAR_BYTES:
        raise GrammarError(
            f"{what} makes a grammar of {describe_size(size)}; at most "
            f"{describe_size(MAX_GRAMMAR_BYTES)} is allowed (long enums, and lengths or item "
            "counts of thousands, are written out in it). Make it smaller.")
    count = alternatives(grammar)
    if count > MAX_ALTERNATIVES:
        raise GrammarError(
            f"{what} makes a grammar of {count:,} alternatives (an enum's values, anyOf's "
            f"branches); at most {MAX_ALTERNATIVES:,} are allowed, as each is checked at "
            "every token. Use a plain string for a long list of choices.")


class BiasError(RequestRefused):
    """A logit bias for a token the model does not have (OpenAI's ids are the model's)."""


def check_biases(logit_bias: tuple[tuple[int, float], ...], n_vocab: int) -> None:
    outside = [t for t, _ in logit_bias if not 0 <= t < n_vocab]
    if outside:
        raise BiasError(f"'logit_bias' names token {outside[0]}, but this model's vocabulary "
                        f"has tokens 0 to {n_vocab - 1}.")
