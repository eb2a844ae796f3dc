"""A reply's format as a grammar: llama.cpp samples only tokens that keep the reply inside it,
so a JSON reply parses and matches its schema whatever the model would rather write."""

from __future__ import annotations

import json

from inglenook.core.messages import JSON_OBJECT
from inglenook.core.reply_format import unenforced


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


class BiasError(RequestRefused):
    """A logit bias for a token the model does not have (OpenAI's ids are the model's)."""


def check_biases(logit_bias: tuple[tuple[int, float], ...], n_vocab: int) -> None:
    outside = [t for t, _ in logit_bias if not 0 <= t < n_vocab]
    if outside:
        raise BiasError(f"'logit_bias' names token {outside[0]}, but this model's vocabulary "
                        f"has tokens 0 to {n_vocab - 1}.")
