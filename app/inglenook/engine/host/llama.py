"""The adapter: the only module that touches llama-cpp-python, and through it only libllama's C
functions (its low-level API), never the `Llama` class or its private attributes.

    Model      weights and vocabulary: tokenize, pieces, token attributes
    Context    KV memory for `n_seq` sequences and llama_decode
    SeqMemory  one sequence's KV cells and the tokens they hold (kv_reuse.KvMemory)
    EmbeddingContext  a context of its own in embedding mode: pooled vectors, no chat KV
    Batch      the tokens of one llama_decode
    Sampler    a sampler chain built as llama-cpp-python's Llama builds it, so a seeded reply
               here is the one `create_chat_completion` gives

Each sequence has a KV stream of its own (`kv_unified` off): a step's batch of one token from
each of four sequences then gives every one of them exactly the logits it would get alone,
where a unified buffer rounds differently (tests/integration/test_batching.py). llama.cpp puts
only sequences with consecutive ids in one forward pass, so a batch lists its tokens by sequence
and slots.py keeps busy sequences next to each other.

The C signatures are those of llama-cpp-python 0.3.x (pyproject pins it below 0.4).
"""

from __future__ import annotations

import contextlib
import ctypes
import sys
from array import array
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import llama_cpp
import numpy as np

from inglenook.core.sampling import SamplingParams
from inglenook.engine.host.grammar import GrammarError
from inglenook.engine.kv_reuse import KvMemory
from inglenook.engine.kv_states import count

KV_TYPES = {"f16": llama_cpp.GGML_TYPE_F16, "q8_0": llama_cpp.GGML_TYPE_Q8_0,
            "q4_0": llama_cpp.GGML_TYPE_Q4_0}
# Tokens that plain text must never produce: llama.cpp reads them only with special tokens on.
ATTR_CONTROL = llama_cpp.LLAMA_TOKEN_ATTR_CONTROL | llama_cpp.LLAMA_TOKEN_ATTR_UNKNOWN
ATTR_USER_DEFINED = llama_cpp.LLAMA_TOKEN_ATTR_USER_DEFINED
ATTR_LSTRIP, ATTR_RSTRIP = llama_cpp.LLAMA_TOKEN_ATTR_LSTRIP, llama_cpp.LLAMA_TOKEN_ATTR_RSTRIP
DECODE_ABORTED = 2  # llama_decode: the abort callback stopped it
LOG_ERROR = 3  # ggml_log_level
_GPU_DEVICE_TYPES = (1, 2)  # ggml_backend_dev_type: CPU=0, GPU=1, IGPU=2, ACCEL=3
_MIROSTAT_M = 100  # as llama-cpp-python

llama_cpp.llama_backend_init()


# ---- the log ----------------------------------------------------------------------------------
_log_handler: Callable[[int, str], None] | None = None


@llama_cpp.llama_log_callback
def _on_log(level: int, text: bytes, _data: object) -> None:
    line = text.decode("utf-8", errors="replace")
    if _log_handler is not None:
        _log_handler(level, line)
    elif level == LOG_ERROR:  # the engine log (stderr) keeps llama.cpp's errors only
        sys.stderr.write(line)


llama_cpp.llama_log_set(_on_log, ctypes.c_void_p(0))


@contextlib.contextmanager
def log_to(handler: Callable[[int, str], None]) -> Iterator[None]:
    """Route llama.cpp's log lines (level, text) to `handler` for a while."""
    global _log_handler
    _log_handler = handler
    try:
        yield
    finally:
        _log_handler = None


# ---- the machine ------------------------------------------------------------------------------
def gpu_offload_supported() -> bool:
    return bool(llama_cpp.llama_supports_gpu_offload())


def gpu_memory() -> tuple[int, int]:
    """Free and total memory of the GPUs ggml can offload to: (0, 0) on a CPU-only build.
    Read through ggml's device registry, which libllama links; any failure means unknown."""
    try:
        lib = llama_cpp.llama_cpp._lib
        lib.ggml_backend_dev_get.restype = ctypes.c_void_p
        lib.ggml_backend_dev_get.argtypes = [ctypes.c_size_t]
        lib.ggml_backend_dev_type.argtypes = [ctypes.c_void_p]
        lib.ggml_backend_dev_memory.argtypes = [
            ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_size_t)]
        free_total = [0, 0]
        for i in range(lib.ggml_backend_dev_count()):
            device = lib.ggml_backend_dev_get(i)
            if lib.ggml_backend_dev_type(device) not in _GPU_DEVICE_TYPES:
                continue
            free, total = ctypes.c_size_t(), ctypes.c_size_t()
            lib.ggml_backend_dev_memory(device, ctypes.byref(free), ctypes.byref(total))
            free_total[0] += free.value
            free_total[1] += total.value
        return free_total[0], free_total[1]
    except (AttributeError, OSError, ValueError):
        return 0, 0


def max_sequences() -> int:
    return int(llama_cpp.llama_max_parallel_sequences())


# ---- the model --------------------------------------------------------------------------------
class Model:
    """`progress(fraction)` is called while the weights load; returning False cancels."""

    def __init__(self, path: str, n_gpu_layers: int, use_mmap: bool, use_mlock: bool,
                 progress: Callable[[float], bool] | None = None) -> None:
        params = llama_cpp.llama_model_default_params()
        params.n_gpu_layers = 0x7FFFFFFF if n_gpu_layers == -1 else n_gpu_layers
        params.use_mmap, params.use_mlock = use_mmap, use_mlock
        if progress is not None:
            self._progress = llama_cpp.llama_progress_callback(
                lambda fraction, _data: bool(progress(float(fraction))))
            params.progress_callback = self._progress
        self.ptr = llama_cpp.llama_model_load_from_file(path.encode("utf-8"), params)
        if not self.ptr:
            raise ValueError(f"Failed to load model from file: {path}")
        self.vocab = llama_cpp.llama_model_get_vocab(self.ptr)
        self.n_vocab = int(llama_cpp.llama_vocab_n_tokens(self.vocab))
        self.bos = int(llama_cpp.llama_vocab_bos(self.vocab))
        self.eos = int(llama_cpp.llama_vocab_eos(self.vocab))
        self.add_bos = bool(llama_cpp.llama_vocab_get_add_bos(self.vocab))
        self.vocab_type = int(llama_cpp.llama_vocab_type(self.vocab))
        # Fill-in-the-middle: prefix, suffix and middle tokens (-1 where the vocabulary has none).
        self.fim = (int(llama_cpp.llama_vocab_fim_pre(self.vocab)),
                    int(llama_cpp.llama_vocab_fim_suf(self.vocab)),
                    int(llama_cpp.llama_vocab_fim_mid(self.vocab)))
        # Recurrent state cannot be cut back to a shorter prefix (no speculation, no shift).
        self.recurrent = bool(llama_cpp.llama_model_is_recurrent(self.ptr)
                              or llama_cpp.llama_model_is_hybrid(self.ptr))
        self._buffer = (llama_cpp.llama_token * 4096)()

    def tokenize(self, text: bytes, special: bool) -> list[int]:
        """Never adds BOS: tokenizing.py decides where it goes."""
        need = len(text) + 8
        if need > len(self._buffer):
            self._buffer = (llama_cpp.llama_token * need)()
        n = llama_cpp.llama_tokenize(self.vocab, text, len(text), self._buffer,
                                     len(self._buffer), False, special)
        if n < 0:  # more tokens than bytes (cannot happen with +8, but llama.cpp says so)
            self._buffer = (llama_cpp.llama_token * -n)()
            n = llama_cpp.llama_tokenize(self.vocab, text, len(text), self._buffer, -n, False,
                                         special)
        return self._buffer[:n]

    def piece(self, token: int, special: bool = False) -> bytes:
        size = 64
        while True:
            buf = ctypes.create_string_buffer(size)
            n = llama_cpp.llama_token_to_piece(self.vocab, token, buf, size, 0, special)
            if n >= 0:
                return buf.raw[:n]
            size = -n

    def attr(self, token: int) -> int:
        return int(llama_cpp.llama_vocab_get_attr(self.vocab, token))

    def text(self, token: int) -> bytes:
        return llama_cpp.llama_vocab_get_text(self.vocab, token) or b""

    def is_eog(self, token: int) -> bool:
        return bool(llama_cpp.llama_vocab_is_eog(self.vocab, token))

    def close(self) -> None:
        if self.ptr:
            llama_cpp.llama_model_free(self.ptr)
            self.ptr = None


# ---- the context ------------------------------------------------------------------------------
class Context:
    """`n_seq` sequences (ids 0..n_seq-1) of `n_ctx_seq` cells each."""

    def __init__(self, model: Model, n_ctx_seq: int, n_seq: int, n_batch: int, n_threads: int,
                 n_threads_batch: int, flash_attn: bool, kv_type: str) -> None:
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = n_ctx_seq * n_seq
        params.n_batch = params.n_ubatch = min(n_batch, params.n_ctx)
        params.n_seq_max = n_seq
        params.kv_unified = False
        params.n_threads, params.n_threads_batch = n_threads, n_threads_batch
        params.flash_attn_type = (llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED if flash_attn
                                  else llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED)
        params.type_k = params.type_v = KV_TYPES[kv_type]
        params.no_perf = True
        self.model = model
        self.ptr = llama_cpp.llama_init_from_model(model.ptr, params)
        if not self.ptr:
            raise ValueError("Failed to create the llama.cpp context (out of memory?)")
        self.mem = llama_cpp.llama_get_memory(self.ptr)
        self.n_seq = n_seq
        self.n_ctx_seq = int(llama_cpp.llama_n_ctx_seq(self.ptr))
        self.n_batch = int(llama_cpp.llama_n_batch(self.ptr))
        self.can_shift = bool(llama_cpp.llama_memory_can_shift(self.mem))
        self._abort_cb: Any = None

    def decode(self, batch: Batch) -> int:
        """llama_decode's status: 0 done, DECODE_ABORTED, anything else a failure."""
        batch.ptr.n_tokens = batch.n
        return int(llama_cpp.llama_decode(self.ptr, batch.ptr))

    def logits(self, index: int) -> np.ndarray:
        """The logits at `index` of the last batch (a view, valid until the next decode)."""
        return np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(self.ptr, index),
                                     shape=(self.model.n_vocab,))

    def set_threads(self, n_threads: int, n_threads_batch: int) -> None:
        llama_cpp.llama_set_n_threads(self.ptr, n_threads, n_threads_batch)

    def set_abort(self, callback: Any) -> None:
        """A ggml_abort_callback (see abort_callback), or None. ggml calls it for every graph
        node, which costs decoding speed: install it only around long prompt batches."""
        self._abort_cb = callback
        llama_cpp.llama_set_abort_callback(self.ptr, callback or _NO_ABORT, None)

    def sequence(self, seq: int) -> SeqMemory:
        return SeqMemory(self, seq)

    def close(self) -> None:
        if self.ptr:
            llama_cpp.llama_free(self.ptr)
            self.ptr = None


def abort_callback(should_stop: Callable[[], bool]) -> Any:
    """A C callback for Context.set_abort; keep a reference while it is installed."""
    return llama_cpp.ggml_abort_callback(lambda _data: bool(should_stop()))


_NO_ABORT = llama_cpp.ggml_abort_callback()  # a NULL callback


class SeqMemory:
    """One sequence's KV cells and the tokens they hold (kv_reuse.KvMemory). States are the
    sequence's cells only (llama_state_seq_*): no logits, ~6x faster than a whole state."""

    def __init__(self, ctx: Context, seq: int) -> None:
        self.ctx, self.seq = ctx, seq
        self.held = array("i")  # the tokens in the cells, position by position

    @property
    def n(self) -> int:
        return len(self.held)

    def tokens(self) -> bytes:
        return self.held.tobytes()

    def appended(self, tokens: Sequence[int]) -> None:
        """Tokens just decoded into this sequence after the ones held."""
        self.held.extend(tokens)

    def keep(self, n: int) -> bool:
        ok = bool(llama_cpp.llama_memory_seq_rm(self.ctx.mem, self.seq, n, -1))
        if ok:
            del self.held[n:]
        return ok

    def cut(self, start: int, end: int) -> bool:
        mem = self.ctx.mem
        if not self.ctx.can_shift or not llama_cpp.llama_memory_seq_rm(mem, self.seq, start, end):
            return False
        llama_cpp.llama_memory_seq_add(mem, self.seq, end, -1, start - end)
        del self.held[start:end]
        return True

    def copy_from(self, other: KvMemory, n: int) -> None:
        """Make this sequence hold the first `n` tokens of another's (llama_memory_seq_cp).
        Across streams llama.cpp copies the whole stream at the next decode: the caller
        decodes into this sequence before reading or writing its state."""
        assert isinstance(other, SeqMemory) and other.ctx is self.ctx
        llama_cpp.llama_memory_seq_rm(self.ctx.mem, self.seq, -1, -1)
        llama_cpp.llama_memory_seq_cp(self.ctx.mem, other.seq, self.seq, -1, -1)
        self.held = array("i", other.held[:other.n])
        self.keep(n)

    def save(self) -> bytearray:
        ctx = self.ctx.ptr
        size = llama_cpp.llama_state_seq_get_size(ctx, self.seq)
        data = bytearray(size)
        written = llama_cpp.llama_state_seq_get_data(
            ctx, (ctypes.c_uint8 * size).from_buffer(data), size, self.seq)
        del data[written:]
        return data

    def restore(self, data: bytearray, tokens: bytes) -> bool:
        self.clear()
        read = llama_cpp.llama_state_seq_set_data(
            self.ctx.ptr, (ctypes.c_uint8 * len(data)).from_buffer(data), len(data), self.seq)
        n = count(tokens)
        if read != len(data) or llama_cpp.llama_memory_seq_pos_max(
                self.ctx.mem, self.seq) != n - 1:
            self.clear()
            return False
        self.held = array("i")
        self.held.frombytes(tokens)
        return True

    def clear(self) -> None:
        llama_cpp.llama_memory_seq_rm(self.ctx.mem, self.seq, -1, -1)
        self.held = array("i")


POOLING = {"mean": llama_cpp.LLAMA_POOLING_TYPE_MEAN, "cls": llama_cpp.LLAMA_POOLING_TYPE_CLS,
           "last": llama_cpp.LLAMA_POOLING_TYPE_LAST}


class EmbeddingContext:
    """Texts in, one pooled vector each out: `n_ctx` tokens per batch of up to `n_seq` texts,
    each text its own sequence; the cells are cleared after every batch."""

    def __init__(self, model: Model, n_ctx: int, n_seq: int, pooling: str,
                 n_threads: int) -> None:
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = params.n_batch = params.n_ubatch = n_ctx  # a text is read in one ubatch
        params.n_seq_max = n_seq
        params.kv_unified = True
        params.embeddings = True
        params.pooling_type = POOLING[pooling]
        params.n_threads = params.n_threads_batch = n_threads
        params.no_perf = True
        self.model, self.n_ctx, self.n_seq = model, n_ctx, n_seq
        self.ptr = llama_cpp.llama_init_from_model(model.ptr, params)
        if not self.ptr:
            raise ValueError("Failed to create the llama.cpp embedding context")
        self.mem = llama_cpp.llama_get_memory(self.ptr)
        self.dimensions = int(llama_cpp.llama_model_n_embd_out(model.ptr))
        # An encoder alone (BERT) is read with llama_encode, as llama.cpp's embedding example.
        self._encode = bool(llama_cpp.llama_model_has_encoder(model.ptr)
                            and not llama_cpp.llama_model_has_decoder(model.ptr))
        self._batch = llama_cpp.llama_batch_init(n_ctx, 0, 1)

    def tokenize(self, text: bytes) -> list[int]:
        """With the model's own BOS/CLS, EOS/SEP; control strings in the text stay text."""
        vocab, need = self.model.vocab, len(text) + 8
        buffer = (llama_cpp.llama_token * need)()
        n = llama_cpp.llama_tokenize(vocab, text, len(text), buffer, need, True, False)
        return buffer[:max(n, 0)]

    def embed(self, texts: Sequence[Sequence[int]]) -> np.ndarray:
        """Pooled vectors (len(texts), dimensions) of token lists that fit together in one
        batch (at most n_seq of them, n_ctx tokens in all)."""
        b, i = self._batch, 0
        for seq, tokens in enumerate(texts):
            for pos, token in enumerate(tokens):
                b.token[i], b.pos[i], b.n_seq_id[i], b.logits[i] = token, pos, 1, True
                b.seq_id[i][0] = seq
                i += 1
        b.n_tokens = i
        if self.mem:
            llama_cpp.llama_memory_clear(self.mem, True)
        status = (llama_cpp.llama_encode if self._encode else llama_cpp.llama_decode)(self.ptr, b)
        if status != 0:
            raise RuntimeError(f"llama.cpp could not read the texts (status {status})")
        rows = np.empty((len(texts), self.dimensions), dtype=np.float32)
        for seq in range(len(texts)):
            pointer = llama_cpp.llama_get_embeddings_seq(self.ptr, seq)
            if not pointer:
                raise RuntimeError("llama.cpp gave no pooled vector")
            rows[seq] = np.ctypeslib.as_array(pointer, shape=(self.dimensions,))
        return rows

    def close(self) -> None:
        if self._batch is not None:
            llama_cpp.llama_batch_free(self._batch)
            self._batch = None
        if self.ptr:
            llama_cpp.llama_free(self.ptr)
            self.ptr = None


# ---- batches and sampling ---------------------------------------------------------------------
class Batch:
    def __init__(self, capacity: int) -> None:
        self.ptr = llama_cpp.llama_batch_init(capacity, 0, 1)
        self.capacity = capacity
        self.n = 0
        b = self.ptr
        self._token, self._pos, self._n_seq, self._seq, self._logits = (
            b.token, b.pos, b.n_seq_id, b.seq_id, b.logits)

    def clear(self) -> None:
        self.n = 0

    def add(self, token: int, pos: int, seq: int, logits: bool) -> int:
        """Append a token; its index in the batch (where its logits are read)."""
        i = self.n
        self._token[i] = token
        self._pos[i] = pos
        self._n_seq[i] = 1
        self._seq[i][0] = seq
        self._logits[i] = logits
        self.n = i + 1
        return i

    def close(self) -> None:
        if self.ptr is not None:
            llama_cpp.llama_batch_free(self.ptr)
            self.ptr = None


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


# ---- quantizing -------------------------------------------------------------------------------
def quantize(source: str, output: str, ftype: int, threads: int, allow_requantize: bool) -> int:
    """llama_model_quantize's status (0: written)."""
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = ftype
    params.nthread = threads
    params.allow_requantize = allow_requantize
    return int(llama_cpp.llama_model_quantize(source.encode(), output.encode(),
                                              ctypes.byref(params)))
