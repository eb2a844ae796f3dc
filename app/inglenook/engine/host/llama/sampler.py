"""Sampler chains, and a reply held to a grammar."""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import Any

import llama_cpp
import numpy as np

from inglenook.core.sampling import SamplingParams
from inglenook.engine.host.grammar import GrammarError
from inglenook.engine.host.llama.context import Context
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
        self.ptr = llama_cpp.llama_sampler_chain_init(
            llama_cpp.llama_sampler_chain_default_params())
        self.greedy = sp.temperature == 0.0
        self.n_vocab, self.logprobs = model.n_vocab, logprobs
        self.odds: list[Odds] = []
        add = self._add
        if logit_bias:  # llama.cpp copies the array
            biases = (llama_cpp.llama_logit_bias * len(logit_bias))(
                *(llama_cpp.llama_logit_bias(t, b) for t, b in logit_bias))
            add(llama_cpp.llama_sampler_init_logit_bias(model.n_vocab, len(logit_bias), biases))
        self.grammar: Any = None
        if grammar:
            self.grammar = llama_cpp.llama_sampler_init_grammar(
                model.vocab, grammar.encode(), b"root")
            if not self.grammar:
                self.close()
                raise GrammarError("llama.cpp could not read the reply's grammar.")
            self._candidates = _Candidates(model.n_vocab)
        self.refused = 0  # free choices the grammar refused
        # With the arguments llama-cpp-python gives it (its binding's signature), so that the
        # penalties work exactly as there.
        add(llama_cpp.llama_sampler_init_penalties(
            model.n_vocab, sp.repeat_last_n, sp.repeat_penalty, sp.frequency_penalty,
            sp.presence_penalty))
        if sp.temperature < 0.0:
            add(llama_cpp.llama_sampler_init_dist(seed))
        elif self.greedy:
            add(llama_cpp.llama_sampler_init_greedy())
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

    def _add(self, sampler: Any) -> None:
        llama_cpp.llama_sampler_chain_add(self.ptr, sampler)

    def sample(self, ctx: Context, index: int) -> int:
        """The token at `index` of the last batch; the chain accepts it (penalties, Mirostat).
        With a grammar, as llama.cpp's server samples: the chain chooses freely and only its
        choice is checked against the grammar (a whole-vocabulary check each step halved the
        speed); only when the grammar refuses it is the vocabulary masked and chosen again."""
        if self.grammar is None:
            token = int(llama_cpp.llama_sampler_sample(self.ptr, ctx.ptr, index))
        else:
            logits = llama_cpp.llama_get_logits_ith(ctx.ptr, index)
            token = self._candidates.choose(self.ptr, logits)
            if not self._candidates.allowed(self.grammar, token):
                self.refused += 1
                token = self._candidates.choose(self.ptr, logits, first=self.grammar)
            llama_cpp.llama_sampler_accept(self.grammar, token)
            llama_cpp.llama_sampler_accept(self.ptr, token)
        if self.logprobs >= 0:
            self.odds.append(odds_of(ctx.logits(index), token, self.logprobs))
        return token

    def close(self) -> None:
        if self.ptr is not None:
            llama_cpp.llama_sampler_free(self.ptr)
            self.ptr = None
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


class _Candidates:
    """A reusable llama_token_data_array over the whole vocabulary, filled from logits."""

    def __init__(self, n_vocab: int) -> None:
        self.n = n_vocab
        self.data = (llama_cpp.llama_token_data * n_vocab)()
        self.view = np.ctypeslib.as_array(self.data)  # fields id, logit, p
        self.ids = np.arange(n_vocab, dtype=np.int32)
        self.one = (llama_cpp.llama_token_data * 1)()

    def choose(self, chain: Any, logits: Any, first: Any = None) -> int:
        """What `chain` selects (nothing accepted), after `first` masked the candidates."""
        self.view["id"] = self.ids
        self.view["logit"] = np.ctypeslib.as_array(logits, shape=(self.n,))
        self.view["p"] = 0.0
        array = llama_cpp.llama_token_data_array(self.data, self.n, -1, False)
        if first is not None:
            llama_cpp.llama_sampler_apply(first, ctypes.byref(array))
        llama_cpp.llama_sampler_apply(chain, ctypes.byref(array))
        if not 0 <= array.selected < array.size:
            raise GrammarError("No token can continue the reply in its format.")
        return int(array.data[array.selected].id)

    def allowed(self, grammar: Any, token: int) -> bool:
        self.one[0] = llama_cpp.llama_token_data(token, 0.0, 0.0)
        array = llama_cpp.llama_token_data_array(self.one, 1, -1, False)
        llama_cpp.llama_sampler_apply(grammar, ctypes.byref(array))
        return bool(np.isfinite(array.data[0].logit))
