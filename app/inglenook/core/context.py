"""Context budgeting: which messages of a conversation fit in the model's context window.

What is left out when a conversation outgrows the context is the overflow policy's choice:
"stop" leaves nothing out (the reply fails with a message), "middle" keeps the system prompt and
the first exchange (unless that takes over half the room) and leaves out the oldest turns after
it, "rolling" keeps the system prompt and leaves out the oldest turns. The system prompt and the
newest user message are never left out.

History is left out in chunks (about an eighth of the budget at a time, measured on the
messages' own sizes, which do not change as the chat grows), so the prompt stays the same for
many turns after an overflow and the engine can keep its KV cache. Prompts are counted from the
newest turns backwards in growing windows: a 400-turn chat that keeps 12 renders a few windows
of about that size, never all 400 turns.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from inglenook.core.messages import DEFAULT_OVERFLOW, OVERFLOW_POLICIES, Message, OverflowPolicy

TokenCounter = Callable[[Sequence[Message]], int]
__all__ = ["DEFAULT_OVERFLOW", "OVERFLOW_POLICIES", "ContextFull", "ContextOverflow", "Fit",
           "OverflowPolicy", "estimate", "fit_messages", "history_start", "policy_of",
           "reply_reserve"]

CHUNKS_PER_BUDGET = 8  # history is left out an eighth of the budget at a time
# A long chat is not sent whole: what is sent holds at least this many characters per token of
# context (a token is rarely more than 8 characters: twice that), so the engine still leaves
# out what it would have; older turns are left behind SKIP_BLOCK at a time, so what is sent, and
# the prompt the engine makes of it, changes only once every SKIP_BLOCK turns.
SEND_CHARS_PER_TOKEN = 16
SKIP_BLOCK = 64


class ContextOverflow(Exception):
    """Even the newest message alone does not fit; str() is a message for the user."""

    def __init__(self, tokens: int, n_ctx: int, reserve: int, with_system: bool = False) -> None:
        self.tokens, self.n_ctx, self.reserve = tokens, n_ctx, reserve
        self.with_system = with_system
        super().__init__(self._message())

    def _message(self) -> str:
        what = "Your system prompt and message are" if self.with_system else "Your message is"
        return (f"{what} {self.tokens:,} tokens but the context holds {self.n_ctx:,}"
                f"{self._kept()}. Shorten it or load the model with a longer context.")

    def _kept(self) -> str:
        return f" (with {self.reserve:,} kept for the reply)" if self.reserve else ""

    def __reduce__(self) -> tuple[type[ContextOverflow], tuple[int, int, int, bool]]:
        # Survives pickling across the engine pipe (the default would call __init__(message)).
        return type(self), (self.tokens, self.n_ctx, self.reserve, self.with_system)


class ContextFull(ContextOverflow):
    """The conversation no longer fits and its overflow policy is "stop"."""

    def _message(self) -> str:
        return (f"This conversation is {self.tokens:,} tokens and the context holds "
                f"{self.n_ctx:,}{self._kept()}. Start a new chat, let older messages be left "
                "out (the chat's overflow setting), or load the model with a longer context.")


@dataclass(frozen=True)
class Fit:
    """The messages to send. Those left out are one run: `dropped` messages starting at index
    `dropped_start` of the conversation as given (0 when none are)."""

    messages: tuple[Message, ...]
    dropped: int = 0
    dropped_start: int = 0


def history_start(unit_chars: Sequence[int], n_ctx: int, policy: OverflowPolicy) -> int:
    """The first of a chat's earlier turns (units, each a question and its replies; their
    sizes in characters, oldest first) worth sending to a model of context `n_ctx`: those
    before it (after the first exchange, which "middle" keeps) could only be left out by the
    engine. Returns 1 for "middle" and 0 otherwise when nothing is left behind ("stop", an
    unknown context, a chat that is not long)."""
    pinned = 1 if policy == "middle" else 0
    if policy == "stop" or n_ctx <= 0:
        return pinned  # nothing left behind
    need, total = SEND_CHARS_PER_TOKEN * n_ctx, 0
    for index in range(len(unit_chars) - 1, pinned - 1, -1):
        total += unit_chars[index]
        if total >= need:
            return pinned + (index - pinned) // SKIP_BLOCK * SKIP_BLOCK
    return pinned


def reply_reserve(n_ctx: int, max_tokens: int,
                  policy: OverflowPolicy = DEFAULT_OVERFLOW) -> int:
    """Room kept free for the reply, so a long history can't leave it no space to answer.
    Where nothing may be left out ("stop": the API), a large max_tokens is a cap, not a
    reservation: Claude Code's 32,000 must not refuse a 2,000-token prompt on a 4,096
    context (the reply then ends at the context, with finish reason "length")."""
    usual = min(512, n_ctx // 4)
    if max_tokens > 0:
        return min(max_tokens, usual if policy == "stop" else n_ctx // 2)
    return usual


def policy_of(value: object) -> OverflowPolicy:
    """A policy from a request; anything unknown is the default (a request never fails on it)."""
    return value if value in OVERFLOW_POLICIES else DEFAULT_OVERFLOW


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


def estimate(messages: Sequence[Message]) -> int:
    """A rough token count without the tokenizer: ~4 bytes of UTF-8 a token across scripts,
    plus the template's markup. Only sizes chunks and decides what is worth counting."""
    return sum(len(m.content.encode("utf-8", errors="replace")) // 4 + 4 for m in messages)


def _remembered(count_tokens: TokenCounter) -> TokenCounter:
    """`count_tokens` asked once per prompt (the search may come back to one it counted)."""
    counts: dict[tuple[Message, ...], int] = {}

    def count(messages: Sequence[Message]) -> int:
        key = tuple(messages)
        if key not in counts:
            counts[key] = count_tokens(key)
        return counts[key]

    return count


def fit_messages(
    messages: Sequence[Message], count_tokens: TokenCounter, n_ctx: int, reserve: int,
    policy: OverflowPolicy = DEFAULT_OVERFLOW,
) -> Fit:
    """The messages to send under `policy` (see the module docstring).

    `count_tokens` renders and tokenizes a whole prompt (~ms each), so this calls it once when
    everything fits and O(log n) times on prompts of at most about twice the budget otherwise.
    Raises ContextFull ("stop") or ContextOverflow (not even the newest message fits).
    """
    budget = n_ctx - reserve
    count_tokens = _remembered(count_tokens)
    head = tuple(messages[:1]) if messages and messages[0].role == "system" else ()
    body = list(messages[len(head):])
    last_user = max((i for i, m in enumerate(body) if m.role == "user"), default=len(body) - 1)
    tail = tuple(body[max(last_user, 0):])
    units = _turns(body[:max(last_user, 0)])
    if policy == "stop" or estimate(messages) <= 2 * budget:
        total = count_tokens(tuple(messages))
        if total <= budget:
            return Fit(tuple(messages))
        if policy == "stop":
            raise ContextFull(total, n_ctx, reserve)
    # The first exchange is kept while it leaves at least half the room to recent turns.
    pinned = tuple(m for u in units[:1] for m in u) if policy == "middle" else ()
    if estimate(pinned) > budget // 2:
        pinned = ()
    fit = _fit_window(head + pinned, units[1 if pinned else 0:], tail, count_tokens, budget)
    if fit is None and pinned:  # the first exchange is too long to keep: it goes too
        fit = _fit_window(head, units, tail, count_tokens, budget)
    if fit is None:
        raise ContextOverflow(count_tokens(head + tail), n_ctx, reserve, with_system=bool(head))
    return fit


def _fit_window(prefix: tuple[Message, ...], units: Sequence[tuple[Message, ...]],
                tail: tuple[Message, ...], count_tokens: TokenCounter, budget: int) -> Fit | None:
    """`prefix`, the newest units that fit and `tail`, leaving out the oldest units in chunks;
    None when even `prefix` + `tail` do not fit."""

    def keep(dropped: int) -> tuple[Message, ...]:
        return prefix + tuple(m for unit in units[dropped:] for m in unit) + tail

    def fits(dropped: int) -> bool:
        return count_tokens(keep(dropped)) <= budget

    # Where to cut: where the oldest units' running size passes a multiple of a chunk. The
    # sizes are the units' own, so a later turn cuts at the same places until it needs more.
    chunk = max(budget // CHUNKS_PER_BUDGET, 1)
    cuts, size = [0], 0
    for i, unit in enumerate(units, start=1):
        before, size = size, size + estimate(unit)
        if size // chunk > before // chunk or i == len(units):
            cuts.append(i)
    if not fits(cuts[-1]):
        return None
    # The fewest cuts that fit: probed from the newest end in doubling steps, then halved, so
    # only windows of up to about twice what fits are rendered.
    fit_at, fail_at, step = len(cuts) - 1, -1, 1
    while fail_at < 0 and fit_at > 0:
        probe = max(fit_at - step, 0)
        if fits(cuts[probe]):
            fit_at, step = probe, step * 2
        else:
            fail_at = probe
    while fit_at - fail_at > 1:
        middle = (fit_at + fail_at) // 2
        if fits(cuts[middle]):
            fit_at = middle
        else:
            fail_at = middle
    dropped_units = cuts[fit_at]
    kept = keep(dropped_units)
    dropped = sum(len(u) for u in units[:dropped_units])
    return Fit(kept, dropped, len(prefix) if dropped else 0)
