"""How to load a model, and what the engine reports about the model it loaded."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

KvCacheType = Literal["f16", "q8_0", "q4_0"]
KV_CACHE_TYPES: tuple[str, ...] = ("f16", "q8_0", "q4_0")
DEFAULT_MAX_CTX = 8192


class LoadParamsError(ValueError):
    """Load options that cannot work together; the message is shown to the user."""


@dataclass(frozen=True)
class LoadParams:
    model_path: str
    n_ctx: int = 0  # 0: min(trained context, 8192)
    n_gpu_layers: int = -1  # -1: all layers when the build can offload
    n_threads: int = 0  # 0: all physical cores
    n_batch: int = 512
    flash_attn: bool = False
    kv_cache_type: str = "f16"
    use_mmap: bool = True
    use_mlock: bool = False
    chat_template: str | None = None  # overrides the template in the GGUF file

    def replace(self, **changes: object) -> LoadParams:
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    def validate(self) -> None:
        if self.kv_cache_type not in KV_CACHE_TYPES:
            raise LoadParamsError(f"Unknown KV cache type {self.kv_cache_type!r}.")
        if self.kv_cache_type != "f16" and not self.flash_attn:
            raise LoadParamsError(
                f"A {self.kv_cache_type} KV cache needs flash attention: llama.cpp can only "
                "quantize the V cache with it. Turn flash attention on or use f16."
            )
        if self.n_ctx < 0 or self.n_batch < 1 or self.n_threads < 0:
            raise LoadParamsError("Context length, batch size and threads must be positive.")


def choose_context(requested: int, trained: int) -> int:
    """The context length to load with: the user's choice, else min(trained, 8192)."""
    if requested > 0:
        return requested
    return min(trained, DEFAULT_MAX_CTX) if trained > 0 else DEFAULT_MAX_CTX


@dataclass(frozen=True)
class ModelInfo:
    path: str
    name: str
    architecture: str
    size_bytes: int
    n_ctx: int
    n_ctx_train: int
    n_threads: int
    n_gpu_layers: int
    gpu_offload_supported: bool
    flash_attn: bool
    kv_cache_type: str
    template_source: Literal["gguf", "override", "chatml"]
    load_seconds: float = 0.0
    quantization: str = ""
