"""A forced tool call as a grammar, in the shape the model's tool-call parser reads."""

from __future__ import annotations

from typing import Any

import pytest

from inglenook.core.messages import ForcedCall
from inglenook.core.reasoning import ReasoningFormat
from inglenook.engine.host.grammar import GrammarError
from inglenook.engine.host.tool_grammar import tool_call_grammar

LIMITED = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0}}}
TOOLS: tuple[dict[str, Any], ...] = (
    {"type": "function", "function": {"name": "add", "parameters": LIMITED}},
    {"type": "function", "function": {"name": "now"}})


def test_hermes_calls_one_or_many_after_optional_thinking() -> None:
    grammar = tool_call_grammar(TOOLS, ForcedCall(), "hermes", ReasoningFormat("think"))
    assert grammar.startswith('root ::= tool-thinking tool-call-block ("\\n" tool-call-block)*')
    assert '"<tool_call>\\n" tool-call-json "\\n</tool_call>"' in grammar
    assert '"\\"add\\""' in grammar and '"\\"now\\""' in grammar
    one = tool_call_grammar(TOOLS, ForcedCall("now", parallel=False), "hermes", None)
    assert one.startswith("root ::= tool-call-block\n") and '"\\"add\\""' not in one


def test_llama_calls_are_a_bare_object_with_parameters() -> None:
    grammar = tool_call_grammar(TOOLS, ForcedCall("add"), "llama", None)
    assert "<tool_call>" not in grammar and '"\\"parameters\\""' in grammar


@pytest.mark.parametrize(("forced", "fmt", "match"), [
    (ForcedCall(), "mistral", "cannot force a call with this model"),
    (ForcedCall("sub"), "hermes", "'sub'"),
    (ForcedCall(strict=("add",)), "hermes", "strict function 'add'.*minimum"),
])
def test_what_cannot_be_forced_is_refused_by_name(forced: ForcedCall, fmt: str,
                                                  match: str) -> None:
    with pytest.raises(GrammarError, match=match):
        tool_call_grammar(TOOLS, forced, fmt, None)
