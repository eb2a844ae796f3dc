"""Open file on a reply's source (issue 39, finding 12): an imported chat's source can name any
path; only a document of the collection, inside its folders, that cannot run is opened."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from inglenook.knowledge.fts import SqliteFtsIndex
from inglenook.knowledge.indexer import Indexer
from inglenook.knowledge.opening import Opening, opening


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "notes.md").write_text("# Notes\n\nThe wren sings.\n")
    (folder / "setup.sh").write_text("echo hello\n")
    (folder / "README").write_text("Plain text without a suffix.\n")
    return folder


@pytest.fixture
def index(docs: Path) -> SqliteFtsIndex:
    index = SqliteFtsIndex()
    index.create_collection("Docs", [str(docs)])
    Indexer(index, "Docs").run()
    return index


def test_a_document_of_the_collection_is_opened(index: SqliteFtsIndex, docs: Path) -> None:
    assert opening(index, "Docs", str(docs / "notes.md")) == Opening(
        os.path.realpath(docs / "notes.md"))
    assert opening(index, "Docs", str(docs / "README")).path.endswith("README")


def test_any_other_path_is_refused(index: SqliteFtsIndex, docs: Path, tmp_path: Path) -> None:
    outside = tmp_path / "secret.txt"
    outside.write_text("not in the collection")
    for collection, path in (("Docs", "/etc/passwd"), ("Docs", str(outside)),
                             ("Docs", str(docs / ".." / "secret.txt")),
                             ("Nope", str(docs / "notes.md"))):
        decided = opening(index, collection, path)
        assert decided.path == "" and "not opened" in decided.why


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX links")
def test_a_document_swapped_for_a_link_out_is_refused(index: SqliteFtsIndex, docs: Path,
                                                      tmp_path: Path) -> None:
    (docs / "notes.md").unlink()
    (docs / "notes.md").symlink_to("/etc/passwd")
    decided = opening(index, "Docs", str(docs / "notes.md"))
    assert decided.path == "" and "outside the folders" in decided.why


def test_what_could_run_is_never_opened_its_folder_is_shown(index: SqliteFtsIndex,
                                                            docs: Path) -> None:
    decided = opening(index, "Docs", str(docs / "setup.sh"))
    assert decided == Opening(os.path.realpath(docs), "This file could run as a program if "
                                                      "opened: its folder is shown instead.")
    if sys.platform != "win32":
        (docs / "notes.md").chmod(0o755)
        assert opening(index, "Docs", str(docs / "notes.md")).path == os.path.realpath(docs)
