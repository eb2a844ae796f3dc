"""`inglenook chat --image FILE`: the image reaches the model through its projector, and a file
that is not an image is refused in one line before any model loads. (A model without a
projector saying so is test_vision_engine's.)"""

from __future__ import annotations

from pathlib import Path

from PIL import Image

from tests.integration.test_cli import run_cli
from tests.mmproj_tools import model_n_embd, write_mmproj


def test_an_image_is_shown_to_a_model_loaded_with_its_projector(
        tmp_path: Path, bundled_model: Path) -> None:
    Image.new("RGB", (50, 40), (200, 10, 10)).save(tmp_path / "red.png")
    mmproj = write_mmproj(tmp_path / "mmproj-tiny.gguf", model_n_embd(bundled_model))
    result = run_cli("chat", "--mmproj", str(mmproj), "--image", str(tmp_path / "red.png"),
                     "--temperature", "0", "--max-tokens", "3", "What is this?")
    assert result.returncode == 0, result.stderr


def test_a_file_that_is_not_an_image_is_refused_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "notes.png").write_text("not a picture")
    result = run_cli("chat", "--image", str(tmp_path / "notes.png"), "Hi")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert lines == ["inglenook: --image: notes.png is not an image in a format read here "
                     "(PNG, JPEG, GIF, WEBP, BMP)."]
