"""What a smaller copy of a model will be, before llama.cpp makes it: its name, whether it may be
made, and its size from the source's tensors.

The size follows what llama.cpp's quantizer does with each tensor (llama-quant.cpp): which
tensors it quantizes at all, the type each gets for the requested mix (the output or tied
embedding at Q6_K, some attn_v and ffn_down layers at more bits in _M mixes), and the fallback
when a k-quant cannot take a row length (576 columns: Q4_K becomes Q5_0, Q6_K becomes Q8_0). A
tensor already of its new type is copied as it is. Sizes are the bytes per block of each type
(gguf's GGML_QUANT_SIZES). So a copy that would come out no smaller than its source (a Q4_1
model of 576-column rows "shrunk" to Q4_K_M) is known before it is started.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

from inglenook import paths
from inglenook.core.units import describe_size, gigabytes
from inglenook.models.filenames import parse_quant, split_name
from inglenook.models.gguf import GGUFError, GGUFHeader, TensorInfo, read_header
from inglenook.models.library import split_parts

# llama_ftype (llama.h) and the tensor type that mix starts from. Types that need an importance
# matrix (IQ1/IQ2/IQ3) are left out: Inglenook has no way to make one.
TYPES: dict[str, tuple[int, str]] = {
    "F16": (1, "F16"), "BF16": (32, "BF16"), "Q8_0": (7, "Q8_0"), "Q6_K": (18, "Q6_K"),
    "Q5_K_M": (17, "Q5_K"), "Q5_K_S": (16, "Q5_K"), "Q5_1": (9, "Q5_1"), "Q5_0": (8, "Q5_0"),
    "Q4_K_M": (15, "Q4_K"), "Q4_K_S": (14, "Q4_K"), "Q4_1": (3, "Q4_1"), "Q4_0": (2, "Q4_0"),
    "IQ4_NL": (25, "IQ4_NL"), "IQ4_XS": (30, "IQ4_XS"), "Q3_K_L": (13, "Q3_K"),
    "Q3_K_M": (12, "Q3_K"), "Q3_K_S": (11, "Q3_K"), "Q2_K": (10, "Q2_K"),
}
# Sources precise enough to quantize from; anything else loses quality twice.
_PRECISE = {"F32", "F16", "BF16", "Q8_0"}
_FLOATS = {"F32", "F16", "BF16"}
# What a type becomes for a row length it cannot take.
_FALLBACK = {"Q2_K": "IQ4_NL", "Q3_K": "IQ4_NL", "IQ4_XS": "IQ4_NL", "Q4_K": "Q5_0",
             "Q5_K": "Q5_1", "Q6_K": "Q8_0"}
# Tensors the quantizer copies as they are (besides 1-D ones and norms).
_KEPT = ("ffn_gate_inp.weight", "altup", "laurel", "per_layer_model_proj", "ssm_conv1d.weight",
         "shortconv.conv.weight", "time_mix_", "attn_rel_b.weight")
_KEPT_NAMES = {"position_embd.weight", "token_types.weight"}
_METADATA_SLACK = 64 << 10  # the copy's header: the source's keys, a few of them changed


class QuantizeError(Exception):
    """Why a copy cannot be made, or was not kept; the message is for the user."""


@dataclass(frozen=True)
class Plan:
    source: Path
    type: str
    output: Path  # where the checked copy goes
    estimate_bytes: int  # the copy's size, from the source's tensors
    free_bytes: int  # on the models folder's disk
    requantize: bool  # the source is already quantized
    source_bytes: int = 0  # every part of the source together
    fallbacks: int = 0  # tensors whose rows the type cannot take, given a bigger one instead

    @property
    def smaller(self) -> bool:
        return self.estimate_bytes < self.source_bytes

    def not_smaller(self) -> str:
        """Why this copy is not worth making ("" when it is smaller)."""
        if self.smaller:
            return ""
        why = (f" {self.fallbacks} of its tensors have rows a {self.type} block cannot divide, "
               "and llama.cpp gives those a bigger type." if self.fallbacks else
               " Its tensors are already stored in types no bigger than this one.")
        return (f"A {self.type} copy would not be smaller: about "
                f"{describe_size(self.estimate_bytes)}, against {describe_size(self.source_bytes)}"
                f" now.{why}")


def read_headers(source: Path) -> list[GGUFHeader]:
    """The headers of every part of a model (QuantizeError when one cannot be read)."""
    try:
        return [read_header(part) for part in split_parts(source)]
    except GGUFError as exc:
        raise QuantizeError(str(exc)) from None


def plan(source: Path, type_name: str, *, allow_requantize: bool = False,
         models_dir: Path | None = None, headers: list[GGUFHeader] | None = None) -> Plan:
    """Check everything that can be checked before starting; raises QuantizeError. `headers`:
    the source's, already read (read_headers), for planning several types."""
    kind = type_name.upper()
    if kind not in TYPES:
        raise QuantizeError(f"Unknown type {type_name!r}; one of {', '.join(TYPES)}.")
    headers = headers if headers is not None else read_headers(source)
    have = headers[0].quantization or parse_quant(source.name).upper()
    if have == kind:
        raise QuantizeError(f"{source.name} is already {kind}.")
    requantize = have not in _FLOATS
    if have not in _PRECISE and not allow_requantize:
        raise QuantizeError(
            f"{source.name} is already quantized ({have or 'of unknown type'}): a copy made "
            "from it loses quality twice. Quantize from an F16, BF16 or Q8_0 file, or allow "
            "requantizing explicitly.")
    folder = models_dir or paths.models_dir()
    output = folder / f"{_base_name(source, have)}-{kind}.gguf"
    if output.exists():
        raise QuantizeError(f"{output} already exists.")
    estimate, fallbacks = _estimate(headers, kind)
    free = shutil.disk_usage(folder).free
    if free < estimate:
        raise QuantizeError(
            f"Not enough disk space: the {kind} copy needs about {gigabytes(estimate)} "
            f"but {folder} has {gigabytes(free)} free.")
    return Plan(source, kind, output, estimate, free, requantize,
                sum(h.file_size for h in headers), fallbacks)


def estimate_bytes(headers: list[GGUFHeader], kind: str) -> int:
    """The copy's size: each tensor at the type llama.cpp will give it, plus the header."""
    return _estimate(headers, kind)[0]


def _estimate(headers: list[GGUFHeader], kind: str) -> tuple[int, int]:
    """(the copy's size, how many tensors fall back to a bigger type than the mix's)."""
    total = fallbacks = 0
    has_output = any(t.name == "output.weight" for h in headers for t in h.tensors)
    for header in headers:
        mix = _Mix(header, kind, has_output)
        types = mix.types()
        fallbacks += mix.fallbacks
        for tensor in header.tensors:
            nbytes = tensor.nbytes if types[tensor.name] == tensor.type else \
                _nbytes(tensor, types[tensor.name])
            total += -(-nbytes // header.alignment) * header.alignment
        total += header.data_offset
    return total + _METADATA_SLACK, fallbacks


def tensor_types(header: GGUFHeader, kind: str) -> dict[str, str]:
    """The type each tensor of `header` gets in a `kind` copy."""
    return _Mix(header, kind, any(t.name == "output.weight" for t in header.tensors)).types()


class _Mix:
    """llama.cpp's choice of type per tensor for one mix (llama_tensor_get_type), for the mixes
    Inglenook offers; it counts attn_v and ffn_down tensors in the order the quantizer meets
    them."""

    def __init__(self, header: GGUFHeader, kind: str, has_output: bool) -> None:
        arch = header.architecture
        self.kind, self.has_output, self.falcon = kind, has_output, arch == "falcon"
        heads = header.metadata.get(f"{arch}.attention.head_count")
        kv_heads = header.metadata.get(f"{arch}.attention.head_count_kv")
        self.n_gqa = heads // kv_heads if isinstance(heads, int) and isinstance(
            kv_heads, int) and kv_heads > 0 else 1
        experts = header.metadata.get(f"{arch}.expert_count")
        self.n_expert = experts if isinstance(experts, int) else 0
        self.n_layer = header.block_count
        self.n_attention_v = sum(1 for t in header.tensors if any(
            part in t.name for part in ("attn_v.weight", "attn_qkv.weight", "attn_kv_b.weight")))
        self.i_attention_v = self.i_ffn_down = self.fallbacks = 0
        self.header, self.base = header, TYPES[kind][1]

    def types(self) -> dict[str, str]:
        """Each tensor's type, met in the quantizer's order (the counts depend on it)."""
        base = self.base
        return {t.name: (self.type_of(t, base) if _quantized(t) and base not in _FLOATS
                         else base if _quantized(t) else t.type)
                for t in _in_quantizer_order(self.header.tensors)}

    @staticmethod
    def more_bits(i: int, n: int) -> bool:
        return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2

    def type_of(self, tensor: TensorInfo, new: str) -> str:
        name, kind = tensor.name, self.kind
        if name == "output.weight" or (not self.has_output and name == "token_embd.weight"):
            if self.falcon or tensor.shape[0] % _block(new):
                new = "Q8_0"
            elif new != "Q8_0":
                new = "Q6_K"
        elif name == "token_embd.weight":
            pass
        elif "attn_v.weight" in name:
            new = self._attention_v(new)
            self.i_attention_v += 1
        elif "attn_k.weight" in name and self.n_expert == 8:
            new = "Q8_0"
        elif "ffn_down" in name:
            new = self._ffn_down(name, new)
            self.i_ffn_down += 1
        elif "attn_output.weight" in name and not self.falcon:
            if self.n_expert == 8:
                if kind in ("Q2_K", "Q3_K_S", "Q3_K_M", "IQ4_NL", "Q4_K_S", "Q4_K_M", "IQ4_XS"):
                    new = "Q5_K"
            else:
                new = {"Q2_K": "Q3_K", "Q3_K_M": "Q4_K", "Q3_K_L": "Q5_K"}.get(kind, new)
        elif "attn_output.weight" in name and kind == "Q3_K_L":
            new = "Q4_K"
        elif "attn_qkv.weight" in name:
            new = {"Q3_K_M": "Q4_K", "Q3_K_L": "Q4_K", "Q4_K_M": "Q5_K",
                   "Q5_K_M": "Q6_K"}.get(kind, new)
        if tensor.shape[0] % _block(new):  # a row length this type cannot take
            self.fallbacks += 1
            new = _FALLBACK.get(new, "F16")
            if tensor.shape[0] % _block(new):
                new = "F16"
        return new

    def _attention_v(self, new: str) -> str:
        kind, i, gqa = self.kind, self.i_attention_v, self.n_gqa
        if kind == "Q2_K":
            new = "Q4_K" if gqa >= 4 else "Q3_K"
        elif kind == "Q3_K_M":
            new = "Q5_K" if i < 2 else "Q4_K"
        elif kind == "Q3_K_L" or (kind in ("IQ4_NL", "IQ4_XS") and gqa >= 4):
            new = "Q5_K"
        elif kind in ("Q4_K_M", "Q5_K_M") and self.more_bits(i, self.n_attention_v):
            new = "Q6_K"
        elif kind == "Q4_K_S" and i < 4:
            new = "Q5_K"
        return "Q8_0" if self.n_expert == 8 else new

    def _ffn_down(self, name: str, new: str) -> str:
        kind, n = self.kind, self.n_layer
        i = self.i_ffn_down
        if self.n_expert > 1 and (found := re.match(r"blk\.(\d+)\.", name)):
            i = int(found.group(1))  # experts' tensors are not in layer order
        if kind == "Q2_K":
            return "Q3_K"
        if kind == "Q3_K_M":
            return "Q5_K" if i < n // 16 else "Q4_K" if not self.falcon or self.more_bits(
                i, n) else "Q3_K"
        if kind == "Q3_K_L":
            return "Q4_K" if self.falcon else "Q5_K"
        if kind == "Q4_K_M":
            if self.falcon:
                return "Q6_K" if i < n // 16 else "Q5_K" if self.more_bits(i, n) else "Q4_K"
            return "Q6_K" if self.more_bits(i, n) else new
        if kind in ("IQ4_NL", "IQ4_XS") and i < n // 8:
            return "Q5_K"
        if kind == "Q5_K_M" and self.more_bits(i, n):
            return "Q6_K"
        if kind == "Q4_K_S" and not self.falcon and i < n // 8:
            return "Q5_K"
        return new


def _quantized(tensor: TensorInfo) -> bool:
    """Whether llama.cpp's quantizer converts this tensor at all."""
    name = tensor.name
    dims = len(tensor.shape)
    while dims > 1 and tensor.shape[dims - 1] == 1:
        dims -= 1
    return (name.endswith("weight") and dims >= 2 and "_norm.weight" not in name
            and name not in _KEPT_NAMES and not any(part in name for part in _KEPT))


def _in_quantizer_order(tensors: tuple[TensorInfo, ...]) -> list[TensorInfo]:
    """By layer, then by name: the order llama.cpp's loader keeps its weights in (the counts
    of attn_v and ffn_down tensors follow it)."""
    def key(t: TensorInfo) -> tuple[int, str]:
        found = re.match(r"blk\.(\d+)\.", t.name)
        return (int(found.group(1)) if found else -1, t.name)
    return sorted(tensors, key=key)


def _block(type_name: str) -> int:
    return GGML_QUANT_SIZES[GGMLQuantizationType[type_name]][0]


def _nbytes(tensor: TensorInfo, type_name: str) -> int:
    block, size = GGML_QUANT_SIZES[GGMLQuantizationType[type_name]]
    return tensor.n_elements // block * size


def _base_name(source: Path, quant: str) -> str:
    split = split_name(source.name)
    stem = split.base.rsplit("/", 1)[-1] if split else source.name.removesuffix(".gguf")
    if quant:
        stem = re.sub(rf"[-._]?{re.escape(quant)}$", "", stem, flags=re.IGNORECASE) or stem
    return stem
