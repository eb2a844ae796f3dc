"""Speculative decoding: a cheap proposer guesses the next tokens, the model checks them all in
one batch, and each guess it agrees with costs a fraction of a decoding step.

Verification: the model samples every position of the batch itself, with the request's own
sampler chain, and a guess is kept only while the model's sample equals it; the first sample
that differs is kept too (it is the model's own next token) and the rest of the batch is
dropped from the KV cache. So every token of a reply is one the model sampled, in order, from
the same logits and the same random stream as without speculation: greedy or not, the reply is
the same token for token (on a CPU only with flash attention on, see host/loading.py).
Proposers guess single tokens, not distributions, and keeping a guess with probability
p(guess) is exactly rejection sampling's min(1, p/q) with q = 1: nothing to gain from a
fancier rule.

Proposers: PromptLookup (the continuation of the longest earlier n-gram match in the prompt and
the reply so far; no model), or a draft model (host/drafting.py). A rejected guess is not free (on a
2-core CPU each guessed token adds about a third of a step), so DraftLength proposes fewer
tokens after misses and backs off entirely while guesses keep failing.

No llama_cpp here: the host hands in its model as a `Target`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Protocol

from inglenook.engine.kv_states import TOKEN_BYTES, pack
from inglenook.models.gguf import ArrayInfo, GGUFHeader

MAX_VOCAB_DIFFERENCE = 128  # llama.cpp's own limit for a draft model's extra tokens
_T = TOKEN_BYTES


class Target(Protocol):
    """The model being decoded, as the host drives llama.cpp."""

    def n_past(self) -> int:
        """Tokens in its KV cache."""
        ...

    def evaluate(self, tokens: Sequence[int]) -> None:
        """Evaluate `tokens` after the KV cache's, with logits at every one of them."""
        ...

    def sample(self, index: int) -> int:
        """The request's sampler at `index` of the last evaluated batch (accepting the token)."""
        ...

    def keep(self, n: int) -> None:
        """Forget the KV cache from position n on."""
        ...


class TokenHistory:
    """The prompt and the reply so far, also packed so that n-grams are found by bytes.rfind."""

    def __init__(self, tokens: Sequence[int]) -> None:
        self.tokens = list(tokens)
        self.packed = bytearray(pack(self.tokens))

    def extend(self, tokens: Sequence[int]) -> None:
        self.tokens.extend(tokens)
        self.packed += pack(tokens)


class Proposer(Protocol):
    def propose(self, history: TokenHistory, limit: int) -> list[int]:
        """At most `limit` guesses of the tokens after the history."""
        ...


class PromptLookup:
    """The tokens that followed the most recent earlier occurrence of the history's last
    `ngram` tokens, else of its last ngram - 1 … `min_ngram` tokens."""

    def __init__(self, ngram: int, min_ngram: int) -> None:
        self.ngram = max(1, ngram)
        self.min_ngram = max(1, min(min_ngram, self.ngram))

    def propose(self, history: TokenHistory, limit: int) -> list[int]:
        buf = history.packed
        end = len(buf)
        for n in range(self.ngram, self.min_ngram - 1, -1):
            width = n * _T
            if width >= end:
                continue
            key = bytes(buf[end - width:])
            # Only occurrences ending before the last token: the suffix itself is no match.
            at = buf.rfind(key, 0, end - _T)
            while at >= 0 and at % _T:  # a match straddling token boundaries
                at = buf.rfind(key, 0, at + width - 1)
            if at >= 0:
                start = (at + width) // _T
                return history.tokens[start:start + limit]
        return []


class DraftLength:
    """How many tokens to propose in the next step.

    Guessing pays while the tokens it adds beyond the one a plain step yields come faster than
    plain steps yield tokens (by MARGIN): what each step with guesses took beyond a plain step
    (asking included, also when nothing came back, as from an unsure draft model), against the
    tokens it gained, both as moving sums, with the plain step's time as a moving average;
    judged once EVIDENCE steps' worth of time was spent. No guess is made while it does not
    pay, but now and then one step guesses again to see: after PROBE_GAP plain steps, then
    twice as many after each probe that did not change the verdict (a draft model that fell
    behind has to catch up, so a probe can cost more than a step).
    While guesses pay, every REFRESH-th step is a plain one, so that the plain step's time
    follows the context's growth and a neighbour's load: one stalled plain step would otherwise
    make guesses look good for the rest of the reply. The first step after the prompt runs slow
    (llama.cpp switches from its batch threads), so the first two steps are plain and only the
    second is timed; a faster plain step counts more than a slower one.

    Prompt lookup is not judged (`judging` False): asking it costs nothing, and its guesses
    only their rows in the batch, which the back-off below keeps in check; judging it cost more
    than it saved (timings on a shared CPU flip the verdict within a reply).

    How many: what the last step accepted plus one, doubled after a full acceptance (guesses
    come right in runs: a copied passage, then none); after a guess that failed at its first
    token, none for a while (twice as long after each such miss in a row, at most MAX_BACKOFF
    steps), since a lookup that keeps missing costs part of a step each time."""

    MAX_BACKOFF = 16
    WEIGHT = 0.1  # of the newest step in the moving sums
    PLAIN_WEIGHT = 0.3  # plain steps are timed seldom while guessing: each counts more
    REFRESH = 32  # guessing steps between two plain ones
    MARGIN = 1.15  # a gain too close to call is noise: plain steps are the safe side
    EVIDENCE = 2  # plain steps' worth of time spent on guesses before judging them
    PROBE_GAP = 8  # plain steps before guessing again, doubled after each failed probe…
    MAX_PROBE_GAP = 256  # …up to this

    def __init__(self, most: int, judging: bool = True) -> None:
        self.most = max(0, most)
        self.judging = judging
        self.cap = self.most
        self.step_s: float | None = None  # a plain step
        self.gained = 0.0  # moving sums: tokens guessing added, seconds it took beyond plain
        self.spent = 0.0
        self._misses = 0
        self._skip = 0
        self._guessing_steps = 0  # since the last plain one
        self._warm = False  # the first plain step, not timed, is behind
        self._probe_gap = self.PROBE_GAP // 2
        self._probe_wait = -1  # plain steps until the next probe; -1: guesses pay

    def worthwhile(self) -> bool:
        if self.step_s is None or self.spent < self.EVIDENCE * self.step_s:
            return True  # too little spent yet to judge by
        return self.gained * self.step_s >= self.MARGIN * self.spent

    def limit(self) -> int:
        if self.judging and (self.step_s is None or self._guessing_steps >= self.REFRESH):
            return 0  # a plain step, timed to weigh guesses against
        if self._skip:
            self._skip -= 1
            return 0
        if not self.judging or self.worthwhile():
            self._probe_gap, self._probe_wait = self.PROBE_GAP // 2, -1
            return self.cap
        if self._probe_wait < 0:
            self._probe_gap = min(2 * self._probe_gap, self.MAX_PROBE_GAP)
            self._probe_wait = self._probe_gap
        if self._probe_wait > 0:
            self._probe_wait -= 1
            return 0
        return self.cap  # a probe, until a guess was made (a lookup may find none)

    def timed(self, guesses: int, tokens: int, seconds: float, asking_s: float = 0.0) -> None:
        """A step checked this many guesses and yielded `tokens`: with guesses, in `seconds`
        all told; without, its evaluation took `seconds` after `asking_s` spent asking."""
        if guesses == 0:
            if self._warm:
                weight = self.PLAIN_WEIGHT if self.step_s is None or seconds > self.step_s \
                    else 0.5
                self.step_s = _average(self.step_s, seconds, weight)
            self._warm = True
            if asking_s > 0:
                self._add(0, asking_s)
            else:
                self._guessing_steps = 0
            return
        self._guessing_steps += 1
        if self._probe_wait == 0:
            self._probe_wait = -1  # probed: the next step judges again
        if self.step_s is not None:  # a stall counts as four plain steps a token
            beyond = min(seconds, 4 * self.step_s * (guesses + 1)) - self.step_s
            self._add(tokens - 1, max(0.0, beyond))

    def _add(self, tokens: float, seconds: float) -> None:
        self.gained = self.gained * (1 - self.WEIGHT) + tokens
        self.spent = self.spent * (1 - self.WEIGHT) + seconds

    def record(self, drafted: int, accepted: int) -> None:
        if drafted == 0:
            return
        if accepted == drafted:
            self.cap = min(self.most, self.cap * 2)
        else:
            self.cap = max(1, accepted + 1)
        if accepted == 0:
            self._misses += 1
            self._skip = min(2 ** (self._misses - 1), self.MAX_BACKOFF) - 1
        else:
            self._misses = 0


def _average(mean: float | None, value: float, weight: float) -> float:
    """A moving average; a value past 4x the mean (a stall: another process took the CPU)
    counts as 4x."""
    if mean is None:
        return value
    return mean + weight * (min(value, 4 * mean) - mean)


@dataclass
class Tally:
    drafted: int = 0
    accepted: int = 0


class Guesser:
    """Speculation for one sequence, one step at a time: `propose` before a step, `verify`
    once the batch holding [the pending token, *guesses] was evaluated (the host's batch loop
    drives several sequences this way; `decode` drives one)."""

    def __init__(self, proposer: Proposer, length: DraftLength, tally: Tally,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.proposer, self.length, self.tally, self.clock = proposer, length, tally, clock
        if isinstance(proposer, PromptLookup):
            length.judging = False
        self._started = self._evaluating = 0.0
        self._asked = 0

    def propose(self, history: TokenHistory, room: int) -> list[int]:
        """At most `room` guesses of the tokens after the history (none while they do not
        pay). Timed from here to the end of verify()."""
        self._started = self.clock()
        self._asked = asked = min(self.length.limit(), room)
        draft = self.proposer.propose(history, asked)[:asked] if asked > 0 else []
        self._evaluating = self.clock()
        return draft

    def verify(self, draft: Sequence[int], sample: Callable[[int], int]) -> list[int]:
        """The model's own tokens: sampled at each row of the batch while they equal the
        guesses, and the first that differs. The caller keeps the KV cells of the pending
        token and of the accepted guesses (len(result) rows) and drops the rest."""
        out: list[int] = []
        for i in range(len(draft) + 1):
            out.append(sample(i))
            if i == len(draft) or out[i] != draft[i]:
                break
        # Timed with their sampling, one sample a token with guesses or without.
        done = self.clock()
        length = self.length
        if draft:
            length.timed(len(draft), len(out), done - self._started)
            accepted = len(out) - 1
            self.tally.drafted += len(draft)
            self.tally.accepted += accepted
            length.record(len(draft), accepted)
        else:
            length.timed(0, 1, done - self._evaluating,
                         self._evaluating - self._started if self._asked > 0 else 0)
        return out


def decode(target: Target, history: TokenHistory, proposer: Proposer | None,
           length: DraftLength, tally: Tally, room: Callable[[], int],
           clock: Callable[[], float] = time.perf_counter,
           primed: bool = False) -> Generator[int, None, None]:
    """The reply's tokens, one at a time, for one sequence. The target's KV cache holds the
    history but its last token, or (`primed`) all of it, with the logits of its last token the
    last evaluated: the first token is then sampled at once, one forward pass sooner. `room()`
    says how many more tokens may be guessed (the rest of max_tokens, of the context). When the
    caller stops (closes the generator), the KV cache is left holding the tokens yielded but
    the last, as plain decoding leaves it."""
    pending = history.tokens[-1]
    keep = target.n_past()
    guesser = Guesser(proposer, length, tally, clock) if proposer is not None else None
    try:
        if primed:
            pending = target.sample(-1)
            history.extend([pending])
            yield pending
        while True:
            draft = guesser.propose(history, room()) if guesser is not None else []
            base = target.n_past()
            target.evaluate([pending, *draft])
            out = guesser.verify(draft, target.sample) if guesser is not None else [
                target.sample(0)]
            if len(out) - 1 < len(draft):
                target.keep(base + len(out))
            history.extend(out)
            for j, token in enumerate(out):
                keep = base + 1 + j
                yield token
            pending = out[-1]
    finally:
        if target.n_past() > keep:
            target.keep(keep)


# -- a draft model's vocabulary ---------------------------------------------------------------
def draft_header_mismatch(target: GGUFHeader, draft: GGUFHeader) -> str | None:
    """Why a draft model cannot guess this model's tokens, from the two headers (before either
    is loaded); None when they may share a vocabulary. host/drafting.py then compares the tokens."""
    def tokens(h: GGUFHeader) -> int:
        value = h.metadata.get("tokenizer.ggml.tokens")
        return value.length if isinstance(value, ArrayInfo) else 0

    def kind(h: GGUFHeader) -> object:
        return h.metadata.get("tokenizer.ggml.model")

    name = draft.name
    if kind(target) != kind(draft):
        return (f"The draft model {name} uses another kind of tokenizer ({kind(draft)}, this "
                f"model {kind(target)}): it cannot guess this model's tokens.")
    if abs(tokens(target) - tokens(draft)) > MAX_VOCAB_DIFFERENCE:
        return (f"The draft model {name} has a vocabulary of {tokens(draft):,} tokens, this "
                f"model {tokens(target):,}: they are not the same vocabulary.")
    for key, what in (("tokenizer.ggml.bos_token_id", "beginning-of-text"),
                      ("tokenizer.ggml.eos_token_id", "end-of-text")):
        if target.metadata.get(key) != draft.metadata.get(key):
            return (f"The draft model {name} has another {what} token than this model: they "
                    "are not the same vocabulary.")
    return None
