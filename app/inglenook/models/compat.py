"""Will a GGUF model load with the llama.cpp bundled here? Qt-free, and llama_cpp is not imported.

llama.cpp refuses a file whose `general.architecture`, `tokenizer.ggml.model` or (for BPE
tokenizers) `tokenizer.ggml.pre` names something it was not built with: "unknown model
architecture: 'X'", "unknown pre-tokenizer type: 'Y'". Found out at load time, that costs a
download of gigabytes, so Discover checks the header it reads over HTTP Range requests anyway
(remote_header.remote_header) and Library checks installed files.

How llama.cpp is asked. It has no API that lists what it supports, and a hand list would go stale
with the next engine update, which is exactly the failure being guarded against. Considered:

- A probe: a child process that loads the vocabulary of a GGUF (vocab_only) and reports
  llama.cpp's error. Exact, but it needs llama_cpp imported outside engine/host/ (its only
  importer), ~1 s per check, llama.cpp's parser run on a header from the internet, and in the
  frozen app there is no interpreter to run a probe script with.
- Reading the names compiled into libllama (chosen). Each architecture name is a C string in
  LLM_ARCH_NAMES (src/llama-arch.cpp), and llama-vocab.cpp compares the tokenizer names with C
  string literals. Every such literal is in the library file as its bytes followed by NUL, but
  not always as a string of its own: the linker stores a string that ends a longer one inside it
  ("qwen2" as the tail of "rwkv6qwen2", "bert" of "modern-bert"). So a name counts as known when
  `name + NUL` occurs anywhere in the file.

That errs one way only. A name absent from the file cannot be a literal llama.cpp compares with,
so "won't load" is certain; a name that happens to end some other string reads as known and is
simply not warned about, as before this check. One thing could hide a literal: a compiler may turn
`s == "short"` into integer compares and drop the string. Architecture names are safe (the table
holds pointers to them); tokenizer names are compared inline, so tokenizers are judged only when
canaries are found, pre-tokenizer names llama.cpp has had since 2024 that occur nowhere else in it.
Canary architectures likewise tell that the file is a libllama whose strings can be read at all;
without them nothing is judged.

Speed: the library is located with importlib's find_spec (importing llama_cpp would load
llama.cpp into the GUI process) and read once, ~4 MB in a few milliseconds, kept for the process
and keyed by path, size and modification time so that a rebuilt engine is read again; each
name's answer is remembered. A cache on disk would cost about as much to validate as the read.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from inglenook.models.gguf import GGUFError, GGUFHeader, read_header

MAX_LIBRARY_BYTES = 512 * 2**20  # libllama is a few MB; something far larger is not it
# In every llama.cpp since 2023: the table's first entries and its "unknown" name.
ARCH_CANARIES = ("llama", "gptneox", "starcoder", "(unknown)")
# Pre-tokenizer names (2024) that appear only in llama-vocab.cpp's comparisons.
TOKENIZER_CANARIES = ("smaug-bpe", "poro-chat", "gpt3-finnish", "chatglm-bpe")
# llama.cpp reads tokenizer.ggml.pre only for BPE tokenizers ("gpt2"); SPM, WPM and the others
# ignore it, so a pre-tokenizer is judged only with this model.
BPE_MODEL = "gpt2"
_SHOWN = 60  # characters of a name from a file that are shown


def library_path() -> Path | None:
    """The libllama that the engine host will load: llama_cpp's lib/ folder (or
    LLAMA_CPP_LIB_PATH, which llama_cpp honours too), found without importing llama_cpp."""
    override = os.environ.get("LLAMA_CPP_LIB_PATH")
    if override:
        folders = [Path(override)]
    else:
        try:
            spec = importlib.util.find_spec("llama_cpp")
        except (ImportError, ValueError):
            spec = None
        if spec is None or not spec.submodule_search_locations:
            return None
        folders = [Path(p) / "lib" for p in spec.submodule_search_locations]
    if sys.platform == "win32":
        names = ("llama.dll", "libllama.dll")
    elif sys.platform == "darwin":
        names = ("libllama.so", "libllama.dylib")
    else:
        names = ("libllama.so",)
    return next((f / n for f in folders for n in names if (f / n).is_file()), None)


def engine_version() -> str:
    """llama-cpp-python's version, from its metadata; "" when unknown."""
    try:
        return importlib.metadata.version("llama_cpp_python")
    except importlib.metadata.PackageNotFoundError:
        return ""


class EngineNames:
    """The names one build of libllama has compiled in (see the module docstring)."""

    def __init__(self, path: Path, data: bytes, version: str = "") -> None:
        self.path = path
        self.version = version
        self._data = data
        self._known: dict[str, bool] = {}
        self.reads_architectures = all(self.knows(n) for n in ARCH_CANARIES)
        self.reads_tokenizers = self.reads_architectures and all(
            self.knows(n) for n in TOKENIZER_CANARIES)

    def knows(self, name: str) -> bool:
        """Whether `name` ends a C string in the library: always, if llama.cpp compares with it."""
        known = self._known.get(name)
        if known is None:
            raw = name.encode("utf-8", "replace")
            known = bool(raw) and b"\0" not in raw and raw + b"\0" in self._data
            self._known[name] = known
        return known

    def describe(self) -> str:
        return f"llama-cpp-python {self.version}" if self.version else f"{self.path.name}"


_engines: dict[tuple[str, int, int], EngineNames] = {}
_lock = threading.Lock()


def bundled_engine(path: Path | None = None) -> EngineNames | None:
    """The names in the library at `path` (default: library_path()); None when there is no
    readable library. Read once per process and file version."""
    path = path or library_path()
    if path is None:
        return None
    try:
        st = path.stat()
    except OSError:
        return None
    key = (str(path), st.st_size, st.st_mtime_ns)
    with _lock:  # Discover and Library ask from their own threads: read the file once
        engine = _engines.get(key)
        if engine is None:
            if st.st_size > MAX_LIBRARY_BYTES:
                return None
            try:
                data = path.read_bytes()
            except OSError:
                return None
            engine = _engines[key] = EngineNames(path, data, engine_version())
    return engine


# -- the verdict ----------------------------------------------------------------------------------
Status = Literal["ok", "wont_load", "unchecked"]
WONT_LOAD = "won't load"  # after the architecture, in the Library and `inglenook models list`


@dataclass(frozen=True)
class Compatibility:
    """What the engine makes of a file's names. "ok" means none is unknown to it, not that the
    file will load (memory, corrupt tensors...); "unchecked": no engine could be read."""

    status: Status
    summary: str = ""  # a label, e.g. "Won't load with this engine (architecture qwen9)"
    detail: str = ""  # why, in a sentence or two, for a tooltip or a note

    @property
    def wont_load(self) -> bool:
        return self.status == "wont_load"

    @property
    def sentence(self) -> str:
        """The label and why, as the Library's details and `inglenook chat` say it."""
        return f"{self.summary}. {self.detail}"


def _shown(name: str) -> str:
    return name if len(name) <= _SHOWN else name[:_SHOWN - 1] + "…"


def _string(header: GGUFHeader, key: str) -> str | None:
    value = header.metadata.get(key)
    return value if isinstance(value, str) else None


def check_file(path: str) -> Compatibility | None:
    """check() of a file on disk; None when its header cannot be read (loading it would say
    why: not a GGUF file, cut short...)."""
    try:
        return check(read_header(path))
    except (GGUFError, OSError):
        return None


def check(header: GGUFHeader, engine: EngineNames | None = None) -> Compatibility:
    """Whether the engine (default: the bundled one) knows the header's architecture, tokenizer
    and pre-tokenizer. Absent tokenizer keys are not judged: only names the engine lacks."""
    engine = engine or bundled_engine()
    if engine is None or not engine.reads_architectures:
        return Compatibility("unchecked", detail="Inglenook could not read which architectures "
                                                 "its llama.cpp supports; this was not checked.")
    this = f"The llama.cpp in this Inglenook ({engine.describe()})"
    later = "A newer version of Inglenook may support it."
    arch = header.architecture
    if not arch:
        return Compatibility(
            "wont_load", "Won't load with this engine (no architecture named)",
            "The file does not say which architecture it is (general.architecture), and "
            "llama.cpp refuses such files.")
    if not engine.knows(arch):
        return Compatibility(
            "wont_load", f"Won't load with this engine (architecture {_shown(arch)})",
            f"{this} does not know the architecture {_shown(arch)}, so loading this model "
            f"would fail. {later}")
    if not engine.reads_tokenizers:
        return Compatibility("ok")
    model = _string(header, "tokenizer.ggml.model")
    pre = _string(header, "tokenizer.ggml.pre") if model == BPE_MODEL else None
    for kind, name in (("tokenizer", model), ("pre-tokenizer", pre)):
        if name and not engine.knows(name):
            return Compatibility(
                "wont_load", f"Tokenizer {_shown(name)} unknown to this engine",
                f"{this} does not know the {kind} {_shown(name)} that this model uses, so "
                f"loading it would fail. {later}")
    return Compatibility("ok")
