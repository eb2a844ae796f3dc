"""Weights and vocabulary."""

from __future__ import annotations

import ctypes
from collections.abc import Callable

import llama_cpp
import numpy as np

from inglenook.engine.host.llama.library import take_buffers


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
        take_buffers()
        self.ptr = llama_cpp.llama_model_load_from_file(path.encode("utf-8"), params)
        if not self.ptr:
            raise ValueError(f"Failed to load model from file: {path}")
        # What llama.cpp allocated for the weights (mapped and repacked), else their size.
        self.weights_bytes = take_buffers().get("weights") or int(
            llama_cpp.llama_model_size(self.ptr))
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
        self.hybrid = bool(llama_cpp.llama_model_is_hybrid(self.ptr))
        self.recurrent = bool(llama_cpp.llama_model_is_recurrent(self.ptr)) or self.hybrid
        self.n_swa = int(llama_cpp.llama_model_n_swa(self.ptr))  # 0: no sliding window
        self._buffer = (llama_cpp.llama_token * 4096)()
        # Each token's first byte and the one-byte tokens, made for the grammar's first reply
        # (sampler.first_bytes).
        self.first_bytes: tuple[np.ndarray, np.ndarray] | None = None

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
