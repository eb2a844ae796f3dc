"""Contexts (KV memory and llama_decode), one sequence's memory, embedding contexts and
batches."""

from __future__ import annotations

import ctypes
from array import array
from collections.abc import Callable, Sequence
from typing import Any

import llama_cpp
import numpy as np

from inglenook.engine.host.llama.library import KV_TYPES, take_buffers
from inglenook.engine.host.llama.model import Model
from inglenook.engine.kv_reuse import KvMemory
from inglenook.engine.kv_states import count


# ---- the context ------------------------------------------------------------------------------
class Context:
    """`n_seq` sequences (ids 0..n_seq-1) of up to `n_ctx_seq` cells each.

    Without a pool (`n_pool` 0) each sequence has a KV stream of its own (`kv_unified` off):
    n_ctx_seq × n_seq cells reserved, and a batch of four gives each exactly the logits it gets
    alone. With a pool, the sequences draw cells from one unified cache of `n_pool` (as
    llama-server's parallel slots): memory follows the tokens in flight, with flash attention
    on (docs/memory.md: what the pool changes in rounding)."""

    def __init__(self, model: Model, n_ctx_seq: int, n_seq: int, n_batch: int, n_threads: int,
                 n_threads_batch: int, flash_attn: bool, kv_type: str,
                 swa_full: bool = True, n_pool: int = 0) -> None:
        params = llama_cpp.llama_context_default_params()
        self.pooled = n_pool > 0
        params.n_ctx = max(n_pool, n_ctx_seq) if self.pooled else n_ctx_seq * n_seq
        params.n_batch = params.n_ubatch = min(n_batch, params.n_ctx)
        params.n_seq_max = n_seq
        params.kv_unified = self.pooled
        # Every token's cells in sliding-window layers too (llama.cpp's default), so a
        # conversation can be cut back anywhere (core/families.py); off, only the window's
        # (the pool's choice, host/loading.py).
        params.swa_full = swa_full
        params.n_threads, params.n_threads_batch = n_threads, n_threads_batch
        params.flash_attn_type = (llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED
                                  if flash_attn or self.pooled
                                  else llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED)
        params.type_k = params.type_v = KV_TYPES[kv_type]
        params.no_perf = True
        self.model = model
        take_buffers()
        self.ptr = llama_cpp.llama_init_from_model(model.ptr, params)
        if not self.ptr:
            raise ValueError("Failed to create the llama.cpp context (out of memory?)")
        self.buffers = take_buffers()  # KV cells and compute buffers, as llama.cpp allocated
        self.mem = llama_cpp.llama_get_memory(self.ptr)
        self.n_seq = n_seq
        # Cells all sequences may hold together: the pool, or every stream's.
        self.n_pool = int(llama_cpp.llama_n_ctx(self.ptr))
        self.n_ctx_seq = (min(n_ctx_seq, self.n_pool) if self.pooled
                          else int(llama_cpp.llama_n_ctx_seq(self.ptr)))
        self.n_batch = int(llama_cpp.llama_n_batch(self.ptr))
        # llama.cpp keeps only the window's cells of sliding-window layers unless every
        # sequence has a stream of its own (then "full-size SWA cache") or swa_full is set.
        self.swa_full = model.n_swa == 0 or bool(params.swa_full) or (
            n_seq > 1 and not params.kv_unified)
        # A window-only cache loses its start, and a recurrent state cannot lose a block from
        # its middle (llama.cpp says it "can shift": its positions move, its state does not
        # forget): no shift (core/families.py).
        self.can_shift = (bool(llama_cpp.llama_memory_can_shift(self.mem)) and self.swa_full
                          and not model.recurrent)
        self._abort_cb: Any = None

    def pool_used(self) -> int:
        """Cells of the pool in use: each sequence's span (shared cells counted per sequence,
        so at most this many)."""
        used = 0
        for seq in range(self.n_seq):
            high = llama_cpp.llama_memory_seq_pos_max(self.mem, seq)
            if high >= 0:
                used += high - llama_cpp.llama_memory_seq_pos_min(self.mem, seq) + 1
        return used

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

    def set_causal(self, causal: bool) -> None:
        """Attention that looks back only (text), or both ways within a batch (some images)."""
        llama_cpp.llama_set_causal_attn(self.ptr, causal)

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
    sequence's cells only (llama_state_seq_*): no logits, ~6x faster than a whole state.

    Cells are counted in tokens, one per token or image embedding; `pos` is each one's KV
    position, what llama.cpp's seq_rm and seq_pos_max go by. They are the same numbers
    except after an image placed with M-RoPE (Qwen-VL): its embeddings all share the image's
    first position (section 0; rows and columns are the other sections), and the text after
    it continues max(rows, cols) positions on (`next_pos`). A cut inside such an image is
    refused: llama.cpp would remove all of it."""

    def __init__(self, ctx: Context, seq: int) -> None:
        self.ctx, self.seq = ctx, seq
        self.held = array("i")  # the tokens in the cells, in order
        self.pos = array("i")  # their positions
        self.next_pos = 0  # where the next token goes

    @property
    def n(self) -> int:
        return len(self.held)

    def tokens(self) -> bytes:
        return self.held.tobytes()

    def position(self, n: int) -> int:
        """The KV position of the n-th token held (of the next one when n is the count)."""
        return self.pos[n] if n < len(self.pos) else self.next_pos

    def appended(self, tokens: Sequence[int], positions: Sequence[int] | None = None,
                 next_pos: int | None = None) -> None:
        """Tokens just decoded into this sequence after the ones held: text at the next
        positions, or an image's embeddings at `positions`, the text after it at `next_pos`."""
        self.held.extend(tokens)
        if positions is None:
            self.pos.extend(range(self.next_pos, self.next_pos + len(tokens)))
            self.next_pos += len(tokens)
        else:
            self.pos.extend(positions)
            self.next_pos = next_pos if next_pos is not None else self.pos[-1] + 1

    def can_keep(self, n: int) -> bool:
        """Whether keep(n) can cut back to the first n tokens: not a recurrent state, not
        before a window-only cache's earliest cell within the window, not inside an image."""
        if n >= len(self.held):
            return True
        if n > 0 and self.pos[n] == self.pos[n - 1]:
            return False  # inside an M-RoPE image
        return not self.ctx.model.recurrent and self._window_holds(self.position(n))

    def keep(self, n: int) -> bool:
        if 0 < n < len(self.pos) and self.pos[n] == self.pos[n - 1]:
            return False  # inside an M-RoPE image
        at = self.position(n)
        if not self.can_keep(n):
            self.clear()  # a state cannot be cut back, or the window's cells are gone
            return False
        ok = bool(llama_cpp.llama_memory_seq_rm(self.ctx.mem, self.seq, at, -1))
        if ok:
            del self.held[n:]
            del self.pos[n:]
            self.next_pos = at
        return ok

    def _window_holds(self, at: int) -> bool:
        """Whether the sliding-window layers still hold the cells a token at `at` attends to
        (llama-server's check: the earliest cell is within the window). Asked of a full-size
        cache too: a state llama.cpp saved holds only the window's cells of those layers, so
        one restored cannot be cut back before them either."""
        n_swa = self.ctx.model.n_swa
        if not n_swa:
            return True
        pos_min = int(llama_cpp.llama_memory_seq_pos_min(self.ctx.mem, self.seq))
        return pos_min <= max(0, at - n_swa)

    def cut(self, start: int, end: int) -> bool:
        mem = self.ctx.mem
        # A shift moves positions by one section: llama.cpp shifts no M-RoPE memory.
        if (not self.ctx.can_shift or self.next_pos != self.n
                or not llama_cpp.llama_memory_seq_rm(mem, self.seq, start, end)):
            return False
        llama_cpp.llama_memory_seq_add(mem, self.seq, end, -1, start - end)
        del self.held[start:end]
        self.pos = array("i", range(self.n))
        self.next_pos = self.n
        return True

    def copy_from(self, other: KvMemory, n: int) -> None:
        """Make this sequence hold the first `n` tokens of another's (llama_memory_seq_cp).
        In a pool the cells are shared, not copied; across streams llama.cpp copies the whole
        stream at the next decode: the caller decodes into this sequence before reading or
        writing its state."""
        assert isinstance(other, SeqMemory) and other.ctx is self.ctx
        llama_cpp.llama_memory_seq_rm(self.ctx.mem, self.seq, -1, -1)
        llama_cpp.llama_memory_seq_cp(self.ctx.mem, other.seq, self.seq, -1, -1)
        self.held, self.pos = array("i", other.held), array("i", other.pos)
        self.next_pos = other.next_pos
        if not self.keep(n):
            self.clear()

    def save(self) -> bytearray:
        """llama.cpp's state of the sequence, then the positions of its tokens and the next
        one (the state is opaque to kv_states; only this class reads it back)."""
        ctx = self.ctx.ptr
        size = llama_cpp.llama_state_seq_get_size(ctx, self.seq)
        data = bytearray(size)
        written = llama_cpp.llama_state_seq_get_data(
            ctx, (ctypes.c_uint8 * size).from_buffer(data), size, self.seq)
        del data[written:]
        data += self.pos.tobytes() + array("i", [self.next_pos]).tobytes()
        return data

    def restore(self, data: bytearray, tokens: bytes) -> bool:
        self.clear()
        n = count(tokens)
        size = len(data) - (n + 1) * self.pos.itemsize
        if size <= 0:
            return False
        pos = array("i")
        pos.frombytes(bytes(data[size:]))
        next_pos = pos.pop()
        read = llama_cpp.llama_state_seq_set_data(
            self.ctx.ptr, (ctypes.c_uint8 * size).from_buffer(data), size, self.seq)
        if read != size or llama_cpp.llama_memory_seq_pos_max(
                self.ctx.mem, self.seq) != (pos[-1] if n else -1):
            self.clear()
            return False
        self.held = array("i")
        self.held.frombytes(tokens)
        self.pos, self.next_pos = pos, next_pos
        return True

    def clear(self) -> None:
        llama_cpp.llama_memory_seq_rm(self.ctx.mem, self.seq, -1, -1)
        self.held, self.pos, self.next_pos = array("i"), array("i"), 0


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
