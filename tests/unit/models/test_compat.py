"""Will it load here? The names compiled into a libllama file decide: hand-made library files
show how names are found (tail-merged strings too) and when nothing is judged; the bundled
library and the fake Hub show the whole path. The real engine's own refusal is checked in
tests/integration/test_compat_engine.py."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest
from gguf.constants import GGMLQuantizationType

from inglenook.models import compat
from inglenook.models.advice import header_file, is_recommended, plan_fits
from inglenook.models.compat import ARCH_CANARIES, TOKENIZER_CANARIES, EngineNames, check
from inglenook.models.gguf import GGUFError, GGUFHeader, read_header
from inglenook.models.hub import list_gguf_files
from tests import fakehub
from tests.fakehub import FakeFile, FakeHub
from tests.gguf_tools import write_gguf

fake_hub = fakehub.fake_hub  # the fixture, under its own name


def library(*strings: str, canaries: bool = True, tokenizer_canaries: bool = True) -> bytes:
    """Bytes like a shared library's: code-ish noise and NUL-terminated strings."""
    names = list(strings)
    if canaries:
        names += ARCH_CANARIES
    if tokenizer_canaries:
        names += TOKENIZER_CANARIES
    return b"\x7fELF\x02\x01" + b"".join(b"\x90\x48\x8b" + n.encode() + b"\0" for n in names)


def engine(*strings: str, **kwargs: bool) -> EngineNames:
    return EngineNames(Path("libllama.so"), library(*strings, **kwargs), "9.9.9")


def header(arch: str | None = "llama", model: str | None = "gpt2",
           pre: str | None = "llama-bpe") -> GGUFHeader:
    metadata: dict[str, object] = {"general.architecture": arch, "tokenizer.ggml.model": model,
                                   "tokenizer.ggml.pre": pre}
    return GGUFHeader("m.gguf", 3, 0, 3, 32, 0, 0,
                      {k: v for k, v in metadata.items() if v is not None})


ENGINE = engine("gpt2", "llama-bpe", "modern-bert", "rwkv6qwen2", "qwen35")


def test_names_the_library_holds_are_known() -> None:
    assert ENGINE.reads_architectures and ENGINE.reads_tokenizers
    assert ENGINE.knows("llama") and ENGINE.knows("qwen35")
    # Stored only as the tail of a longer string, as a linker merges them: still known.
    assert ENGINE.knows("qwen2") and ENGINE.knows("bert")
    assert not ENGINE.knows("qwen3")  # a prefix of a string is not a string
    assert not ENGINE.knows("gemma9") and not ENGINE.knows("")
    assert not ENGINE.knows("llama\0x")  # llama.cpp compares up to the length, NUL included
    assert check(header(), ENGINE) == compat.Compatibility("ok")
    assert check(header(arch="qwen2", pre="qwen35"), ENGINE).status == "ok"


def test_an_unknown_architecture_wont_load() -> None:
    verdict = check(header(arch="gemma9"), ENGINE)
    assert verdict.wont_load
    assert verdict.summary == "Won't load with this engine (architecture gemma9)"
    assert "llama-cpp-python 9.9.9" in verdict.detail and "gemma9" in verdict.detail
    missing = check(header(arch=None), ENGINE)
    assert missing.wont_load and "no architecture" in missing.summary
    long = check(header(arch="x" * 500), ENGINE)
    assert long.wont_load and len(long.summary) < 120 and long.summary.endswith("…)")


def test_an_unknown_tokenizer_or_pre_tokenizer_wont_load() -> None:
    pre = check(header(pre="tekken9"), ENGINE)
    assert pre.wont_load and pre.summary == "Tokenizer tekken9 unknown to this engine"
    assert "pre-tokenizer tekken9" in pre.detail
    model = check(header(model="sentencepiece9"), ENGINE)
    assert model.wont_load and model.summary == "Tokenizer sentencepiece9 unknown to this engine"


def test_what_llama_cpp_ignores_or_does_not_say_is_not_judged() -> None:
    # Only BPE ("gpt2") tokenizers have a pre-tokenizer: an SPM model's is never read.
    assert check(header(model="llama", pre="whatever"), ENGINE).status == "ok"
    assert check(header(model=None, pre=None), ENGINE).status == "ok"
    assert check(header(pre=None), ENGINE).status == "ok"


def test_without_canaries_nothing_or_only_architectures_are_judged() -> None:
    # Tokenizer names may have been compiled into integer compares: not judged.
    inlined = engine("gpt2", tokenizer_canaries=False)
    assert inlined.reads_architectures and not inlined.reads_tokenizers
    assert check(header(pre="tekken9"), inlined).status == "ok"
    assert check(header(arch="gemma9"), inlined).wont_load
    # Not a libllama whose strings can be read: nothing is claimed.
    unreadable = engine("gpt2", canaries=False)
    verdict = check(header(arch="gemma9"), unreadable)
    assert verdict.status == "unchecked" and not verdict.wont_load


def test_no_library_means_unchecked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compat, "library_path", lambda: None)
    assert compat.bundled_engine() is None
    assert check(header(arch="gemma9")).status == "unchecked"


def test_the_library_is_read_once_per_file_version(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    if sys.platform == "win32":
        pytest.skip("the library is llama.dll there")
    lib = tmp_path / "lib" / "libllama.so"
    lib.parent.mkdir()
    lib.write_bytes(library("gemma9"))
    monkeypatch.setenv("LLAMA_CPP_LIB_PATH", str(lib.parent))
    assert compat.library_path() == lib
    first = compat.bundled_engine()
    assert first is not None and first.knows("gemma9")
    assert compat.bundled_engine() is first  # cached: the same object, the file not read again
    lib.write_bytes(library("gemma10"))  # a rebuilt engine: another size, another answer
    os.utime(lib, ns=(1, 1))
    second = compat.bundled_engine()
    assert second is not first and second is not None
    assert second.knows("gemma10") and not second.knows("gemma9")
    assert check(header(arch="gemma9")).wont_load


def test_the_bundled_library_is_read_without_importing_llama_cpp() -> None:
    code = ("import sys\n"
            "from inglenook.models import compat\n"
            "e = compat.bundled_engine()\n"
            "assert e is not None and e.reads_architectures and e.reads_tokenizers, e\n"
            "assert e.knows('llama') and e.knows('qwen2') and not e.knows('no-such-arch-9')\n"
            "assert 'llama_cpp' not in sys.modules\n")
    env = {k: v for k, v in os.environ.items() if k != "LLAMA_CPP_LIB_PATH"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_the_bundled_model_passes(bundled_model: Path) -> None:
    real = read_header(bundled_model)
    assert check(real).status == "ok"
    renamed = dataclasses.replace(real, metadata={**real.metadata,
                                                  "general.architecture": "no-such-arch-9"})
    assert check(renamed).wont_load


# -- Discover's path: the header read over HTTP ---------------------------------------------------
def tiny(path: Path, arch: str) -> bytes:
    metadata = {"general.architecture": arch, "general.file_type": 10,
                f"{arch}.block_count": 2, f"{arch}.context_length": 2048,
                f"{arch}.embedding_length": 64, f"{arch}.attention.head_count": 2,
                "tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "qwen2"}
    write_gguf(path, metadata, [("token_embd.weight", (4096,), GGMLQuantizationType.F32, None)])
    return path.read_bytes()


def test_a_hub_file_of_an_unknown_architecture_is_labelled_before_download(
        fake_hub: FakeHub, tmp_path: Path) -> None:
    repo = "org/Future-GGUF"
    fake_hub.add_repo(repo, [FakeFile("future-Q4_K_M.gguf", content=tiny(tmp_path / "a", "zeta9")),
                             FakeFile("future-Q8_0.gguf", 50_000_000)])
    listing = list_gguf_files(repo)
    report = plan_fits(repo, listing, None)
    assert report.verdict is not None and report.verdict.wont_load
    assert report.verdict.summary == "Won't load with this engine (architecture zeta9)"
    assert report.recommended is not None  # the planner's choice, but not recommended:
    assert not any(is_recommended(m, report, None) for m in listing.models)
    # Only the header's first bytes crossed the wire, and only of the smallest file.
    (read,) = fake_hub.byte_requests("future-Q4_K_M.gguf")
    assert read.headers["range"].startswith("bytes=0-")
    assert fake_hub.byte_requests("future-Q8_0.gguf") == []
    # Opened again with what was learnt: nothing is fetched, the verdict stays.
    fake_hub.clear_log()
    again = plan_fits(repo, listing, report.shape, report.verdict)
    assert again.verdict == report.verdict and fake_hub.requests == []


def test_a_known_architecture_passes_and_a_vision_projector_is_not_the_header_read(
        fake_hub: FakeHub, tmp_path: Path) -> None:
    repo = "org/Vision-GGUF"
    fake_hub.add_repo(repo, [FakeFile("mmproj-F16.gguf", content=tiny(tmp_path / "p", "clip")),
                             FakeFile("vision-Q4_K_M.gguf", content=tiny(tmp_path / "m", "qwen2")
                                      + bytes(100_000))])
    listing = list_gguf_files(repo)
    assert [m.name for m in listing.models] == ["vision-Q4_K_M.gguf"]  # the projector is apart
    assert listing.projector is not None and listing.projector.path == "mmproj-F16.gguf"
    assert header_file(listing) == "vision-Q4_K_M.gguf"  # the model's header is read
    report = plan_fits(repo, listing, None)
    assert report.verdict == compat.Compatibility("ok")
    assert report.shape.architecture == "qwen2"


@pytest.mark.parametrize(("arch", "message"), [
    ("zeta9", r"Won't load with this engine \(architecture zeta9\)"),
    ("llama", "layer count"),  # a known one: the planner's own error
])
def test_a_header_without_a_shape_says_whether_it_would_load(
        fake_hub: FakeHub, tmp_path: Path, arch: str, message: str) -> None:
    path = tmp_path / "odd.gguf"
    write_gguf(path, {"general.architecture": arch},
               [("token_embd.weight", (4096,), GGMLQuantizationType.F32, None)])
    fake_hub.add_repo("org/Odd-GGUF", [FakeFile("odd-Q4_K_M.gguf", content=path.read_bytes())])
    with pytest.raises(GGUFError, match=message):
        plan_fits("org/Odd-GGUF", list_gguf_files("org/Odd-GGUF"), None)
