"""knowledge/collections.py: the rules the Knowledge dialog and the CLI share."""

from __future__ import annotations

from pathlib import Path

import pytest

from inglenook import paths
from inglenook.knowledge import collections as kc
from inglenook.knowledge.fts import SqliteFtsIndex


def test_paths_are_added_once_and_removed(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b.md").write_text("# B\n\nbee\n")
    index = SqliteFtsIndex()
    made = kc.add_paths(index, "Notes", [str(tmp_path / "a")])
    assert made.roots == (str(tmp_path / "a"),)
    kept = kc.add_paths(index, "notes", [str(tmp_path / "a"), str(tmp_path / "b.md")])
    assert kept.name == "Notes" and kept.roots == (str(tmp_path / "a"), str(tmp_path / "b.md"))
    with pytest.raises(kc.PathMissing, match="missing does not exist"):
        kc.add_paths(index, "Notes", [str(tmp_path / "missing")])
    assert kc.remove_paths(index, "Notes", [str(tmp_path / "a")]).roots == \
        (str(tmp_path / "b.md"),)
    index.close()
    report = kc.index_collection("Notes")
    assert report.added == 1
    index = SqliteFtsIndex()
    [summary] = kc.summaries(index)
    index.close()
    assert (summary.documents, summary.chunks, summary.problems) == (1, 1, ())
    assert summary.indexed_at is not None
    assert kc.collection_names() == ["Notes"]


def test_listing_names_makes_no_index_file() -> None:
    assert kc.collection_names() == []
    assert not paths.knowledge_database_file().exists()


def test_a_fresh_index_opened_on_two_threads_at_once_is_made_once() -> None:
    import threading

    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def open_it() -> None:
        start.wait()
        try:
            SqliteFtsIndex().close()
        except BaseException as exc:  # collected for the assert
            errors.append(exc)

    threads = [threading.Thread(target=open_it) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
