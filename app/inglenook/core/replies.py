"""What the engine reports about a reply: figures, and how it ended."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

FinishReason = Literal["stop", "length", "cancelled", "error"]


@dataclass(frozen=True)
class Stats:
    prompt_tokens: int  # tokens of the whole prompt as the model sees it
    cached_tokens: int  # of those, reused from the KV cache (not evaluated again)
    generated_tokens: int
    ttft_s: float  # request received -> first token
    decode_tok_s: float  # generation speed after the first token
    prompt_tok_s: float  # evaluation speed of the new prompt tokens
    context_used: int  # tokens in the KV cache after the reply
    n_ctx: int
    # Messages left out so the conversation fits: one run of `dropped_messages` starting at
    # index `dropped_start` of the request's messages (after the system prompt, and after the
    # first exchange under the "middle" policy). The system prompt is never left out.
    dropped_messages: int = 0
    seed: int = -1  # the seed actually used (a random one when the request asked for random)
    dropped_start: int = 0
    # Where the cached tokens came from: "live" (the KV cache as the last reply left it),
    # "ram" or "disk" (this conversation's, or a shared system prompt's, saved state), "".
    cache_source: str = ""
    state_restore_s: float = 0.0  # reading and loading that saved state
    shifted_tokens: int = 0  # left-out tokens removed from the KV cache instead of evaluating
    # Speculative decoding: tokens guessed ahead and checked, and how many of them the model
    # agreed with (each of those came almost free).
    drafted_tokens: int = 0
    accepted_tokens: int = 0
    # A reply in a format: tokens for which the likeliest candidates held too few the grammar
    # allows, so that it was applied to the whole vocabulary (the slow case).
    grammar_full_masks: int = 0
    # Of generated_tokens, those the model thought in (its reasoning block, tags included):
    # OpenAI's reasoning_tokens.
    reasoning_tokens: int = 0

    @property
    def acceptance_rate(self) -> float:
        return self.accepted_tokens / self.drafted_tokens if self.drafted_tokens else 0.0


@dataclass(frozen=True)
class Finish:
    reason: FinishReason
    message: str = ""  # for "error": what went wrong, in words for the user
    # For "error": the conversation does not fit the context (its overflow policy is "stop",
    # or even its newest message is too long), so the window can offer what to do.
    context_full: bool = False
    stop: str = ""  # for "stop": the stop string that ended the reply ("": the model ended it)


MAX_TOP_LOGPROBS = 20  # alternatives a token's log-probability may come with, as OpenAI


@dataclass(frozen=True)
class TokenOdds:
    """A token and its log-probability under the model's whole distribution at that step
    (a log-softmax of the raw logits: before logit bias, penalties, temperature or
    truncation). `utf8` is the token's bytes, which may be part of a character: `text` is
    them read with replacement characters."""

    text: str
    logprob: float
    utf8: tuple[int, ...] = ()


@dataclass(frozen=True)
class TokenLogprob:
    """A token the reply chose, and the `top` most likely tokens at that step (best first)."""

    chosen: TokenOdds
    top: tuple[TokenOdds, ...] = ()
