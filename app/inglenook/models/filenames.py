"""What Inglenook makes of a file name on the Hub: is it safe to use, which quantization it is, and
whether it is one part of a model split across several files.

A repository's file list comes from a server, so every name is treated as hostile until checked:
the local name of a download is only ever the checked last component, and it always ends in .gguf.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_NAME = 200  # leaves room for ".part.json" within the usual 255-byte limit
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+\- ]*$")
_WINDOWS_RESERVED = {"CON", "PRN", "AUX", "NUL", *(f"COM{i}" for i in range(10)),
                     *(f"LPT{i}" for i in range(10))}

# Quantization as llama.cpp names it in file names: Q4_K_M, Q8_0, Q4_0_4_4, IQ2_XS, IQ4_NL, TQ1_0,
# MXFP4, F16, BF16... The last match wins: the quantization comes at the end of the name.
_QUANT = re.compile(
    r"(?<![A-Za-z0-9])("
    r"I?Q[1-8](?:_(?:K|XXS|XS|S|M|L|XL|NL|[0-9]))*"
    r"|TQ[12]_[0-9]|MXFP4(?:_MOE)?|BF16|FP16|F16|FP32|F32"
    r")(?![A-Za-z0-9])", re.IGNORECASE)
_QUANT_ALIASES = {"FP16": "F16", "FP32": "F32"}
_SPLIT = re.compile(r"^(?P<base>.+)-(?P<index>\d{5})-of-(?P<count>\d{5})\.gguf$", re.IGNORECASE)


class UnsafeFileName(ValueError):
    """The message says which name was refused and why; it is shown to the user as is."""


GGUF_ONLY = (".gguf",)
# A speech model's files (speech/downloads.py): whisper's model.bin, config.json, tokenizer.json
# and vocabulary; a Piper voice's .onnx and .onnx.json.
SPEECH_FILES = (".bin", ".json", ".txt", ".onnx")


def local_name(repo_path: str, suffixes: tuple[str, ...] = GGUF_ONLY) -> str:
    """The name a repository file gets in the models folder: its last path component, checked.

    Refuses `..`, absolute paths, backslashes, control characters, odd characters, names that do
    not end in one of `suffixes` (.gguf unless told), and names Windows reserves, so that a
    download can never land outside its folder.
    """
    shown = repr(repo_path)[:120]
    if not isinstance(repo_path, str) or not repo_path:
        raise UnsafeFileName("No file name was given.")
    if any(ord(c) < 32 or ord(c) == 127 for c in repo_path):
        raise UnsafeFileName(f"Refusing the file name {shown}: it contains control characters.")
    if "\\" in repo_path or ":" in repo_path:
        raise UnsafeFileName(f"Refusing the file name {shown}: it contains '\\' or ':'.")
    if repo_path.startswith("/"):
        raise UnsafeFileName(f"Refusing the file name {shown}: it is an absolute path.")
    parts = repo_path.split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise UnsafeFileName(f"Refusing the file name {shown}: it contains '..', '.' or '//'.")
    for part in parts:
        if not _NAME.match(part) or part.endswith((" ", ".")):
            raise UnsafeFileName(
                f"Refusing the file name {shown}: only letters, digits, spaces and . _ + - are "
                "allowed, starting with a letter or digit.")
    name = parts[-1]
    if len(name) > MAX_NAME or len(repo_path) > 1000:
        raise UnsafeFileName(f"Refusing the file name {shown}: it is too long.")
    if not name.lower().endswith(suffixes):
        if suffixes == GGUF_ONLY:
            raise UnsafeFileName(f"{name} is not a GGUF file (only .gguf files can be "
                                 "downloaded).")
        raise UnsafeFileName(f"{name} is not a speech model's file.")
    if name.split(".")[0].upper() in _WINDOWS_RESERVED:
        raise UnsafeFileName(f"Refusing the file name {shown}: Windows reserves that name.")
    return name


def looks_like_projector(name: str) -> bool:
    """A vision projector (mmproj GGUF) by the Hub's file names alone (its header decides)."""
    lower = name.lower()
    return lower.endswith(".gguf") and "mmproj" in lower


EMBEDDING_NAMES = re.compile(r"embed|bge-|minilm|(^|[-_.])(e5|gte|mxbai|arctic)[-_.]",
                             re.IGNORECASE)


def looks_like_embedding(name: str) -> bool:
    """An embedding model (nomic-embed-text, bge, all-MiniLM, e5, gte…) by its file name alone
    (its header decides: `<arch>.pooling_type`)."""
    return name.lower().endswith(".gguf") and EMBEDDING_NAMES.search(name) is not None


def precision_rank(name: str) -> int:
    """Which of a vision repository's projectors to take: f16, then bf16, q8_0, f32, others."""
    order = ("F16", "BF16", "Q8_0", "F32")
    quant = parse_quant(name)
    return order.index(quant) if quant in order else len(order)


def repo_stem(repo: str) -> str:
    """What a repository's files are about: its name without the owner and a "-GGUF" tail
    ("ggml-org/gemma-3-4b-it-GGUF" → "gemma-3-4b-it")."""
    name = repo.rsplit("/", 1)[-1]
    return re.sub(r"[-_.]gguf$", "", name, flags=re.IGNORECASE) or name


def saved_name(repo: str, repo_path: str, suffixes: tuple[str, ...] = GGUF_ONLY) -> str:
    """The name a download gets in the (flat) models folder: `local_name`, except that a
    projector with a generic name ("mmproj-model-f16.gguf", "mmproj-F16.gguf": every vision
    repository has one) is named after its repository too, so that two repositories' projectors
    do not overwrite each other and each is paired with its own model."""
    name = local_name(repo_path, suffixes)
    stem = repo_stem(repo)
    if not looks_like_projector(name) or stem.lower() in name.lower() or not _NAME.match(stem):
        return name
    prefixed = f"{stem}-{name}"
    return prefixed if len(prefixed) <= MAX_NAME else name


def is_safe(repo_path: str) -> bool:
    try:
        local_name(repo_path)
    except UnsafeFileName:
        return False
    return True


def parse_quant(filename: str) -> str:
    """The quantization named in a file name ("Q4_K_M", "IQ2_XS", "BF16"...), or "" if none."""
    name = filename.rsplit("/", 1)[-1]
    stem = name[:-5] if name.lower().endswith(".gguf") else name
    matches = _QUANT.findall(stem)
    if not matches:
        return ""
    quant = matches[-1].upper()
    return _QUANT_ALIASES.get(quant, quant)


def without_quant(stem: str) -> str:
    """The name with its quantization tags taken out ("smolvlm-q4_k_m" → "smolvlm-")."""
    return _QUANT.sub("", stem)


@dataclass(frozen=True)
class SplitName:
    """`<base>-00002-of-00003.gguf` (llama.cpp's gguf-split naming)."""

    base: str  # may include the repository folder
    index: int  # 1-based
    count: int

    def part(self, index: int) -> str:
        return f"{self.base}-{index:05d}-of-{self.count:05d}.gguf"

    @property
    def all_parts(self) -> list[str]:
        return [self.part(i) for i in range(1, self.count + 1)]

    @property
    def model_name(self) -> str:
        """What the user sees for the whole set: the base name, as one .gguf."""
        return self.base.rsplit("/", 1)[-1] + ".gguf"


def split_name(path: str) -> SplitName | None:
    m = _SPLIT.match(path)
    if m is None:
        return None
    index, count = int(m["index"]), int(m["count"])
    if not 1 <= index <= count:
        return None
    return SplitName(m["base"], index, count)
