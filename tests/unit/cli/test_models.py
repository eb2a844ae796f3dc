"""`inglenook models` through the CLI's main(): the Library page's removal rules, and a Hub that
trickles its answer."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from inglenook import paths
from inglenook.cli import main
from inglenook.models import hub
from tests import fakehub
from tests.fakehub import FakeFile, FakeHub

fake_hub = fakehub.fake_hub  # the fixture, under its own name


def split_model(folder: Path, count: int = 3) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    parts = [folder / f"big-Q4_K_M-{i:05d}-of-{count:05d}.gguf" for i in range(1, count + 1)]
    for part in parts:
        part.write_bytes(b"GGUF" + b"\0" * 1000)
    return parts


def test_rm_deletes_every_part_of_a_split_model(capsys: pytest.CaptureFixture[str]) -> None:
    parts = split_model(paths.models_dir())
    keep = paths.models_dir() / "keep.gguf"
    keep.write_bytes(b"GGUF")
    assert main(["models", "rm", "big-Q4_K_M-00001-of-00003", "--yes"]) == 0
    assert list(paths.models_dir().iterdir()) == [keep]
    assert capsys.readouterr().out.splitlines() == [f"Deleted {p}" for p in parts]


def test_rm_by_a_later_part_name_asks_once_for_the_whole_model(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    parts = split_model(paths.models_dir())
    asked: list[str] = []
    monkeypatch.setattr("builtins.input", lambda q: asked.append(q) or "n")
    assert main(["models", "rm", parts[1].name]) == 1
    assert all(p.exists() for p in parts)
    assert asked == [f"Delete {parts[0]} and its 2 other parts (3 KB)? [y/N] "]
    monkeypatch.setattr("builtins.input", lambda q: "y")
    assert main(["models", "rm", "big-Q4_K_M.gguf"]) == 0
    assert list(paths.models_dir().iterdir()) == []


def test_rm_of_a_linked_split_model_removes_only_the_links(tmp_path: Path) -> None:
    targets = split_model(tmp_path / "elsewhere")
    for target in targets:
        (paths.models_dir() / target.name).symlink_to(target)
    assert main(["models", "rm", targets[0].stem, "-y"]) == 0
    assert list(paths.models_dir().iterdir()) == [] and all(t.is_file() for t in targets)


def test_rm_refuses_the_bundled_model_with_the_library_page_sentence(
        bundled_model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["models", "rm", bundled_model.stem, "--yes"]) == 1
    err = capsys.readouterr().err
    assert err == (f"inglenook: {bundled_model.stem} is the bundled model that ships with "
                   "Inglenook; it cannot be deleted.\n")
    assert bundled_model.exists()


def test_rm_refuses_a_model_outside_the_models_folder(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    outside = split_model(tmp_path / "outside")
    (paths.models_dir() / "linked").symlink_to(outside[0].parent)
    assert main(["models", "rm", "big-Q4_K_M", "--yes"]) == 1
    assert "is not in the models folder" in capsys.readouterr().err
    assert all(os.path.exists(p) for p in outside)


def test_list_says_which_models_wont_load_as_the_library_does(
        bundled_model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from inglenook.models import compat
    from inglenook.models.gguf import read_header
    from tests.gguf_tools import rewrite_metadata

    zeta = rewrite_metadata(bundled_model, paths.models_dir() / "Zeta9-Chat.gguf",
                            {"general.architecture": "zeta9"})
    verdict = compat.check(read_header(zeta))
    if verdict.status == "unchecked":
        pytest.skip("the bundled engine's names cannot be read here")
    assert main(["models", "list"]) == 0
    out = capsys.readouterr().out
    block = out[out.index("Zeta9-Chat"):]
    assert block.splitlines()[1].strip().startswith(f"zeta9 · {compat.WONT_LOAD} · ")
    assert block.splitlines()[2].strip() == verdict.sentence  # the Library's words
    bundled = out[out.index(bundled_model.stem):]
    assert compat.WONT_LOAD not in bundled.split("\n\n")[0].splitlines()[1]


def test_files_ends_with_a_message_when_the_hub_trickles_its_answer(
        fake_hub: FakeHub, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    fake_hub.add_repo("alice/Tiny-GGUF", [FakeFile("tiny.Q4_0.gguf", 100)])
    fake_hub.trickle_headers = {"hub"}
    monkeypatch.setattr(hub, "MAX_JSON_SECONDS", 1.0)
    assert main(["models", "files", "alice/Tiny-GGUF"]) == 1
    host = fake_hub.url.removeprefix("http://")
    assert capsys.readouterr().err == (f"inglenook: {host} did not finish answering within 1 s; "
                                       "try again later.\n")
