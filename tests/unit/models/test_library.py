"""The model library: the bundled model first, then the GGUF files in the models folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from inglenook import paths
from inglenook.core.units import describe_params, describe_size
from inglenook.models.library import (
    LibraryError,
    ModelEntry,
    Removal,
    find_installed,
    import_model,
    installed_models,
    plan_removal,
    remove,
)
from tests.gguf_tools import write_gguf

TINY = {"general.architecture": "llama", "llama.context_length": 128}


def tiny_model(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_gguf(path, TINY)


def local(entries: list[ModelEntry]) -> list[ModelEntry]:
    return [e for e in entries if e.source == "local"]


def test_the_bundled_model_comes_first(bundled_model: Path) -> None:
    entries = installed_models()
    assert entries[0] == ModelEntry(bundled_model.stem, str(bundled_model), "bundled",
                                    bundled_model.stat().st_size)
    assert entries[0].name == "SmolLM2-135M-Instruct.Q4_1"
    assert not local(entries)  # a fresh home has an empty models folder


def test_a_gguf_file_in_the_models_folder_is_listed_as_local(bundled_model: Path) -> None:
    path = tiny_model(paths.models_dir() / "tiny-model.gguf")
    entries = installed_models()
    assert entries[0].source == "bundled"
    assert local(entries) == [ModelEntry("tiny-model", str(path), "local", path.stat().st_size)]


def test_a_symlink_to_a_model_elsewhere_is_listed(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere" / "real.gguf"
    target.parent.mkdir()
    target.write_bytes(b"GGUF" + b"\0" * 60)
    link = paths.models_dir() / "linked.gguf"
    link.symlink_to(target)
    (entry,) = local(installed_models())
    assert (entry.name, entry.path, entry.size_bytes) == ("linked", str(link), 64)


def test_a_broken_symlink_is_not_listed() -> None:
    (paths.models_dir() / "gone.gguf").symlink_to(paths.models_dir() / "missing.gguf")
    assert not local(installed_models())


def test_one_level_of_sub_folders_is_listed_and_all_sorted_by_name() -> None:
    root = paths.models_dir()
    tiny_model(root / "b-model.gguf")
    tiny_model(root / "org" / "A-model.gguf")
    tiny_model(root / "org" / "c-model.gguf")
    tiny_model(root / "org" / "deeper" / "too-deep.gguf")
    names = [e.name for e in local(installed_models())]
    assert names == ["A-model", "b-model", "c-model"]  # case-insensitive, folders mixed in


def test_partial_downloads_and_other_files_are_not_listed() -> None:
    root = paths.models_dir()
    for name in ("model.gguf.part", "model.gguf.incomplete", "model.incomplete",
                 "notes.txt", "model.bin", "org/model.gguf.part"):
        tiny_model(root / name)
    (root / "folder.gguf").mkdir()  # a directory with a model's name
    (root / "org" / "nested.gguf").mkdir()
    tiny_model(root / "real.gguf")
    assert [e.name for e in local(installed_models())] == ["real"]


def test_an_explicit_models_dir_is_used_instead(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    tiny_model(elsewhere / "other.gguf")
    tiny_model(paths.models_dir() / "not-this-one.gguf")
    assert [e.name for e in local(installed_models(elsewhere))] == ["other"]


def test_without_a_bundled_model_only_local_files_are_listed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(paths, "bundled_model_path", lambda: None)
    tiny_model(paths.models_dir() / "only.gguf")
    assert [(e.name, e.source) for e in installed_models()] == [("only", "local")]


@pytest.mark.parametrize(("size", "text"), [
    (0, "0 B"),
    (4_000, "4 KB"),
    (512_000, "512 KB"),
    (1_000_000, "1 MB"),
    (98_362_432, "98 MB"),  # the bundled model
    (999_000_000, "999 MB"),
    (1_000_000_000, "1.0 GB"),
    (4_368_439_584, "4.4 GB"),
    (70_553_706_496, "70.6 GB"),
])
def test_describe_size(size: int, text: str) -> None:
    assert describe_size(size) == text


def test_describe_size_of_the_bundled_model(bundled_model: Path) -> None:
    assert describe_size(installed_models()[0].size_bytes) == "98 MB"


@pytest.mark.parametrize(("size", "text"), [(0, "0 B"), (999, "999 B"), (999_499, "999 KB"),
                                            (999_999, "1 MB"), (999_999_999, "1.0 GB")])
def test_describe_size_at_unit_boundaries(size: int, text: str) -> None:
    assert describe_size(size) == text


def test_upper_case_suffix_is_listed_and_the_bundled_model_only_once(
        bundled_model: Path) -> None:
    (paths.models_dir() / "SHOUTY.GGUF").write_bytes(b"GGUF")
    (paths.models_dir() / "again.gguf").symlink_to(bundled_model)
    names = [e.name for e in installed_models()]
    assert "SHOUTY" in names
    assert names.count(bundled_model.stem) == 1 and "again" not in names


def test_a_split_model_is_listed_once_by_its_first_part() -> None:
    for part in (1, 2, 3):
        (paths.models_dir() / f"big-Q4_K_M-0000{part}-of-00003.gguf").write_bytes(b"GGUF")
    names = [e.name for e in installed_models() if e.source == "local"]
    assert names == ["big-Q4_K_M-00001-of-00003"]


# -- removing and importing (shared by the Library page and `inglenook models rm`) -----------------
def split_model(folder: Path, base: str = "big-Q4_K_M", count: int = 3) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    parts = [folder / f"{base}-{i:05d}-of-{count:05d}.gguf" for i in range(1, count + 1)]
    for n, part in enumerate(parts, start=1):
        part.write_bytes(b"GGUF" + b"\0" * (100 * n - 4))
    return parts


def test_a_split_model_is_one_entry_whose_size_counts_every_part() -> None:
    split_model(paths.models_dir())
    (entry,) = local(installed_models())
    assert entry.size_bytes == 100 + 200 + 300


def test_removing_a_split_model_plans_and_deletes_every_part() -> None:
    parts = split_model(paths.models_dir())
    (paths.models_dir() / "other.gguf").write_bytes(b"GGUF")
    (entry,) = [e for e in local(installed_models()) if e.name != "other"]
    removal = plan_removal(entry, paths.models_dir())
    assert removal == Removal(tuple(parts)) and removal.size_bytes == 600
    remove(removal)
    assert [p.name for p in paths.models_dir().iterdir()] == ["other.gguf"]


def test_removing_a_linked_split_model_removes_only_the_links(tmp_path: Path) -> None:
    targets = split_model(tmp_path / "elsewhere")
    for target in targets:
        (paths.models_dir() / target.name).symlink_to(target)
    (entry,) = local(installed_models())
    removal = plan_removal(entry, paths.models_dir())
    assert removal.link_only and len(removal.files) == 3 and removal.size_bytes == 0
    remove(removal)
    assert list(paths.models_dir().iterdir()) == [] and all(t.is_file() for t in targets)


def test_the_bundled_model_and_files_outside_the_folder_are_refused(
        bundled_model: Path, tmp_path: Path) -> None:
    bundled = installed_models()[0]
    refusal = plan_removal(bundled, paths.models_dir()).refusal
    assert refusal == (f"{bundled.name} is the bundled model that ships with Inglenook; it "
                       "cannot be deleted.")
    outside = tmp_path / "outside"
    tiny_model(outside / "mine.gguf")
    (paths.models_dir() / "linked").symlink_to(outside)  # a folder linked into the library
    (entry,) = local(installed_models())
    removal = plan_removal(entry, paths.models_dir())
    assert removal.files == () and "is not in the models folder" in removal.refusal
    with pytest.raises(LibraryError, match="not in the models folder"):
        remove(removal)
    assert (outside / "mine.gguf").is_file()


def test_find_installed_knows_a_split_model_by_any_of_its_names() -> None:
    parts = split_model(paths.models_dir())
    entries = installed_models()
    for name in ("big-Q4_K_M-00001-of-00003", parts[2].name, "big-Q4_K_M.gguf", "big-Q4_K_M"):
        assert [e.path for e in find_installed(name, entries)] == [str(parts[0])]
    assert find_installed("big", entries) == []


def test_importing_a_split_model_copies_every_part(tmp_path: Path) -> None:
    source = tmp_path / "src"
    source.mkdir()
    parts = [tiny_model(source / f"m-0000{i}-of-00002.gguf") for i in (1, 2)]
    installed, message = import_model(parts[0], "copy", paths.models_dir())
    assert installed == paths.models_dir() / parts[0].name and "copied" in message
    assert sorted(p.name for p in paths.models_dir().iterdir()) == [p.name for p in parts]
    with pytest.raises(LibraryError, match="already in the library"):
        import_model(parts[0], "link", paths.models_dir())
    parts[1].unlink()
    with pytest.raises(LibraryError, match=r"missing next to it: m-00002-of-00002\.gguf"):
        import_model(parts[0], "copy", tmp_path)


@pytest.mark.parametrize(("count", "text"), [(0, "?"), (135_000_000, "135M"),
                                             (1_540_000_000, "1.5B"), (52_000, "52K")])
def test_describe_params(count: int, text: str) -> None:
    assert describe_params(count) == text


def test_an_embedding_model_is_marked_by_its_header_not_its_name_alone() -> None:
    folder = paths.models_dir()
    embedder = write_gguf(folder / "nomic-embed-text-v1.5.Q8_0.gguf",
                          {**TINY, "llama.pooling_type": 1})
    named_only = tiny_model(folder / "bge-small-en-v1.5-q8_0.gguf")  # a chat model's header
    chat = write_gguf(folder / "chat-model.gguf", {**TINY, "llama.pooling_type": 1})
    kinds = {e.path: e.embedding for e in local(installed_models())}
    # A pooling in a file not named as embedding models are goes unread (listing stays cheap).
    assert kinds == {str(embedder): True, str(named_only): False, str(chat): False}
