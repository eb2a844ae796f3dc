"""`inglenook chat` on the real engine, as a user runs it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from inglenook.models import compat
from inglenook.models.gguf import read_header
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


def test_load_flags_reach_the_engine() -> None:
    """Every kind of flag (numbers, switches on and off, a choice) on the real engine; the
    context the engine loaded with is what --ctx asked for."""
    load = ("--gpu-layers", "0", "--ctx", "512", "--threads", "1", "--prompt-threads", "2",
            "--batch", "64", "--parallel", "1", "--no-prompt-lookup", "--no-mmap",
            "--kv-cache-type", "q8_0", "--flash-attn")
    result = run_cli("chat", *load, "--temperature", "0", "--seed", "1", "--max-tokens", "8",
                     "--repeat-penalty", "1.0", "--top-k", "1", "What is the capital of France?")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip()
    view = run_cli("prompt", "--json", *load, "Hi")
    assert view.returncode == 0, view.stderr
    assert json.loads(view.stdout)["n_ctx"] == 512


def test_a_context_too_small_for_the_message_is_the_engines_one_line() -> None:
    result = run_cli("chat", "--ctx", "256", "--max-tokens", "8", "word " * 400)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("inglenook: Your message is")


def test_chat_on_a_model_the_engine_cannot_load_says_so_as_the_library_does(
        tmp_path: Path, bundled_model: Path) -> None:
    zeta = rewrite_metadata(bundled_model, tmp_path / "zeta.gguf",
                            {"general.architecture": "zeta9"})
    verdict = compat.check(read_header(zeta))
    assert verdict.wont_load
    for command in ("chat", "serve"):
        result = run_cli(command, "--model", str(zeta), *(["Hi"] if command == "chat" else []))
        assert result.returncode == 1 and "Traceback" not in result.stderr
        assert result.stderr.strip().splitlines() == [f"inglenook: {verdict.sentence}"]


def test_serve_refuses_a_bad_load_option_before_loading() -> None:
    result = run_cli("serve", "--port", "0", "--gpu-layers", "-3")
    assert result.returncode == 2
    assert result.stderr.strip() == ("inglenook: --gpu-layers must be a whole number from -1 "
                                     "to 999, not '-3'.")


def test_chat_with_the_gemma_base_file_answers_and_stops(gemma_model: Path) -> None:
    """No chat template in the file: the one chosen is said on stderr, and the answer ends
    well before --max-tokens (the ChatML fallback ran on, printing <|im_end|>)."""
    result = run_cli("chat", "--model", str(gemma_model), "--temperature", "0", "--seed", "1",
                     "--max-tokens", "300", "--stats", "What is the capital of France?")
    assert result.returncode == 0, result.stderr
    assert "Paris" in result.stdout
    assert not any(m in result.stdout for m in ("USER:", "<|im_end|>", "<end_of_turn>"))
    notice, stats = [line for line in result.stderr.splitlines() if line]
    assert notice.startswith("inglenook: No chat template in the file: using Plain text")
    assert int(stats.split()[0].lstrip("[")) < 300
