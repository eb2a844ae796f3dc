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


class _Writer:
    """A projector file being written: the ViT's header and random tensors."""

    def __init__(self, path: Path, architecture: str, projector_type: str, *, name: str,
                 patch: int, hidden: int, ffn: int, heads: int, n_embd: int, layers: int,
                 eps: float, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.hidden, self.ffn, self.layers = hidden, ffn, layers
        w = self.w = gguf.GGUFWriter(str(path), architecture)
        w.add_string("general.name", name)
        w.add_bool("clip.has_vision_encoder", True)
        w.add_bool("clip.has_text_encoder", False)
        w.add_string("clip.projector_type", projector_type)
        w.add_bool("clip.use_gelu", True)
        w.add_uint32("clip.vision.image_size", IMAGE_SIZE)
        w.add_uint32("clip.vision.patch_size", patch)
        w.add_uint32("clip.vision.embedding_length", hidden)
        w.add_uint32("clip.vision.feed_forward_length", ffn)
        w.add_uint32("clip.vision.projection_dim", n_embd)
        w.add_uint32("clip.vision.attention.head_count", heads)
        w.add_float32("clip.vision.attention.layer_norm_epsilon", eps)
        w.add_uint32("clip.vision.block_count", layers)
        w.add_array("clip.vision.image_mean", [0.5, 0.5, 0.5])
        w.add_array("clip.vision.image_std", [0.5, 0.5, 0.5])

    def tensor(self, name: str, *shape: int) -> None:  # numpy order: the last is contiguous
        self.w.add_tensor(name, (self.rng.standard_normal(shape) * 0.02).astype(np.float32))

    def blocks(self) -> None:
        """The encoder's blocks: attention, two norms and a feed-forward, with biases."""
        hidden, ffn = self.hidden, self.ffn
        for i in range(self.layers):
            for name in ("attn_q", "attn_k", "attn_v", "attn_out"):
                self.tensor(f"v.blk.{i}.{name}.weight", hidden, hidden)
                self.tensor(f"v.blk.{i}.{name}.bias", hidden)
            for name in ("ln1", "ln2"):
                self.tensor(f"v.blk.{i}.{name}.weight", hidden)
                self.tensor(f"v.blk.{i}.{name}.bias", hidden)
            self.tensor(f"v.blk.{i}.ffn_up.weight", ffn, hidden)
            self.tensor(f"v.blk.{i}.ffn_up.bias", ffn)
            self.tensor(f"v.blk.{i}.ffn_down.weight", hidden, ffn)
            self.tensor(f"v.blk.{i}.ffn_down.bias", hidden)

    def close(self) -> None:
        self.w.write_header_to_file()
        self.w.write_kv_data_to_file()
        self.w.write_tensors_to_file()
        self.w.close()


def write_mmproj(path: Path, n_embd: int, *, projector_type: str = "mlp", hidden: int = 32,
                 ffn: int = 64, heads: int = 2, layers: int = 1, seed: int = 0,
                 architecture: str = "clip") -> Path:
    """`n_embd`: the projector's output size (the text model's n_embd, or another to make one
    that does not match). `projector_type` and `architecture` can be set to what clip.cpp
    refuses, for the refusal tests; the tensors stay LLaVA's."""
    p = _Writer(path, architecture, projector_type, name="tiny test projector",
                patch=PATCH_SIZE, hidden=hidden, ffn=ffn, heads=heads, n_embd=n_embd,
                layers=layers, eps=1e-5, seed=seed)
    p.w.add_bool("clip.has_llava_projector", True)
    p.tensor("v.patch_embd.weight", hidden, 3, PATCH_SIZE, PATCH_SIZE)
    p.tensor("v.class_embd", hidden)
    p.tensor("v.position_embd.weight", IMAGE_TOKENS + 1, hidden)
    p.tensor("v.pre_ln.weight", hidden)
    p.tensor("v.pre_ln.bias", hidden)
    p.blocks()
    p.tensor("mm.0.weight", n_embd, hidden)
    p.tensor("mm.0.bias", n_embd)
    p.tensor("mm.2.weight", n_embd, n_embd)
    p.tensor("mm.2.bias", n_embd)
    p.close()
    return path


def write_gemma3_mmproj(path: Path, n_embd: int, *, hidden: int = 32, ffn: int = 64,
                        heads: int = 2, seed: int = 0) -> Path:
    """Gemma 3's projector: a SigLIP block (no class token, a last norm), patches averaged
    GEMMA3_MERGE × GEMMA3_MERGE, an RMS norm and one projection to `n_embd`."""
    p = _Writer(path, "clip", "gemma3", name="tiny test projector (gemma3)",
                patch=GEMMA3_PATCH, hidden=hidden, ffn=ffn, heads=heads, n_embd=n_embd,
                layers=1, eps=1e-6, seed=seed)
    p.w.add_uint32("clip.vision.projector.scale_factor", GEMMA3_MERGE)
    p.tensor("v.patch_embd.weight", hidden, 3, GEMMA3_PATCH, GEMMA3_PATCH)
    p.tensor("v.patch_embd.bias", hidden)
    p.tensor("v.position_embd.weight", (IMAGE_SIZE // GEMMA3_PATCH) ** 2, hidden)
    p.blocks()
    p.tensor("v.post_ln.weight", hidden)
    p.tensor("v.post_ln.bias", hidden)
    p.tensor("mm.soft_emb_norm.weight", hidden)
    p.tensor("mm.input_projection.weight", hidden, n_embd)  # ggml: ne = (n_embd, hidden)
    p.close()
    return path


QWEN2VL_PATCH, QWEN2VL_MERGE = 4, 2  # a token is 2 × 2 patches of 4 × 4 pixels
QWEN2VL_SECTIONS = [8, 12, 12, 0]  # time, rows, columns: halves of the bundled model's 64


def write_qwen2vl_mmproj(path: Path, n_embd: int, *, hidden: int = 32, ffn: int = 64,
                         heads: int = 2, seed: int = 0) -> Path:
    """Qwen2-VL's projector ("qwen2vl_merger"): two patch convolutions summed, a ViT block
    placed with 2-D RoPE (no position embeddings), 2 × 2 patches merged into one token by
    an MLP to `n_embd`. libmtmd sizes the image itself (multiples of 8 pixels), so an image
    takes rows × cols tokens but only max(rows, cols) positions of an M-RoPE text model."""
    p = _Writer(path, "clip", "qwen2vl_merger", name="tiny test projector (qwen2vl)",
                patch=QWEN2VL_PATCH, hidden=hidden, ffn=ffn, heads=heads, n_embd=n_embd,
                layers=1, eps=1e-6, seed=seed)
    p.w.add_uint32("clip.vision.spatial_merge_size", QWEN2VL_MERGE)
    p.tensor("v.patch_embd.weight", hidden, 3, QWEN2VL_PATCH, QWEN2VL_PATCH)
    p.tensor("v.patch_embd.weight.1", hidden, 3, QWEN2VL_PATCH, QWEN2VL_PATCH)
    p.blocks()
    merged = hidden * QWEN2VL_MERGE ** 2
    p.tensor("mm.0.weight", merged, merged)
    p.tensor("mm.0.bias", merged)
    p.tensor("mm.2.weight", n_embd, merged)
    p.tensor("mm.2.bias", n_embd)
    p.close()
    return path


def qwen2vl_copy(model: Path, path: Path) -> Path:
    """The bundled model (llama) as a qwen2vl model, so llama.cpp reads it with M-RoPE and
    libmtmd places images with it: its hyperparameters under qwen2vl's keys with M-RoPE
    sections, the same tensors under the same names (qwen2's q/k/v biases are optional).
    llama's converter interleaves each head's q/k rows for llama's rotary pairs; M-RoPE pairs
    a head's halves (NeoX's order), so those rows are put back in the original model's order
    (whole rows: a quantized row is its own blocks) and the copy writes the same text."""
    from tests.gguf_tools import metadata_types, rewrite_metadata

    changes: dict[str, object | None] = {"general.architecture": "qwen2vl",
                                         "qwen2vl.rope.dimension_sections": QWEN2VL_SECTIONS}
    values = read_header(model).metadata
    for key in metadata_types(model):
        if key.startswith("llama."):
            changes[key] = None
            changes["qwen2vl." + key.removeprefix("llama.")] = values[key]
    rewrite_metadata(model, path, changes)
    heads = {"attn_q": values["llama.attention.head_count"],
             "attn_k": values["llama.attention.head_count_kv"]}
    reader = gguf.GGUFReader(str(path), "r+")
    for tensor in reader.tensors:
        n_head = heads.get(tensor.name.split(".")[-2])
        if isinstance(n_head, int):
            rows = tensor.data  # (rows, bytes a row), a view of the file
            rows[:] = rows.reshape(n_head, -1, 2, rows.shape[1]).swapaxes(1, 2).reshape(
                rows.shape)
    reader.data.flush()
    del reader
    return path
