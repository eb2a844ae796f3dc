"""`inglenook serve`: a model a request names is loaded with the served model's options but its
own vision projector, found beside it as --model finds one; a text model gets none."""

from __future__ import annotations

from pathlib import Path

import pytest

from inglenook.cli import _parser
from inglenook.cli.options import read_load_params
from inglenook.cli.serve import api_params
from inglenook.core.load import LoadParams
from tests.mmproj_tools import model_n_embd, write_mmproj


def library(bundled_model: Path, tmp_path: Path) -> tuple[Path, Path, Path]:
    """A text model and a vision copy of the bundled model, each in its own folder (links:
    only their headers are read)."""
    (tmp_path / "text").mkdir()
    (tmp_path / "vision").mkdir()
    text = tmp_path / "text" / "notes-model.gguf"
    vision = tmp_path / "vision" / "seeing-model.gguf"
    text.symlink_to(bundled_model)
    vision.symlink_to(bundled_model)
    projector = write_mmproj(tmp_path / "vision" / "seeing-model-mmproj-f16.gguf",
                             model_n_embd(bundled_model))
    return text, vision, projector


@pytest.fixture(name="library")
def library_fixture(bundled_model: Path, tmp_path: Path) -> tuple[Path, Path, Path]:
    return library(bundled_model, tmp_path)


def parsed(model: Path, *flags: str) -> LoadParams:
    """What `inglenook serve --model MODEL --ctx 1024 FLAGS` loads first."""
    args = _parser().parse_args(["serve", "--model", str(model), "--ctx", "1024", *flags])
    return read_load_params(args, str(model))


def test_each_model_named_gets_its_own_projector(library: tuple[Path, Path, Path]) -> None:
    text, vision, projector = library
    served = parsed(vision)
    assert served.mmproj_path == str(projector)
    params = api_params(served)
    assert params(str(vision)) == served
    other = params(str(text))
    assert other.mmproj_path == "" and other.n_ctx == 1024  # the options, not the projector
    served = parsed(text)
    assert served.mmproj_path == ""
    assert api_params(served)(str(vision)).mmproj_path == str(projector)


def test_a_projector_given_with_mmproj_is_the_served_models_alone(
        library: tuple[Path, Path, Path]) -> None:
    text, vision, projector = library
    served = parsed(text, "--mmproj", str(projector))
    assert served.mmproj_path == str(projector)
    named = api_params(served)(str(vision))
    assert named.mmproj_path == str(projector)  # found beside it, not carried over
    assert api_params(parsed(vision))(str(text)).mmproj_path == ""


def test_allow_pull_needs_ollamas_api(capsys: pytest.CaptureFixture[str]) -> None:
    from inglenook.cli.serve import run

    args = _parser().parse_args(["serve", "--allow-pull"])
    assert run(args) == 2  # refused before any model is loaded
    assert "--allow-pull is for Ollama's /api/pull: add --ollama." in capsys.readouterr().err
    assert _parser().parse_args(["serve", "--ollama", "--allow-pull"]).allow_pull
