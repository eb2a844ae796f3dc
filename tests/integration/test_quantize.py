"""A smaller copy of a model, made by llama.cpp's quantizer in an engine host of its own: placed
in the models folder only once it reads back, loads and answers; cancel and failures keep
nothing; the CLI as a user runs it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from inglenook import paths
from inglenook.engine import quantize
from inglenook.engine.quantize import (
    SUFFIX,
    Progress,
    QuantizeCancelled,
    QuantizeError,
    Quantizer,
    plan,
)
from inglenook.models import quantize_plan
from inglenook.models.gguf import read_header
from inglenook.models.library import installed_models
from tests.gguf_tools import rewrite_metadata


def leftovers() -> list[Path]:
    return list(paths.models_dir().glob(f"*{SUFFIX}"))


def test_a_checked_copy_is_placed_in_the_models_folder(bundled_model: Path) -> None:
    progress: list[Progress] = []
    job = Quantizer(plan(bundled_model, "Q8_0", allow_requantize=True))
    q8 = job.run(progress.append)
    assert q8 == paths.models_dir() / "SmolLM2-135M-Instruct-Q8_0.gguf"
    assert read_header(q8).quantization == "Q8_0" and job.seconds > 0
    # The estimate follows llama.cpp's choice of type per tensor: the size, to the header.
    assert 0.99 * job.plan.estimate_bytes <= q8.stat().st_size <= job.plan.estimate_bytes
    quantizing = [e for e in progress if e.stage == "quantizing"]
    assert quantizing[-1].tensors_total == len(read_header(bundled_model).tensors)
    fractions = [e.fraction for e in quantizing]
    assert fractions == sorted(fractions) and 0.9 < fractions[-1] < 1.0
    assert [e.stage for e in progress[-2:]] == ["checking", "done"]
    assert progress[-1].written_bytes == q8.stat().st_size
    assert any(e.path == str(q8) for e in installed_models())
    assert not leftovers()
    # Q8_0 is precise enough to quantize from without asking.
    q4_plan = plan(q8, "Q4_K_M")
    q4 = Quantizer(q4_plan).run()
    assert 0.99 * q4_plan.estimate_bytes <= q4.stat().st_size <= q4_plan.estimate_bytes
    assert q4.name == "SmolLM2-135M-Instruct-Q4_K_M.gguf"
    assert read_header(q4).quantization == "Q4_K_M"
    assert q4.stat().st_size < 0.8 * q8.stat().st_size


def test_an_already_quantized_source_needs_an_explicit_choice(bundled_model: Path) -> None:
    with pytest.raises(QuantizeError, match="loses quality twice"):
        plan(bundled_model, "Q8_0")
    with pytest.raises(QuantizeError, match="already Q4_1"):
        plan(bundled_model, "q4_1", allow_requantize=True)
    with pytest.raises(QuantizeError, match="Unknown type 'Q9'"):
        plan(bundled_model, "Q9")


def test_cancel_ends_the_quantizer_and_keeps_nothing(bundled_model: Path) -> None:
    job = Quantizer(plan(bundled_model, "F16", allow_requantize=True))

    def cancel_at_once(progress: Progress) -> None:
        if progress.stage == "quantizing":
            job.cancel()

    with pytest.raises(QuantizeCancelled):
        job.run(cancel_at_once)
    assert not job.plan.output.exists() and not leftovers()


def test_not_enough_disk_space_is_refused_before_starting(
        bundled_model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = quantize_plan.shutil.disk_usage

    def full(path: object) -> object:
        usage = real(path)  # type: ignore[arg-type]
        return type(usage)(usage.total, usage.total - 10**6, 10**6)

    monkeypatch.setattr(quantize_plan.shutil, "disk_usage", full)
    with pytest.raises(QuantizeError, match=r"Not enough disk space: the F16 copy needs about"):
        plan(bundled_model, "F16", allow_requantize=True)
    assert not list(paths.models_dir().iterdir())


def test_a_copy_that_does_not_load_is_not_kept(bundled_model: Path, tmp_path: Path) -> None:
    """The check loads the copy as the engine would: this one's chat template is refused."""
    hostile = rewrite_metadata(bundled_model, tmp_path / "Hostile.Q4_1.gguf", {
        "tokenizer.chat_template": "{{ cycler.__init__.__globals__.os.popen('id').read() }}"})
    job = Quantizer(plan(hostile, "Q8_0", allow_requantize=True))
    with pytest.raises(QuantizeError, match="blocked"):
        job.run()
    assert not job.plan.output.exists() and not leftovers()


def test_stale_partial_copies_of_dead_quantizers_are_removed() -> None:
    stale = paths.models_dir() / f"old-Q4_K_M.gguf.999999999{SUFFIX}"
    stale.write_bytes(b"partial")
    mine = paths.models_dir() / f"mine-Q4_K_M.gguf.{os.getpid()}{SUFFIX}"
    mine.write_bytes(b"partial")
    quantize.remove_stale(paths.models_dir())
    assert not stale.exists() and mine.exists()


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "inglenook", "models", "quantize", *args],
                          capture_output=True, text=True, timeout=300, check=False)


def test_the_cli_makes_a_copy_and_refuses_in_one_line(bundled_model: Path) -> None:
    refused = run_cli(str(bundled_model), "Q8_0")
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    assert refused.stderr.strip().splitlines()[-1].startswith("inglenook: ")
    assert "loses quality twice" in refused.stderr
    made = run_cli(bundled_model.stem, "q8_0", "--allow-requantize",  # by its library name
                   "--even-if-larger")  # from Q4_1: bigger
    assert made.returncode == 0, made.stderr
    output = Path(made.stdout.strip())
    assert output.parent == paths.models_dir() and read_header(output).quantization == "Q8_0"
    assert "checked" in made.stderr
    again = run_cli(bundled_model.stem, "Q8_0", "--allow-requantize", "--even-if-larger")
    assert again.returncode == 1 and "already exists" in again.stderr


def test_a_copy_that_would_not_be_smaller_is_said_and_not_started(bundled_model: Path) -> None:
    """The bundled Q4_1 model's rows (576) are no multiple of 256: Q4_K_M falls back to Q5_0
    and Q8_0 for most tensors, and comes out bigger (105 MB from 98 MB). Said before starting;
    made only when asked for anyway, and then as big as planned."""
    job = plan(bundled_model, "Q4_K_M", allow_requantize=True)
    assert not job.smaller and "would not be smaller" in job.not_smaller()
    refused = run_cli(str(bundled_model), "Q4_K_M", "--allow-requantize")
    assert refused.returncode == 1 and "would not be smaller" in refused.stderr
    assert not list(paths.models_dir().glob("*.gguf*"))  # nothing was started
    made = run_cli(str(bundled_model), "Q4_K_M", "--allow-requantize", "--even-if-larger")
    assert made.returncode == 0, made.stderr
    size = Path(made.stdout.strip()).stat().st_size
    assert bundled_model.stat().st_size < size <= job.estimate_bytes
    assert size >= 0.99 * job.estimate_bytes
