"""Context budgeting: which messages of a conversation fit in the model's context window."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from inglenook.core.messages import Message

TokenCounter = Callable[[Sequence[Message]], int]


class ContextOverflow(Exception):
    """Even the newest message alone does not fit; str() is a message for the user."""

    def __init__(self, tokens: int, n_ctx: int, reserve: int, with_system: bool = False) -> None:
        self.tokens, self.n_ctx, self.reserve = tokens, n_ctx, reserve
        self.with_system = with_system
        what = "Your system prompt and message are" if with_system else "Your message is"
        kept = f" (with {reserve:,} kept for the reply)" if reserve else ""
        super().__init__(
            f"{what} {tokens:,} tokens but the context holds {n_ctx:,}{kept}. "
            "Shorten it or load the model with a longer context."
        )

    def __reduce__(self) -> tuple[type[ContextOverflow], tuple[int, int, int, bool]]:
        # Survives pickling across the engine pipe (the default would call __init__(message)).
        return type(self), (self.tokens, self.n_ctx, self.reserve, self.with_system)


def reply_reserve(n_ctx: int, max_tokens: int) -> int:
    """Room kept free for the reply, so a long history can't leave it no space to answer."""
    if max_tokens > 0:
        return min(max_tokens, n_ctx // 2)
    return min(512, n_ctx // 4)


def _turns(messages: Sequence[Message]) -> list[tuple[Message, ...]]:
    """Group history into units that start at a user message (user + its replies).

    Dropping whole units keeps user/assistant alternation, which some templates (Gemma,
    Mistral) enforce by raising.
    """
    units: list[list[Message]] = []
    for m in messages:
        if m.role == "user" or not units:
            units.append([m])
        else:
            units[-1].append(m)
    return [tuple(u) for u in units]


def fit_messages(
    messages: Sequence[Message], count_tokens: TokenCounter, n_ctx: int, reserve: int
) -> tuple[tuple[Message, ...], int]:
    """The messages to send, oldest history dropped first, and how many messages were dropped.

    Always kept: a leading system message, and the latest user message with anything after it.
    `count_tokens` renders and tokenizes a whole prompt (~ms each), so this calls it O(log n)
    times: once when everything fits, otherwise a binary search over how many turns to drop
    (fewer messages never means more tokens).
    """
    budget = n_ctx - reserve
    head = tuple(messages[:1]) if messages and messages[0].role == "system" else ()
    body = list(messages[len(head):])
    last_user = max((i for i, m in enumerate(body) if m.role == "user"), default=len(body) - 1)
    tail = tuple(body[max(last_user, 0):])
    units = _turns(body[:max(last_user, 0)])

    def keep(dropped: int) -> tuple[Message, ...]:
        return head + tuple(m for unit in units[dropped:] for m in unit) + tail

    everything = count_tokens(keep(0))
    if everything <= budget:
        return keep(0), 0
    smallest = count_tokens(keep(len(units))) if units else everything
    if smallest > budget:
        raise ContextOverflow(smallest, n_ctx, reserve, with_system=bool(head))
    # Invariant: dropping `fits` units fits, dropping `fails` units does not.
    fails, fits = 0, len(units)
    while fits - fails > 1:
        middle = (fails + fits) // 2
        if count_tokens(keep(middle)) <= budget:
            fits = middle
        else:
            fails = middle
    kept = keep(fits)
    return kept, len(messages) - len(kept)
