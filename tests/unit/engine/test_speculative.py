"""Speculative decoding without llama.cpp: the n-gram lookup, how many tokens to propose, and
the verification loop against a fake model whose next token is a function of what it has seen."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from inglenook.engine.speculative import (
    DraftLength,
    PromptLookup,
    Tally,
    TokenHistory,
    decode,
    draft_header_mismatch,
)
from inglenook.models.gguf import ArrayInfo, GGUFHeader


class FakeModel:
    """speculative.Target: the token after a sequence is `rule(sequence)`; records every batch
    and keeps a KV cache as a list of tokens. A batch takes 1 s plus 0.1 s a token on `clock`,
    so that guessing pays."""

    def __init__(self, prompt: Sequence[int], rule: object) -> None:
        self.kv = list(prompt[:-1])
        self.rule = rule
        self.batches: list[list[int]] = []
        self._logits: list[int] = []
        self.now = 0.0

    def clock(self) -> float:
        return self.now

    def n_past(self) -> int:
        return len(self.kv)

    def evaluate(self, tokens: Sequence[int]) -> None:
        self.now += 1.0 + 0.1 * len(tokens)
        self.batches.append(list(tokens))
        self._logits = []
        for token in tokens:
            self.kv.append(token)
            self._logits.append(self.rule(self.kv))  # type: ignore[operator]

    def sample(self, index: int) -> int:
        return self._logits[index]

    def keep(self, n: int) -> None:
        del self.kv[n:]


def counting(seen: list[int]) -> int:
    """1 2 3 … 9 0 1 2 …: predictable, so prompt lookup finds it in a prompt that counts."""
    return (seen[-1] + 1) % 10


class Fixed:
    def __init__(self, guesses: list[int]) -> None:
        self.guesses = guesses

    def propose(self, history: TokenHistory, limit: int) -> list[int]:
        return self.guesses[:limit]


def run(prompt: list[int], rule: object, proposer: object, n: int, most: int = 8,
        ) -> tuple[list[int], FakeModel, Tally]:
    model, tally = FakeModel(prompt, rule), Tally()
    tokens = decode(model, TokenHistory(prompt), proposer, DraftLength(most),  # type: ignore[arg-type]
                    tally, lambda: most, model.clock)
    out = [next(tokens) for _ in range(n)]
    tokens.close()
    return out, model, tally


# -- prompt lookup ------------------------------------------------------------------------------
def test_lookup_proposes_what_followed_the_longest_earlier_match() -> None:
    history = TokenHistory([5, 6, 7, 8, 9, 1, 2, 7, 8, 3, 4, 6, 7, 8])
    # [6, 7, 8] occurred once before (followed by 9, 1); [7, 8] more recently (followed by 3).
    assert PromptLookup(3, 1).propose(history, 2) == [9, 1]
    assert PromptLookup(2, 1).propose(history, 2) == [3, 4]


def test_lookup_takes_the_most_recent_match_and_ignores_the_suffix_itself() -> None:
    history = TokenHistory([1, 2, 10, 1, 2, 20, 1, 2])
    assert PromptLookup(2, 2).propose(history, 3) == [20, 1, 2]
    assert PromptLookup(2, 2).propose(TokenHistory([3, 1, 2]), 3) == []


def test_lookup_only_matches_whole_tokens() -> None:
    # 256, 0, 0 pack to bytes holding those of 1, 0 one byte into the 256.
    assert PromptLookup(2, 2).propose(TokenHistory([256, 0, 0, 5, 1, 0]), 4) == []
    history = TokenHistory([1, 0, 9, 256, 0, 0, 5, 1, 0])
    assert PromptLookup(2, 2).propose(history, 2) == [9, 256]


def test_lookup_falls_back_to_shorter_ngrams_down_to_its_minimum() -> None:
    history = TokenHistory([4, 8, 9, 5, 8])
    assert PromptLookup(3, 1).propose(history, 2) == [9, 5]
    assert PromptLookup(3, 2).propose(history, 2) == []


# -- how many to propose -----------------------------------------------------------------------
def timed(step_s: float, most: int = 8) -> DraftLength:
    """After the two plain steps that start a reply (the first is not timed)."""
    length = DraftLength(most)
    assert length.limit() == 0
    length.timed(0, 1, 1.0)  # slow: right after the prompt
    assert length.step_s is None and length.limit() == 0
    length.timed(0, 1, step_s)
    return length


def test_draft_length_grows_on_success_and_backs_off_on_misses() -> None:
    length = timed(0.010)
    assert length.limit() == 8
    length.record(8, 3)
    assert length.limit() == 4
    length.record(4, 4)
    assert length.limit() == 8
    length.record(8, 0)  # a miss at the first token: one guess next time
    assert length.limit() == 1
    length.record(1, 0)  # a second miss in a row: skip one step
    assert [length.limit() for _ in range(2)] == [0, 1]
    length.record(1, 0)  # a third: skip three
    assert [length.limit() for _ in range(4)] == [0, 0, 0, 1]
    length.record(1, 1)  # a hit ends the back-off
    assert length.limit() == 2


def test_guesses_go_on_while_they_pay() -> None:
    length = timed(0.010)  # 100 tokens a second without guesses
    length.timed(4, 5, 0.030)  # 4 more tokens for 20 ms more: 200 a second
    assert length.worthwhile() and length.limit() == 8


def test_guesses_stop_while_they_do_not_pay_and_are_tried_again_later() -> None:
    length = timed(0.010)
    length.timed(4, 2, 0.040)  # 1 more token for 30 ms more: 33 a second
    gap = DraftLength.PROBE_GAP
    assert [length.limit() for _ in range(gap + 1)] == [0] * gap + [8]
    length.timed(8, 1, 0.050)  # the probe gains nothing: the next one waits twice as long
    assert [length.limit() for _ in range(2 * gap + 1)] == [0] * 2 * gap + [8]
    length.timed(8, 9, 0.020)  # a probe that pays: guessing goes on
    length.record(8, 8)
    assert [length.limit() for _ in range(3)] == [8, 8, 8]


def test_guesses_are_judged_once_enough_was_spent_on_them() -> None:
    length = timed(0.010)
    length.timed(1, 1, 0.015)  # a missed guess: 5 ms for nothing, too little to judge by
    assert length.worthwhile()
    length.timed(1, 1, 0.030)
    assert not length.worthwhile()


def test_a_probe_lasts_until_a_guess_is_made() -> None:
    length = timed(0.010)
    length.timed(4, 1, 0.040)
    gap = DraftLength.PROBE_GAP
    assert [length.limit() for _ in range(gap + 3)] == [0] * gap + [8] * 3  # nothing found
    length.timed(8, 1, 0.050)
    assert length.limit() == 0


def test_asking_counts_even_when_nothing_comes_back() -> None:
    """A draft model that is never sure enough to guess still took its time to be asked."""
    length = timed(0.010)
    for _ in range(3):
        length.timed(0, 1, 0.010, asking_s=0.008)
    assert length.spent > 0 and length.gained == 0 and not length.worthwhile()
    assert length.step_s == pytest.approx(0.010)


def test_stalls_count_as_four_steps_at_most() -> None:
    length = timed(0.010)
    length.timed(0, 1, 5.0)
    assert length.step_s == pytest.approx(0.010 + DraftLength.PLAIN_WEIGHT * 0.030)
    length.timed(0, 1, 0.010)  # a faster step counts more
    assert length.step_s == pytest.approx(0.0145)
    length.timed(3, 4, 100.0)
    assert (length.gained, length.spent) == (3, pytest.approx(4 * 0.0145 * 4 - 0.0145))


def test_while_guessing_a_plain_step_is_timed_again_now_and_then() -> None:
    length = timed(0.010)
    limits = []
    for _ in range(DraftLength.REFRESH + 1):
        limits.append(length.limit())
        if limits[-1]:
            length.timed(limits[-1], limits[-1] + 1, 0.012)
            length.record(limits[-1], limits[-1])
    assert limits[:-1] == [8] * DraftLength.REFRESH and limits[-1] == 0
    length.timed(0, 1, 0.010)
    assert length.limit() == 8


# -- verification ------------------------------------------------------------------------------
@pytest.mark.parametrize("guesses", [[], [3, 4, 5, 6], [3, 4, 0, 0], [9, 9, 9], [3, 4, 5, 6, 7, 8,
                                                                                 9, 0, 1]])
def test_the_reply_is_the_models_own_whatever_is_guessed(guesses: list[int]) -> None:
    plain, _, _ = run([1, 2], counting, None, 20)
    assert plain == [3, 4, 5, 6, 7, 8, 9, 0, 1, 2] * 2
    out, model, tally = run([1, 2], counting, Fixed(guesses), 20)
    assert out == plain
    # The KV cache holds the prompt and the reply but its last token, never a rejected guess.
    assert model.kv == [1, 2, *plain[:-1]]
    assert tally.accepted <= tally.drafted


def test_accepted_guesses_save_steps_and_are_counted() -> None:
    out, model, tally = run([1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1, 2], counting,
                            PromptLookup(3, 2), 30)
    assert out == [(3 + i) % 10 for i in range(30)]
    assert tally.drafted > 0 and tally.accepted == tally.drafted
    assert len(model.batches) < 10  # one step for up to nine tokens


def test_a_stop_in_the_middle_of_a_batch_trims_the_cache_to_what_was_yielded() -> None:
    prompt = [1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1, 2]
    out, model, _ = run(prompt, counting, PromptLookup(3, 2), 5)
    assert max(len(b) for b in model.batches) > 5  # the last batch went past the stop
    assert model.kv == [*prompt, *out[:-1]]


def test_room_limits_the_guesses() -> None:
    prompt = [1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1, 2]
    model, tally = FakeModel(prompt, counting), Tally()
    tokens = decode(model, TokenHistory(prompt), PromptLookup(2, 2), DraftLength(8), tally,
                    lambda: 2, model.clock)
    assert [next(tokens) for _ in range(6)] == [3, 4, 5, 6, 7, 8]
    tokens.close()
    assert model.batches == [[2, 3, 4], [5, 6, 7]]


def test_a_judged_proposer_starts_with_two_plain_steps() -> None:
    """A draft model is judged by what its guesses gain: plain steps are timed first."""
    out, model, _tally = run([1, 2], counting, Fixed([3, 4, 5, 6]), 6)
    assert out == [3, 4, 5, 6, 7, 8]
    assert model.batches[:2] == [[2], [3]] and len(model.batches[2]) > 1



def test_a_primed_model_gives_its_first_token_without_a_forward_pass() -> None:
    """The host evaluates the whole prompt, its last token included, in the prompt's batch: the
    first token is sampled from those logits, one forward pass before the first guess."""
    prompt = [1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1, 2]
    plain, _, _ = run(prompt, counting, PromptLookup(3, 2), 8)
    model, tally = FakeModel(prompt, counting), Tally()
    model.evaluate(prompt[-1:])  # as the prompt's last batch leaves it
    model.batches.clear()
    tokens = decode(model, TokenHistory(prompt), PromptLookup(3, 2), DraftLength(8), tally,
                    lambda: 8, model.clock, primed=True)
    assert next(tokens) == 3 and model.batches == []
    out = [3, *(next(tokens) for _ in range(7))]
    tokens.close()
    assert out == plain
    assert model.batches[0][0] == 3  # the first step evaluates the first token, with guesses
    assert model.kv == [*prompt, *out[:-1]]

# -- a draft model's vocabulary ------------------------------------------------------------------
def header(tokens: int = 49152, model: str = "gpt2", bos: int = 1, eos: int = 2) -> GGUFHeader:
    return GGUFHeader("m.gguf", 3, 0, 4, 32, 0, 0, {
        "tokenizer.ggml.model": model, "tokenizer.ggml.tokens": ArrayInfo("string", tokens),
        "tokenizer.ggml.bos_token_id": bos, "tokenizer.ggml.eos_token_id": eos})


def test_draft_headers_must_describe_the_same_vocabulary() -> None:
    assert draft_header_mismatch(header(), header()) is None
    assert draft_header_mismatch(header(), header(tokens=49152 + 100)) is None
    assert "vocabulary of 152,064 tokens" in (draft_header_mismatch(header(), header(152064))
                                              or "")
    assert "kind of tokenizer" in (draft_header_mismatch(header(), header(model="llama")) or "")
    assert "end-of-text" in (draft_header_mismatch(header(), header(eos=0)) or "")
