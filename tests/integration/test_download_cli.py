"""`inglenook models …` as a user runs it, against the fake Hub."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from inglenook import paths
from tests import fakehub
from tests.fakehub import FakeFile, FakeHub, Fault
from tests.gguf_tools import write_gguf

fake_hub = fakehub.fake_hub  # the fixture, under its own name
REPO = "org/Tiny-GGUF"


def run_cli(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    # The fixtures put INGLENOOK_HOME, HF_ENDPOINT, HF_TOKEN and NO_PROXY in os.environ.
    # Bytes, decoded here: text mode would turn the progress line's \r into \n.
    result = subprocess.run([sys.executable, "-m", "inglenook", "models", *args],
                            capture_output=True, timeout=60, input=stdin.encode(),
                            env=dict(os.environ), check=False)
    return subprocess.CompletedProcess(result.args, result.returncode,
                                       result.stdout.decode(), result.stderr.decode())


def one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("inglenook: ")
    return last


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_search_sorts_and_goes_offline_cleanly(fake_hub: FakeHub,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    fake_hub.add_repo("a/Popular-GGUF", downloads=9000, likes=1)
    fake_hub.add_repo("b/Liked-GGUF", downloads=10, likes=99)
    by_downloads = run_cli("search", "gguf")
    assert by_downloads.returncode == 0, by_downloads.stderr
    lines = by_downloads.stdout.splitlines()
    assert lines[0].startswith("REPOSITORY") and "9,000" in lines[1]
    assert [line.split()[0] for line in lines[1:]] == ["a/Popular-GGUF", "b/Liked-GGUF"]
    by_likes = run_cli("search", "gguf", "--sort", "likes")
    assert [line.split()[0] for line in by_likes.stdout.splitlines()[1:]] == [
        "b/Liked-GGUF", "a/Popular-GGUF"]
    assert fake_hub.requests[-1].query["sort"] == ["likes"]

    fake_hub.clear_log()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    offline = run_cli("search", "gguf")
    assert "Offline mode" in one_error_line(offline)
    assert fake_hub.requests == []


def test_files_by_quantization(fake_hub: FakeHub) -> None:
    fake_hub.add_repo(REPO, [
        FakeFile("tiny.Q8_0.gguf", 2_000_000), FakeFile("tiny.Q4_K_M.gguf", 1_000_000),
        *(FakeFile(f"tiny-F16-0000{i}-of-00002.gguf", 3_000_000) for i in (1, 2))])
    result = run_cli("files", REPO)
    assert result.returncode == 0, result.stderr
    rows = [line.split() for line in result.stdout.splitlines()[:3]]
    assert [(r[0], r[3]) for r in rows] == [("Q4_K_M", "tiny.Q4_K_M.gguf"),
                                            ("Q8_0", "tiny.Q8_0.gguf"),
                                            ("F16", "tiny-F16-00001-of-00002.gguf")]
    assert "(2 of 2 parts)" in result.stdout and "6 MB" in result.stdout


def test_download_with_progress_then_list_and_rm(fake_hub: FakeHub) -> None:
    served = fake_hub.add_repo(REPO, [FakeFile("tiny.Q4_K_M.gguf", 2 << 20)]).files[0]
    result = run_cli("download", REPO, "tiny.Q4_K_M.gguf")
    assert result.returncode == 0, result.stderr
    path = paths.models_dir() / "tiny.Q4_K_M.gguf"
    assert result.stdout.strip() == str(path) and sha256(path) == served.sha256
    assert "100.0%" in result.stderr and "MB/s" in result.stderr and "\r" in result.stderr
    again = run_cli("download", REPO, "tiny.Q4_K_M.gguf")
    assert again.returncode == 0 and "already installed" in again.stderr

    listed = run_cli("list")
    assert listed.returncode == 0, listed.stderr
    assert "(bundled," in listed.stdout and "llama · " in listed.stdout  # the bundled model
    assert "tiny.Q4_K_M  (local, 2 MB)" in listed.stdout
    assert "unreadable: " in listed.stdout  # random bytes are no GGUF, and that is shown

    bundled = paths.bundled_model_path()
    assert bundled is not None
    assert "bundled model" in one_error_line(run_cli("rm", bundled.stem, "--yes"))
    kept = run_cli("rm", "tiny.Q4_K_M", stdin="n\n")
    assert kept.returncode == 1 and path.exists()
    removed = run_cli("rm", "tiny.Q4_K_M", stdin="y\n")
    assert removed.returncode == 0, removed.stderr
    assert not path.exists() and bundled.exists()
    assert "No downloaded model" in one_error_line(run_cli("rm", "tiny.Q4_K_M", "--yes"))


def test_list_reads_gguf_headers(fake_hub: FakeHub) -> None:
    write_gguf(paths.models_dir() / "mini.gguf", {
        "general.architecture": "llama", "llama.context_length": 2048,
        "general.file_type": 15, "tokenizer.chat_template": "{{ messages }}"})
    result = run_cli("list")
    assert result.returncode == 0, result.stderr
    block = result.stdout.split("mini  (local")[1]
    assert "llama · " in block and "Q4_K_M" in block and "context 2,048" in block
    assert "chat template" in block


@pytest.mark.skipif(sys.platform == "win32", reason="symbolic links need privileges there")
def test_rm_refuses_files_outside_the_models_folder(fake_hub: FakeHub, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    write_gguf(outside / "mine.gguf", {"general.architecture": "llama"})
    (paths.models_dir() / "linked").symlink_to(outside)  # a folder linked into the library
    result = run_cli("rm", "mine", "--yes")
    assert "not in the models folder" in one_error_line(result)
    assert (outside / "mine.gguf").exists()


def test_download_failure_is_one_clear_line(fake_hub: FakeHub) -> None:
    fake_hub.add_repo(REPO, [FakeFile("bad.Q4_K_M.gguf", 100_000,
                                      faults=(Fault("wrong_bytes", times=-1),))])
    result = run_cli("download", REPO, "bad.Q4_K_M.gguf")
    assert "arrived corrupt" in one_error_line(result)
    assert list(paths.models_dir().iterdir()) == []
    unsafe = run_cli("download", REPO, "../evil.gguf")
    assert "Refusing the file name" in one_error_line(unsafe)
    missing = run_cli("download", "org/nothing", "x.gguf")
    assert "not found" in one_error_line(missing)


def test_split_model_downloads_every_part(fake_hub: FakeHub) -> None:
    parts = [FakeFile(f"Q4_K_M/big-Q4_K_M-0000{i}-of-00003.gguf", 300_000) for i in (1, 2, 3)]
    fake_hub.add_repo(REPO, parts)
    result = run_cli("download", REPO, "Q4_K_M/big-Q4_K_M-00002-of-00003.gguf")
    assert result.returncode == 0, result.stderr
    for part in parts:
        assert sha256(paths.models_dir() / part.path.split("/")[-1]) == part.sha256


def test_killed_download_resumes(fake_hub: FakeHub) -> None:
    """SIGKILL mid-file (no chance to clean up), start again: it continues where it stopped."""
    name = "big.Q4_K_M.gguf"
    size = 16 << 20
    # ~3 MB/s on the first request only: slow enough to be caught mid-file.
    served = fake_hub.add_repo(REPO, [FakeFile(name, size, faults=(
        Fault("slow", chunk=64 << 10, delay=0.02),))]).files[0]
    part = paths.models_dir() / (name + ".part")
    proc = subprocess.Popen([sys.executable, "-m", "inglenook", "models", "download", REPO, name],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=dict(os.environ))
    try:
        deadline = time.monotonic() + 30
        while not (part.exists() and part.stat().st_size >= 512 << 10):
            assert proc.poll() is None, "the download ended before it could be killed"
            assert time.monotonic() < deadline, "no bytes arrived"
            time.sleep(0.01)
        proc.kill()  # SIGKILL
    finally:
        proc.wait(timeout=10)
    kept = part.stat().st_size
    assert 0 < kept < size and not (paths.models_dir() / name).exists()

    again = run_cli("download", REPO, name)
    assert again.returncode == 0, again.stderr
    assert "Resuming big.Q4_K_M.gguf from" in again.stderr
    assert sha256(paths.models_dir() / name) == served.sha256
    last = fake_hub.byte_requests(name)[-1]
    assert last.status == 206 and last.range_start == kept  # exactly what was on disk
    assert sorted(p.name for p in paths.models_dir().iterdir()) == [name]


@pytest.mark.skipif(sys.platform == "win32", reason="no SIGINT to send to another process")
def test_ctrl_c_keeps_the_partial_and_says_how_to_resume(fake_hub: FakeHub) -> None:
    name = "big.Q4_K_M.gguf"
    fake_hub.add_repo(REPO, [FakeFile(name, 16 << 20, faults=(
        Fault("slow", chunk=64 << 10, delay=0.02),))])
    part = paths.models_dir() / (name + ".part")
    proc = subprocess.Popen([sys.executable, "-m", "inglenook", "models", "download", REPO, name],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ))
    try:
        deadline = time.monotonic() + 30
        while not (part.exists() and part.stat().st_size > 0):
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.01)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith(
        f"inglenook: paused; the partial download is kept. To resume, run again: "
        f"inglenook models download {REPO} {name}")
    assert part.stat().st_size > 0
    listed = run_cli("list")
    assert f"resume: inglenook models download {REPO} {name}" in listed.stdout
    assert run_cli("rm", name, "--yes").returncode == 0
    assert list(paths.models_dir().iterdir()) == []


def test_a_vision_model_comes_with_its_projector(fake_hub: FakeHub, tmp_path: Path) -> None:
    from tests.mmproj_tools import write_mmproj

    projector = write_mmproj(tmp_path / "mmproj-model-f16.gguf", 64).read_bytes()
    fake_hub.add_repo(REPO, [FakeFile("tiny.Q4_K_M.gguf", 200_000),
                             FakeFile("mmproj-model-f16.gguf", content=projector)],
                      tags=("gguf", "image-text-to-text"))
    assert "(reads images)" in run_cli("search", "tiny").stdout
    files = run_cli("files", REPO)
    assert "mmproj" not in files.stdout.splitlines()[0]  # a projector is no model to choose
    assert "includes its projector mmproj-model-f16.gguf" in files.stdout
    result = run_cli("download", REPO, "tiny.Q4_K_M.gguf")
    assert result.returncode == 0, result.stderr
    assert "its projector mmproj-model-f16.gguf comes with it" in result.stderr
    saved = paths.models_dir() / "Tiny-mmproj-model-f16.gguf"  # named after its repository
    assert sha256(saved) == hashlib.sha256(projector).hexdigest()


def test_files_label_a_model_this_engine_cannot_load(fake_hub: FakeHub, tmp_path: Path) -> None:
    """As the window's Hub panel does: the smallest file's header, read from its first
    megabytes, names an architecture the bundled llama.cpp does not know."""
    unknown = write_gguf(tmp_path / "x.gguf", {"general.architecture": "qwen9"}).read_bytes()
    known = write_gguf(tmp_path / "y.gguf", {"general.architecture": "llama"}).read_bytes()
    fake_hub.add_repo(REPO, [FakeFile("tiny.Q4_K_M.gguf", content=unknown),
                             FakeFile("tiny.Q8_0.gguf", content=unknown + b"\0" * 4096)])
    listed = run_cli("files", REPO)
    assert listed.returncode == 0, listed.stderr
    rows = listed.stdout.splitlines()[:2]
    assert all(row.endswith("Won't load") for row in rows), rows
    assert "architecture qwen9" in listed.stdout
    fake_hub.add_repo("org/Fine-GGUF", [FakeFile("fine.Q4_K_M.gguf", content=known)])
    fine = run_cli("files", "org/Fine-GGUF")
    assert fine.returncode == 0 and "Won't load" not in fine.stdout
