"""`inglenook chat` on the real engine, as a user runs it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.gguf_tools import rewrite_metadata
from tests.integration.test_engine import C_LEVEL_BOMB


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "inglenook", *args], capture_output=True,
                          text=True, timeout=120, check=False)


def test_chat_streams_an_answer() -> None:
    result = run_cli("chat", "--temperature", "0", "--seed", "1", "--max-tokens", "24",
                     "What is the capital of France?")
    assert result.returncode == 0, result.stderr
    assert len(result.stdout.split()) >= 5
    again = run_cli("chat", "--temperature", "0", "--seed", "1", "--max-tokens", "24",
                    "What is the capital of France?")
    assert again.stdout == result.stdout  # greedy: the same answer


def test_bad_model_exits_with_one_clear_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"NOPE" + b"\0" * 100)
    result = run_cli("chat", "--model", str(bad), "Hi")
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("inglenook: ") and "GGUF" in lines[0]


def test_a_model_whose_template_never_ends_exits_with_one_clear_line(
        tmp_path: Path, bundled_model: Path) -> None:
    stuck = tmp_path / "stuck.gguf"
    rewrite_metadata(bundled_model, stuck, {"tokenizer.chat_template": C_LEVEL_BOMB})
    result = run_cli("chat", "--model", str(stuck), "Hi")  # used to hang for good
    assert result.returncode == 1 and "Traceback" not in result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("inglenook: ") and "chat template" in line and "longer than" in line
