"""Sampler chains, and a reply held to a grammar."""

from __future__ import annotations

import ctypes
import math
from collections.abc import Sequence
from typing import Any

import llama_cpp
import numpy as np

from inglenook.core.sampling import SamplingParams
from inglenook.engine.host.grammar import GrammarError
from inglenook.engine.host.llama.context import Context
from inglenook.engine.host.llama.library import ATTR_CONTROL, ATTR_USER_DEFINED
from inglenook.engine.host.llama.model import Model

_MIROSTAT_M = 100  # as llama-cpp-python


class Sampler:
    """The chain llama-cpp-python's Llama._init_sampler builds for these settings: penalties,
    then greedy (temperature 0), or Mirostat, or top-k, typical, top-p, min-p, temperature and
    a seeded draw. Prompt tokens are not fed to the penalties, as there.

    `logit_bias` (token id, value) comes first, before the penalties, as in llama.cpp's
    common sampler. With `logprobs` >= 0 every sampled token's odds (Odds: its log-probability
    and that many alternatives) are appended to `odds`, taken by the sequence in order."""

    def __init__(self, model: Model, sp: SamplingParams, seed: int, grammar: str = "",
                 logit_bias: Sequence[tuple[int, float]] = (), logprobs: int = -1) -> None:
        self.ptr = _chain()
        self.greedy = sp.temperature == 0.0
        self.n_vocab, self.logprobs = model.n_vocab, logprobs
        self.odds: list[Odds] = []
        self.grammar: Any = None
        self.pre: Any = None  # with a grammar: the steps before truncation, a chain apart
        if grammar:
            self.grammar = llama_cpp.llama_sampler_init_grammar(
                model.vocab, grammar.encode(), b"root")
            if not self.grammar:
                self.close()
                raise GrammarError("llama.cpp could not read the reply's grammar.")
            self.pre = _chain()
            self._candidates = _Candidates(model.n_vocab, first_bytes(model))
        self.full_masks = 0  # steps the grammar was applied to the whole vocabulary
        first = self.pre if grammar else self.ptr
        if logit_bias:  # llama.cpp copies the array
            biases = (llama_cpp.llama_logit_bias * len(logit_bias))(
                *(llama_cpp.llama_logit_bias(t, b) for t, b in logit_bias))
            llama_cpp.llama_sampler_chain_add(first, llama_cpp.llama_sampler_init_logit_bias(
                model.n_vocab, len(logit_bias), biases))
        # With the arguments llama-cpp-python gives it (its binding's signature), so that the
        # penalties work exactly as there.
        llama_cpp.llama_sampler_chain_add(first, llama_cpp.llama_sampler_init_penalties(
            model.n_vocab, sp.repeat_last_n, sp.repeat_penalty, sp.frequency_penalty,
            sp.presence_penalty))
        add = self._add
        # When the allowed tokens among the likeliest are enough (_Candidates.choose): `need`
        # of them (1 greedy, or top-k's k; 0: only the whole vocabulary will do), or all that
        # min-p can keep (`gap`: log min-p; tokens further below the best are cut).
        self.need, self.gap = 0, -math.inf
        if sp.temperature < 0.0:
            add(llama_cpp.llama_sampler_init_dist(seed))
        elif self.greedy:
            add(llama_cpp.llama_sampler_init_greedy())
            self.need = 1
        elif sp.mirostat_mode == 1:
            add(llama_cpp.llama_sampler_init_mirostat(
                model.n_vocab, seed, sp.mirostat_tau, sp.mirostat_eta, _MIROSTAT_M))
        elif sp.mirostat_mode == 2:
            add(llama_cpp.llama_sampler_init_mirostat_v2(seed, sp.mirostat_tau, sp.mirostat_eta))
        else:
            add(llama_cpp.llama_sampler_init_top_k(sp.top_k))
            add(llama_cpp.llama_sampler_init_typical(sp.typical_p, 1))
            add(llama_cpp.llama_sampler_init_top_p(sp.top_p, 1))
            add(llama_cpp.llama_sampler_init_min_p(sp.min_p, 1))
            add(llama_cpp.llama_sampler_init_temp(sp.temperature))
            add(llama_cpp.llama_sampler_init_dist(seed))
            self.need = max(sp.top_k, 0)
            self.gap = math.log(sp.min_p) if 0.0 < sp.min_p <= 1.0 else -math.inf

    def _add(self, sampler: Any) -> None:
        llama_cpp.llama_sampler_chain_add(self.ptr, sampler)

    def sample(self, ctx: Context, index: int) -> int:
        """The token at `index` of the last batch; the chains accept it (penalties, Mirostat).
        With a grammar the choice is among the tokens it allows, as if it had masked the whole
        vocabulary first; it checks only the likeliest, widening while they hold too few (a
        whole-vocabulary check each step halved the speed)."""
        if self.grammar is None:
            token = int(llama_cpp.llama_sampler_sample(self.ptr, ctx.ptr, index))
        else:
            logits = llama_cpp.llama_get_logits_ith(ctx.ptr, index)
            token, whole = self._candidates.choose(self.pre, self.ptr, self.grammar, logits,
                                                   self.need, self.gap)
            self.full_masks += whole
            for chain in (self.grammar, self.pre, self.ptr):
                llama_cpp.llama_sampler_accept(chain, token)
        if self.logprobs >= 0:
            self.odds.append(odds_of(ctx.logits(index), token, self.logprobs))
        return token

    def close(self) -> None:
        for chain in (self.ptr, self.pre):
            if chain is not None:
                llama_cpp.llama_sampler_free(chain)
        self.ptr = self.pre = None
        if self.grammar is not None:
            llama_cpp.llama_sampler_free(self.grammar)
            self.grammar = None


Odds = tuple[float, list[tuple[int, float]]]  # a token's log-probability; (id, logprob) of the top


def odds_of(logits: np.ndarray, token: int, top: int) -> Odds:
    """The log-probability of `token` under the softmax of the raw logits (before any
    sampler), and the `top` most likely tokens' (best first), as OpenAI reports them."""
    z = logits.astype(np.float64)
    z -= z.max()
    z -= np.log(np.exp(z).sum())
    best: list[tuple[int, float]] = []
    if top:
        ids = np.argpartition(-z, top - 1)[:top]
        best = [(int(i), float(z[i])) for i in ids[np.argsort(-z[ids], kind="stable")]]
    return float(z[token]), best


def _chain() -> Any:
    return llama_cpp.llama_sampler_chain_init(llama_cpp.llama_sampler_chain_default_params())


ANY_BYTE = 256  # first_bytes' mark for tokens always checked (control tokens, end of generation)


def first_bytes(model: Model) -> tuple[np.ndarray, np.ndarray]:
    """Each token's first byte (ANY_BYTE for control tokens, the end of generation and empty
    pieces), and the token that is each byte alone (-1 where the vocabulary has none); made
    once per model, at its first reply in a format (0.15 s for 49,152 tokens on this VM)."""
    if model.first_bytes is None:
        first = np.full(model.n_vocab, ANY_BYTE, dtype=np.int16)
        alone = np.full(ANY_BYTE, -1, dtype=np.int32)
        special = ATTR_CONTROL | ATTR_USER_DEFINED
        for token in range(model.n_vocab):
            piece = model.piece(token)
            if not piece or model.is_eog(token) or model.attr(token) & special:
                continue
            first[token] = piece[0]
            if len(piece) == 1 and alone[piece[0]] < 0:
                alone[piece[0]] = token
        model.first_bytes = (first, alone)
    return model.first_bytes


class _Candidates:
    """Reusable llama_token_data arrays over the whole vocabulary, filled from logits: `all`,
    and `part` for the likeliest of them.

    When the likeliest hold too few allowed tokens, the grammar is asked first which bytes may
    come next (one token per byte, 256 checks), and then only the tokens starting with one of
    them: a token whose first byte cannot come next is refused by the grammar anyway. Where the
    reply must spell out a key (`{"n` → `otes"`), that is a few hundred tokens, not 50,000
    (a whole mask took 5-25 ms with a JSON schema's grammar)."""

    FIRST_LOOK = 64  # the likeliest tokens checked first (or 4 × the k of top-k)
    WIDER_LOOK = 2048  # then these, then the whole vocabulary

    def __init__(self, n_vocab: int, bytes_of: tuple[np.ndarray, np.ndarray]) -> None:
        self.n = n_vocab
        self.first, alone = bytes_of
        self.by_first_byte = True  # False: mask the whole vocabulary (tests' reference)
        self.probe_bytes = np.nonzero(alone >= 0)[0]
        self.probe = (llama_cpp.llama_token_data * len(self.probe_bytes))()
        self.probe_view = np.ctypeslib.as_array(self.probe)
        self.probe_ids = alone[self.probe_bytes]
        self.open_bytes = np.ones(ANY_BYTE + 1, dtype=bool)  # bytes with no token alone
        self.open_bytes[self.probe_bytes] = False
        self.all = (llama_cpp.llama_token_data * n_vocab)()
        self.part = (llama_cpp.llama_token_data * n_vocab)()
        self.view = np.ctypeslib.as_array(self.all)  # fields id, logit, p
        self.part_view = np.ctypeslib.as_array(self.part)
        self.ids = np.arange(n_vocab, dtype=np.int32)

    def choose(self, pre: Any, post: Any, grammar: Any, logits: Any, need: int,
               gap: float) -> tuple[int, bool]:
        """What `pre`, the grammar's mask and `post` select (nothing accepted), and whether
        the whole vocabulary had to be masked. The likeliest m tokens after `pre` are masked
        first, and `post` chooses among those allowed when they are enough: `need` of them
        (greedy's best; top-k's k: what it keeps after a whole mask), or every token below
        the window is more than `gap` below the best allowed (min-p cuts them whatever top-k
        and top-p kept; top-p's sums then leave out their tiny share)."""
        view = self.view
        view["id"] = self.ids
        view["logit"] = np.ctypeslib.as_array(logits, shape=(self.n,))
        view["p"] = 0.0
        whole = llama_cpp.llama_token_data_array(self.all, self.n, -1, False)
        llama_cpp.llama_sampler_apply(pre, ctypes.byref(whole))  # biases, penalties: in place
        for m in (max(self.FIRST_LOOK, 4 * need), self.WIDER_LOOK) if need else ():
            if m >= self.n:
                break
            top = np.argpartition(view["logit"], self.n - m)[self.n - m:]
            window = self.part_view[:m]
            window[:] = view[top]
            floor = float(window["logit"].min())
            part = llama_cpp.llama_token_data_array(self.part, m, -1, False)
            llama_cpp.llama_sampler_apply(grammar, ctypes.byref(part))
            allowed = window[np.isfinite(window["logit"])]
            if len(allowed) and (len(allowed) >= need
                                 or float(allowed["logit"].max()) + gap > floor):
                self.part_view[:len(allowed)] = allowed
                return self._select(post, self.part, len(allowed)), False
        if self.by_first_byte:
            return self._by_first_byte(grammar, post), True
        llama_cpp.llama_sampler_apply(grammar, ctypes.byref(whole))
        return self._select(post, self.all, self.n), True

    def _by_first_byte(self, grammar: Any, post: Any) -> int:
        """The whole mask's choice, checking only tokens whose first byte may come next."""
        probe = self.probe_view
        probe["id"], probe["logit"], probe["p"] = self.probe_ids, 0.0, 0.0
        array = llama_cpp.llama_token_data_array(self.probe, len(probe), -1, False)
        llama_cpp.llama_sampler_apply(grammar, ctypes.byref(array))
        next_bytes = self.open_bytes.copy()
        next_bytes[self.probe_bytes[np.isfinite(probe["logit"])]] = True
        ids = np.nonzero(next_bytes[self.first])[0]
        window = self.part_view[:len(ids)]
        window[:] = self.view[ids]
        part = llama_cpp.llama_token_data_array(self.part, len(ids), -1, False)
        llama_cpp.llama_sampler_apply(grammar, ctypes.byref(part))
        allowed = window[np.isfinite(window["logit"])]
        self.part_view[:len(allowed)] = allowed
        return self._select(post, self.part, len(allowed))

    @staticmethod
    def _select(post: Any, data: Any, size: int) -> int:
        array = llama_cpp.llama_token_data_array(data, size, -1, False)
        llama_cpp.llama_sampler_apply(post, ctypes.byref(array))
        if not 0 <= array.selected < array.size:
            raise GrammarError("No token can continue the reply in its format.")
        return int(array.data[array.selected].id)
