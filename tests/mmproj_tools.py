"""Tiny vision projectors (mmproj GGUF) for tests: a one-block ViT with random weights, in the
layouts clip.cpp in llama-cpp-python 0.3.36 loads (its loader lists what it read when it starts).
Replies through them are nonsense; every step is real: libmtmd loads one, preprocesses an image
to `image_size` pixels, and returns embeddings of `n_embd` floats, the text model's size.

    write_mmproj(path, n_embd=model_n_embd(model))         LLaVA's "mlp": IMAGE_TOKENS embeddings
    write_gemma3_mmproj(path, n_embd=model_n_embd(model))  Gemma 3's: SigLIP, pooled to
        GEMMA3_TOKENS, read with non-causal attention, between <start_of_image> and <end_of_image>
"""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np

from inglenook.models.gguf import read_header

IMAGE_SIZE = 64
PATCH_SIZE = 16
IMAGE_TOKENS = (IMAGE_SIZE // PATCH_SIZE) ** 2  # LLaVA's projector drops the class token
GEMMA3_PATCH, GEMMA3_MERGE = 4, 4  # 16 × 16 patches, averaged 4 × 4 (Gemma 3's own merge)
GEMMA3_TOKENS = (IMAGE_SIZE // GEMMA3_PATCH // GEMMA3_MERGE) ** 2


def model_n_embd(model: Path) -> int:
    header = read_header(model)
    value = header.metadata[f"{header.architecture}.embedding_length"]
    assert isinstance(value, int)
    return value


def write_mmproj(path: Path, n_embd: int, *, projector_type: str = "mlp", hidden: int = 32,
                 ffn: int = 64, heads: int = 2, layers: int = 1, seed: int = 0,
                 architecture: str = "clip") -> Path:
    """`n_embd`: the projector's output size (the text model's n_embd, or another to make one
    that does not match). `projector_type` and `architecture` can be set to what clip.cpp
    refuses, for the refusal tests; the tensors stay LLaVA's."""
    rng = np.random.default_rng(seed)
    w = gguf.GGUFWriter(str(path), architecture)
    w.add_string("general.name", "tiny test projector")
    w.add_bool("clip.has_vision_encoder", True)
    w.add_bool("clip.has_text_encoder", False)
    w.add_bool("clip.has_llava_projector", True)
    w.add_string("clip.projector_type", projector_type)
    w.add_bool("clip.use_gelu", True)
    w.add_uint32("clip.vision.image_size", IMAGE_SIZE)
    w.add_uint32("clip.vision.patch_size", PATCH_SIZE)
    w.add_uint32("clip.vision.embedding_length", hidden)
    w.add_uint32("clip.vision.feed_forward_length", ffn)
    w.add_uint32("clip.vision.projection_dim", n_embd)
    w.add_uint32("clip.vision.attention.head_count", heads)
    w.add_float32("clip.vision.attention.layer_norm_epsilon", 1e-5)
    w.add_uint32("clip.vision.block_count", layers)
    w.add_array("clip.vision.image_mean", [0.5, 0.5, 0.5])
    w.add_array("clip.vision.image_std", [0.5, 0.5, 0.5])

    def tensor(name: str, *shape: int) -> None:  # numpy order: the last dimension is contiguous
        w.add_tensor(name, (rng.standard_normal(shape) * 0.02).astype(np.float32))

    tensor("v.patch_embd.weight", hidden, 3, PATCH_SIZE, PATCH_SIZE)
    tensor("v.class_embd", hidden)
    tensor("v.position_embd.weight", IMAGE_TOKENS + 1, hidden)
    tensor("v.pre_ln.weight", hidden)
    tensor("v.pre_ln.bias", hidden)
    for i in range(layers):
        for name in ("attn_q", "attn_k", "attn_v", "attn_out"):
            tensor(f"v.blk.{i}.{name}.weight", hidden, hidden)
            tensor(f"v.blk.{i}.{name}.bias", hidden)
        for name in ("ln1", "ln2"):
            tensor(f"v.blk.{i}.{name}.weight", hidden)
            tensor(f"v.blk.{i}.{name}.bias", hidden)
        tensor(f"v.blk.{i}.ffn_up.weight", ffn, hidden)
        tensor(f"v.blk.{i}.ffn_up.bias", ffn)
        tensor(f"v.blk.{i}.ffn_down.weight", hidden, ffn)
        tensor(f"v.blk.{i}.ffn_down.bias", hidden)
    tensor("mm.0.weight", n_embd, hidden)
    tensor("mm.0.bias", n_embd)
    tensor("mm.2.weight", n_embd, n_embd)
    tensor("mm.2.bias", n_embd)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def write_gemma3_mmproj(path: Path, n_embd: int, *, hidden: int = 32, ffn: int = 64,
                        heads: int = 2, seed: int = 0) -> Path:
    """Gemma 3's projector: a SigLIP block (no class token, a last norm), patches averaged
    GEMMA3_MERGE × GEMMA3_MERGE, an RMS norm and one projection to `n_embd`."""
    rng = np.random.default_rng(seed)
    w = gguf.GGUFWriter(str(path), "clip")
    w.add_string("general.name", "tiny test projector (gemma3)")
    w.add_bool("clip.has_vision_encoder", True)
    w.add_bool("clip.has_text_encoder", False)
    w.add_string("clip.projector_type", "gemma3")
    w.add_bool("clip.use_gelu", True)
    w.add_uint32("clip.vision.image_size", IMAGE_SIZE)
    w.add_uint32("clip.vision.patch_size", GEMMA3_PATCH)
    w.add_uint32("clip.vision.embedding_length", hidden)
    w.add_uint32("clip.vision.feed_forward_length", ffn)
    w.add_uint32("clip.vision.projection_dim", n_embd)
    w.add_uint32("clip.vision.attention.head_count", heads)
    w.add_float32("clip.vision.attention.layer_norm_epsilon", 1e-6)
    w.add_uint32("clip.vision.block_count", 1)
    w.add_uint32("clip.vision.projector.scale_factor", GEMMA3_MERGE)
    w.add_array("clip.vision.image_mean", [0.5, 0.5, 0.5])
    w.add_array("clip.vision.image_std", [0.5, 0.5, 0.5])

    def tensor(name: str, *shape: int) -> None:
        w.add_tensor(name, (rng.standard_normal(shape) * 0.02).astype(np.float32))

    patches = (IMAGE_SIZE // GEMMA3_PATCH) ** 2
    tensor("v.patch_embd.weight", hidden, 3, GEMMA3_PATCH, GEMMA3_PATCH)
    tensor("v.patch_embd.bias", hidden)
    tensor("v.position_embd.weight", patches, hidden)
    for name in ("attn_q", "attn_k", "attn_v", "attn_out"):
        tensor(f"v.blk.0.{name}.weight", hidden, hidden)
        tensor(f"v.blk.0.{name}.bias", hidden)
    for name in ("ln1", "ln2"):
        tensor(f"v.blk.0.{name}.weight", hidden)
        tensor(f"v.blk.0.{name}.bias", hidden)
    tensor("v.blk.0.ffn_up.weight", ffn, hidden)
    tensor("v.blk.0.ffn_up.bias", ffn)
    tensor("v.blk.0.ffn_down.weight", hidden, ffn)
    tensor("v.blk.0.ffn_down.bias", hidden)
    tensor("v.post_ln.weight", hidden)
    tensor("v.post_ln.bias", hidden)
    tensor("mm.soft_emb_norm.weight", hidden)
    tensor("mm.input_projection.weight", hidden, n_embd)  # ggml: ne = (n_embd, hidden)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path
