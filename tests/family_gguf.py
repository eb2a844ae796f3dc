"""Tiny random-weight GGUF models of the families the bundled SmolLM2 is not: a recurrent one
(Mamba), a hybrid (LFM2) and a mixture of experts (Qwen3-MoE). No such model is small enough
to ship, and llama.cpp runs these as it runs real ones: its memory (a recurrent state per
sequence, a KV cache beside it, or in front of routed experts) is the real thing; only the
weights are noise. Their replies are nonsense, so tests compare the engine with raw llama.cpp,
token for token.

All borrow the bundled model's tokenizer (49,152 tokens; the embedding is tied to the
output), at a width of 64: ~7 MB each, written in a second.

    write_mamba(path, bundled)    recurrent
    write_moe(path, bundled)      4 experts, 2 per token
    write_lfm2(path, bundled)     hybrid: a short-convolution layer and an attention layer
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import gguf
import numpy as np

N_EMBD, N_LAYER, N_CTX_TRAIN = 64, 2, 4096


@functools.cache
def _tokenizer_fields(source: Path) -> tuple[tuple[str, Any, Any], ...]:
    """Every tokenizer.* entry of a real model (its vocabulary, merges, template), read once."""
    reader = gguf.GGUFReader(source)
    return tuple((name, field.types[0], field.contents())
                 for name, field in reader.fields.items() if name.startswith("tokenizer."))


def _tokenizer(writer: gguf.GGUFWriter, source: Path) -> None:
    for name, kind, value in _tokenizer_fields(source):
        if kind == gguf.GGUFValueType.ARRAY:
            writer.add_array(name, value)
        elif kind == gguf.GGUFValueType.STRING:
            writer.add_string(name, value)
        else:
            writer.add_key_value(name, value, kind)


def _noise(rng: np.random.Generator, *shape: int, scale: float = 0.05) -> np.ndarray[Any, Any]:
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def _write(path: Path, arch: str, source: Path, hparams: dict[str, Any],
           tensors: dict[str, np.ndarray[Any, Any]]) -> Path:
    writer = gguf.GGUFWriter(path, arch)
    writer.add_name(f"tiny random {arch}")
    writer.add_context_length(N_CTX_TRAIN)
    writer.add_embedding_length(N_EMBD)
    writer.add_block_count(N_LAYER)
    writer.add_layer_norm_rms_eps(1e-5)
    for key, value in hparams.items():
        getattr(writer, f"add_{key}")(value)
    _tokenizer(writer, source)
    for name, data in tensors.items():
        half = data.ndim > 1 and not any(part in name for part in _F32)
        writer.add_tensor(name, data.astype(np.float16) if half else data)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _vocab(source: Path) -> int:
    (tokens,) = [v for name, _, v in _tokenizer_fields(source) if name == "tokenizer.ggml.tokens"]
    return len(tokens)


# Matrix products take f16 weights; llama.cpp's other operations (the SSM's convolution and
# scan, norms) want f32.
_F32 = ("ssm_conv1d", "shortconv.conv", "ssm_a", "ssm_d", "norm", ".bias")


# The attention layers of the MoE and the hybrid: 4 heads of 16, 2 of them for K/V.
N_HEAD, N_HEAD_KV, HEAD = 4, 2, 16


def _attention(rng: np.random.Generator, b: str) -> dict[str, np.ndarray[Any, Any]]:
    """A layer's attention tensors (`b`: its name prefix), with Q and K norms."""
    return {
        b + "attn_q.weight": _noise(rng, N_HEAD * HEAD, N_EMBD, scale=0.2),
        b + "attn_k.weight": _noise(rng, N_HEAD_KV * HEAD, N_EMBD, scale=0.2),
        b + "attn_v.weight": _noise(rng, N_HEAD_KV * HEAD, N_EMBD, scale=0.2),
        b + "attn_output.weight": _noise(rng, N_EMBD, N_HEAD * HEAD, scale=0.2),
        b + "attn_q_norm.weight": np.ones(HEAD, np.float32),
        b + "attn_k_norm.weight": np.ones(HEAD, np.float32),
    }


def write_mamba(path: Path, source: Path, seed: int = 1) -> Path:
    """Mamba (1): d_inner 128, d_state 16, d_conv 4, dt_rank 4; shapes as llama.cpp loads
    them (numpy order, the reverse of ggml's)."""
    rng = np.random.default_rng(seed)
    d_inner, d_state, d_conv, dt_rank = 2 * N_EMBD, 16, 4, 4
    tensors = {"token_embd.weight": _noise(rng, _vocab(source), N_EMBD, scale=0.5),
               "output_norm.weight": np.ones(N_EMBD, np.float32)}
    for i in range(N_LAYER):
        b = f"blk.{i}."
        tensors |= {
            b + "attn_norm.weight": np.ones(N_EMBD, np.float32),
            b + "ssm_in.weight": _noise(rng, 2 * d_inner, N_EMBD, scale=0.2),
            b + "ssm_conv1d.weight": _noise(rng, d_inner, d_conv, scale=0.3),
            b + "ssm_conv1d.bias": _noise(rng, d_inner),
            b + "ssm_x.weight": _noise(rng, dt_rank + 2 * d_state, d_inner, scale=0.2),
            b + "ssm_dt.weight": _noise(rng, d_inner, dt_rank, scale=0.3),
            b + "ssm_dt.bias": _noise(rng, d_inner) - 2.0,
            # A = -exp(A_log): negative, so that the state decays rather than explodes.
            b + "ssm_a": -np.tile(np.arange(1, d_state + 1, dtype=np.float32), (d_inner, 1)),
            b + "ssm_d": np.ones(d_inner, np.float32),
            b + "ssm_out.weight": _noise(rng, N_EMBD, d_inner, scale=0.2),
        }
    hparams = {"ssm_conv_kernel": d_conv, "ssm_inner_size": d_inner,
               "ssm_state_size": d_state, "ssm_time_step_rank": dt_rank}
    return _write(path, "mamba", source, hparams, tensors)


def write_moe(path: Path, source: Path, seed: int = 2) -> Path:
    """Qwen3-MoE: 4 heads of 16 (2 for K/V), 4 experts of width 96, 2 used per token."""
    rng = np.random.default_rng(seed)
    n_expert, n_ff = 4, 96
    tensors = {"token_embd.weight": _noise(rng, _vocab(source), N_EMBD, scale=0.5),
               "output_norm.weight": np.ones(N_EMBD, np.float32)}
    for i in range(N_LAYER):
        b = f"blk.{i}."
        tensors |= {
            b + "attn_norm.weight": np.ones(N_EMBD, np.float32),
            **_attention(rng, b),
            b + "ffn_norm.weight": np.ones(N_EMBD, np.float32),
            b + "ffn_gate_inp.weight": _noise(rng, n_expert, N_EMBD, scale=0.5),
            b + "ffn_gate_exps.weight": _noise(rng, n_expert, n_ff, N_EMBD, scale=0.2),
            b + "ffn_up_exps.weight": _noise(rng, n_expert, n_ff, N_EMBD, scale=0.2),
            b + "ffn_down_exps.weight": _noise(rng, n_expert, N_EMBD, n_ff, scale=0.2),
        }
    hparams = {"head_count": N_HEAD, "head_count_kv": N_HEAD_KV, "key_length": HEAD,
               "value_length": HEAD, "rope_freq_base": 10000.0, "expert_count": n_expert,
               "expert_used_count": 2, "expert_feed_forward_length": n_ff,
               "feed_forward_length": n_ff}
    return _write(path, "qwen3moe", source, hparams, tensors)


def write_lfm2(path: Path, source: Path, seed: int = 3) -> Path:
    """LFM2, a hybrid: short-convolution layers (a recurrent state of the last 2 inputs) and
    attention layers (4 heads of 16, 2 for K/V), one of each; a layer's KV head count of 0
    makes it a convolution layer."""
    rng = np.random.default_rng(seed)
    l_cache, n_ff = 3, 96
    kinds = ["conv", "attn"]
    tensors = {"token_embd.weight": _noise(rng, _vocab(source), N_EMBD, scale=0.5),
               "token_embd_norm.weight": np.ones(N_EMBD, np.float32)}
    for i, kind in enumerate(kinds):
        b = f"blk.{i}."
        tensors |= {
            b + "attn_norm.weight": np.ones(N_EMBD, np.float32),
            b + "ffn_norm.weight": np.ones(N_EMBD, np.float32),
            b + "ffn_gate.weight": _noise(rng, n_ff, N_EMBD, scale=0.2),
            b + "ffn_up.weight": _noise(rng, n_ff, N_EMBD, scale=0.2),
            b + "ffn_down.weight": _noise(rng, N_EMBD, n_ff, scale=0.2),
        }
        if kind == "conv":
            tensors |= {
                b + "shortconv.conv.weight": _noise(rng, N_EMBD, l_cache, scale=0.3),
                b + "shortconv.in_proj.weight": _noise(rng, 3 * N_EMBD, N_EMBD, scale=0.2),
                b + "shortconv.out_proj.weight": _noise(rng, N_EMBD, N_EMBD, scale=0.2),
            }
        else:
            tensors |= _attention(rng, b)
    hparams = {"head_count": N_HEAD, "key_length": HEAD, "value_length": HEAD,
               "head_count_kv": [0 if kind == "conv" else N_HEAD_KV for kind in kinds],
               "rope_freq_base": 10000.0, "feed_forward_length": n_ff,
               "shortconv_l_cache": l_cache}
    return _write(path, "lfm2", source, hparams, tensors)
