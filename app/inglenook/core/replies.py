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
    dropped_messages: int = 0  # oldest messages left out so the conversation fits
    seed: int = -1  # the seed actually used (a random one when the request asked for random)


@dataclass(frozen=True)
class Finish:
    reason: FinishReason
    message: str = ""  # for "error": what went wrong, in words for the user
