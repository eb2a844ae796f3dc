"""The approximate indexes of a collection's vectors (knowledge/ann.py, usearch) on real SQLite:
in step with chunk_vectors after every kind of change (documents added, replaced, removed; a
model changed; a collection deleted; another process or thread writing), rebuilt when their
file is missing, damaged or lies, and ranking exactly as the scan of every vector does (the
collections here are small enough for HNSW to visit every window, so any difference is a bug,
not an approximation)."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from inglenook import paths
from inglenook.knowledge import ann, vectors
from inglenook.knowledge.fts import SqliteFtsIndex
from inglenook.knowledge.indexer import Indexer
from tests.unit.knowledge.test_vectors import WordEmbedder

ROOT = Path(__file__).resolve().parents[3]
WORDS = ("apple", "harbour", "kettle", "violin", "lantern", "meadow", "copper", "glacier",
         "orchard", "falcon", "cinder", "velvet", "marble", "thistle", "pepper", "bramble",
         "ember", "quartz", "willow", "saddle")
QUESTIONS = ("kettle lantern", "falcon over the meadow", "quartz", "willow and bramble",
             "feline", "copper violin ember")
MODEL = "/models/words.gguf"


class NarrowEmbedder(WordEmbedder):
    """Another model: 32 dimensions (WordEmbedder's 64 folded in two)."""

    def __init__(self) -> None:
        super().__init__("/models/narrow.gguf")

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        rows = super().__call__(texts)
        folded = rows[:, :32] + rows[:, 32:]
        return folded / np.maximum(np.linalg.norm(folded, axis=1, keepdims=True), 1e-9)


def write(folder: Path, name: str, seed: int, sentences: int = 4) -> None:
    rng = random.Random(seed)
    text = "\n\n".join(" ".join(rng.choice(WORDS) for _ in range(7)) + "."
                       for _ in range(sentences))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(f"# Note {seed}\n\n{text}\n")


def collection(tmp_path: Path, name: str = "Docs", files: int = 6, model: str = MODEL,
               embedder: WordEmbedder | None = None) -> tuple[SqliteFtsIndex, Path]:
    embedder = embedder or WordEmbedder(model)
    index = SqliteFtsIndex(tmp_path / "k.db", embedder)
    docs = tmp_path / name
    for n in range(files):
        write(docs, f"n{n}.md", seed=n + 100 * len(name))
    index.create_collection(name, [str(docs)], embed_model=model)
    Indexer(index, name, embedder=embedder).run()
    return index, docs


def indexes(index: SqliteFtsIndex) -> ann.VectorIndexes:
    found = index._sqlite_vectors._indexes
    assert found is not None
    return found


def vector_rows(index: SqliteFtsIndex, name: str) -> list[int]:
    return sorted(r[0] for r in index._conn.execute(
        "SELECT v.chunk_id FROM chunk_vectors v JOIN chunks c ON c.id = v.chunk_id "
        "JOIN documents d ON d.id = c.document_id WHERE d.collection_id = ?",
        (index._id(name),)))


def assert_in_step(index: SqliteFtsIndex, *names: str) -> None:
    """Its index holds exactly the collection's windows (a key per window), and ranks as the
    exact scan does, answering by itself (no collection left to the scan)."""
    ids = [index._id(name) for name in names]
    assert indexes(index).ready(index._conn, ids) == []
    for name, cid in zip(names, ids, strict=True):
        entry = indexes(index).entries[cid]
        held = [] if entry.index is None else sorted(int(k) for k in entry.index.keys)
        assert held == vector_rows(index, name)
    embedder = index.embedder
    assert embedder is not None
    for question in QUESTIONS:
        query = embedder([question])[0]
        _, exact = indexes(index).nearest(index._conn, ids, query, 10)
        assert exact == []
        ranked = index._sqlite_vectors.ranking(ids, query, 10)
        scanned = vectors.ranking(index._conn, ids, query, 10)
        assert [d for _, d in ranked] == [d for _, d in scanned]
        last = scanned[-1][1] if scanned else 0.0  # tied at the last distance: any of them
        assert [p for p in ranked if p[1] < last] == [p for p in scanned if p[1] < last]


def test_the_index_follows_documents_added_replaced_and_removed(tmp_path: Path) -> None:
    index, docs = collection(tmp_path)
    assert_in_step(index, "Docs")
    assert (paths.knowledge_vector_index_dir(tmp_path / "k.db") / "c1.usearch").exists()
    # The last document replaced: SQLite gives its new passages the ids the old ones had, so
    # only the log (not ids or counts) tells the index that these vectors changed.
    last = max(vector_rows(index, "Docs"))
    (path,) = index._conn.execute("SELECT d.path FROM documents d JOIN chunks c ON "
                                  "c.document_id = d.id WHERE c.id = ?", (last,)).fetchone()
    Path(path).write_text("# Note\n\nThe kitten sleeps by the kettle.\n")
    report = Indexer(index, "Docs", embedder=index.embedder).run()
    assert report.updated == 1 and max(vector_rows(index, "Docs")) == last
    assert_in_step(index, "Docs")
    assert index.search(["Docs"], "feline", 1)[0].path == path  # by meaning
    write(docs, "n6.md", seed=6)
    (docs / next(n for n in ("n0.md", "n1.md") if str(docs / n) != path)).unlink()
    report = Indexer(index, "Docs", embedder=index.embedder).run()
    assert (report.added, report.removed) == (1, 1)
    assert_in_step(index, "Docs")
    index.remove_document("Docs", str(docs / "n2.md"))  # no run: the next search sees it
    assert_in_step(index, "Docs")
    index.close()


def test_a_small_run_leaves_its_changes_in_the_log_and_a_large_one_saves(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    index, docs = collection(tmp_path)
    folder = paths.knowledge_vector_index_dir(tmp_path / "k.db")
    saved = (folder / "c1.json").read_text()
    logged = "SELECT count(*) FROM vector_log"
    assert index._conn.execute(logged).fetchone()[0] == 0  # built, saved, the log trimmed
    (docs / "n2.md").unlink()
    write(docs, "n9.md", seed=9)
    Indexer(index, "Docs", embedder=index.embedder).run()
    index.close()  # a few vectors: the file stays as it was, the log keeps them
    assert (folder / "c1.json").read_text() == saved
    ann.close_all()  # a new start: the old file and the log
    reopened = SqliteFtsIndex(tmp_path / "k.db", WordEmbedder())
    assert reopened._conn.execute(logged).fetchone()[0] > 0
    assert_in_step(reopened, "Docs")
    monkeypatch.setattr(ann, "SAVE_AT_CLOSE", 1)  # as many as a large run changes
    write(docs, "n10.md", seed=10)
    Indexer(reopened, "Docs", embedder=reopened.embedder).run()
    reopened.close()
    assert (folder / "c1.json").read_text() != saved
    again = SqliteFtsIndex(tmp_path / "k.db", WordEmbedder())
    assert again._conn.execute(logged).fetchone()[0] == 0
    assert_in_step(again, "Docs")
    again.close()


def test_a_new_model_starts_the_index_afresh(tmp_path: Path) -> None:
    index, _docs = collection(tmp_path)
    assert indexes(index).entries[1].dimensions == 64
    index.set_embed_model("Docs", "/models/narrow.gguf")
    assert vector_rows(index, "Docs") == []
    narrow = NarrowEmbedder()
    index.embedder = narrow
    assert index.search(["Docs"], "feline", 3) == []  # no vector, no word: nothing
    assert_in_step(index, "Docs")
    Indexer(index, "Docs", embedder=narrow).run()
    assert indexes(index).entries[1].dimensions == 32
    assert_in_step(index, "Docs")
    index.close()


def test_a_deleted_collection_takes_its_index_and_its_id_never_gets_it(tmp_path: Path) -> None:
    index, _docs = collection(tmp_path, "Old")
    folder = paths.knowledge_vector_index_dir(tmp_path / "k.db")
    kept = tmp_path / "kept"
    shutil.copytree(folder, kept)
    index.remove_collection("Old")
    assert not (folder / "c1.usearch").exists() and not (folder / "c1.json").exists()
    new = tmp_path / "New"
    write(new, "a.md", seed=42)
    index.create_collection("New", [str(new)], embed_model=MODEL)
    assert index._id("New") == 1  # SQLite reused the id
    for name in ("c1.usearch", "c1.json"):  # the old files back, as a crash could leave them
        shutil.copy(kept / name, folder / name)
    ann.close_all()  # another process, or a new start
    Indexer(index, "New", embedder=index.embedder).run()
    assert_in_step(index, "New")
    index.close()


@pytest.mark.parametrize("damage", ["deleted", "garbage", "cut short", "stale"])
def test_a_missing_damaged_or_stale_file_is_rebuilt(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage: str) -> None:
    monkeypatch.setattr(ann, "SAVE_AT_CLOSE", 1)  # every run saves
    index, docs = collection(tmp_path)
    folder = paths.knowledge_vector_index_dir(tmp_path / "k.db")
    data, manifest = folder / "c1.usearch", folder / "c1.json"
    old = data.read_bytes(), manifest.read_text()
    write(docs, "n7.md", seed=7)
    Indexer(index, "Docs", embedder=index.embedder).run()
    index.close()
    ann.close_all()  # a new start reads the files
    if damage == "deleted":
        data.unlink()
    elif damage == "garbage":
        data.write_bytes(os.urandom(data.stat().st_size))
    elif damage == "cut short":
        data.write_bytes(data.read_bytes()[: data.stat().st_size // 2])
    else:  # the old index whose manifest claims it is the newest: its count gives it away
        data.write_bytes(old[0])
        info = json.loads(old[1])
        info["seq"] = json.loads(manifest.read_text())["seq"]
        manifest.write_text(json.dumps(info))
    index = SqliteFtsIndex(tmp_path / "k.db", WordEmbedder())
    assert_in_step(index, "Docs")
    info = json.loads(manifest.read_text())
    assert info["count"] == len(vector_rows(index, "Docs"))  # and saved again, whole
    assert info["bytes"] == data.stat().st_size
    index.close()


def test_two_collections_are_searched_together_and_each_alone(tmp_path: Path) -> None:
    index, _docs = collection(tmp_path, "One")
    other = tmp_path / "Two"
    for n in range(4):
        write(other, f"t{n}.md", seed=50 + n)
    index.create_collection("Two", [str(other)], embed_model=MODEL)
    Indexer(index, "Two", embedder=index.embedder).run()
    assert_in_step(index, "One", "Two")
    assert_in_step(index, "Two")
    query = WordEmbedder()(["kettle"])[0]
    two = set(vector_rows(index, "Two"))
    assert {cid for cid, _ in index._sqlite_vectors.ranking([index._id("Two")], query, 50)} \
        == two
    index.close()


CHILD = """
import sys
from pathlib import Path

from inglenook.knowledge.fts import SqliteFtsIndex
from inglenook.knowledge.indexer import Indexer
from tests.unit.knowledge.test_vectors import WordEmbedder

index = SqliteFtsIndex(Path(sys.argv[1]))
if sys.argv[2] == "index":
    Indexer(index, "Docs", embedder=WordEmbedder()).run()
else:
    index.remove_document("Docs", sys.argv[2])
index.close()
"""


def in_another_process(db: Path, what: str) -> None:
    done = subprocess.run([sys.executable, "-c", CHILD, str(db), what], cwd=ROOT,
                          env=dict(os.environ), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


def test_what_another_process_writes_is_seen(tmp_path: Path) -> None:
    index, docs = collection(tmp_path)
    assert_in_step(index, "Docs")  # this process holds the index in memory
    write(docs, "n8.md", seed=8)
    (docs / "n8.md").write_text("# Pets\n\nA kitten naps in the orchard.\n")
    in_another_process(tmp_path / "k.db", "index")  # it saves and trims the log
    assert_in_step(index, "Docs")
    assert index.search(["Docs"], "feline", 1)[0].path.endswith("n8.md")
    in_another_process(tmp_path / "k.db", str(docs / "n8.md"))  # no save: the log says it
    assert index._conn.execute("SELECT count(*) FROM vector_log").fetchone()[0] > 0
    assert_in_step(index, "Docs")
    index.close()


def test_a_large_collection_is_searched_exactly_while_its_index_is_built(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    index, _docs = collection(tmp_path, files=8)
    index.close()
    ann.close_all()
    shutil.rmtree(paths.knowledge_vector_index_dir(tmp_path / "k.db"))
    monkeypatch.setattr(ann, "SYNC_BUILD", 0)  # every collection is "large"
    index = SqliteFtsIndex(tmp_path / "k.db", WordEmbedder())
    query = WordEmbedder()(["kettle lantern"])[0]
    ids = [index._id("Docs")]
    # The search does not wait for the build: whichever way it went, the same answer.
    assert index._sqlite_vectors.ranking(ids, query, 10) == \
        vectors.ranking(index._conn, ids, query, 10)
    assert indexes(index).ready(index._conn, ids, wait=True) == []  # an indexing run waits
    assert_in_step(index, "Docs")
    index.close()


def test_a_search_on_one_thread_while_another_indexes(tmp_path: Path) -> None:
    index, docs = collection(tmp_path)
    for n in range(10, 40):
        write(docs, f"n{n}.md", seed=n)
    failed: list[BaseException] = []

    def run() -> None:
        worker = SqliteFtsIndex(tmp_path / "k.db")
        try:
            Indexer(worker, "Docs", embedder=WordEmbedder()).run()
        except BaseException as exc:  # reported by the test's thread
            failed.append(exc)
        finally:
            worker.close()

    thread = threading.Thread(target=run)
    thread.start()
    searches = 0
    while thread.is_alive() or searches == 0:
        index.search(["Docs"], "kettle lantern", 5)
        searches += 1
    thread.join()
    assert not failed
    assert len(vector_rows(index, "Docs")) == 36
    assert_in_step(index, "Docs")
    index.close()


def test_vectors_from_before_the_log_are_indexed_from_chunk_vectors(tmp_path: Path) -> None:
    from inglenook.knowledge import schema
    from inglenook.store.schema import statements

    path = tmp_path / "k.db"
    conn = vectors.driver()[0].connect(path)
    for step in (schema.V1_SQL, schema.V2_SQL, schema.V3_SQL, schema.V4_SQL, schema.V5_SQL):
        for statement in statements(step):
            conn.execute(statement)
    conn.execute("INSERT INTO collections (id, name, roots, created_at, embed_model) "
                 "VALUES (1, 'Docs', '[]', 0, ?)", (MODEL,))
    conn.execute("INSERT INTO documents VALUES (1, 1, '/old/a.md', 1, 1, 'x', 'markdown')")
    embedder = WordEmbedder()
    for n, text in enumerate(("The kitten naps.", "The harbour floods.", "Quartz and ember.")):
        conn.execute("INSERT INTO chunks (id, document_id, position, text, line_start, "
                     "line_end) VALUES (?, 1, ?, ?, 1, 1)", (n + 1, n, text))
        conn.execute("INSERT INTO chunk_vectors VALUES (?, 0, ?)",
                     (n + 1, vectors.blob(embedder([text])[0])))
    conn.execute("PRAGMA user_version = 5")
    conn.commit()
    conn.close()
    index = SqliteFtsIndex(path, embedder)
    assert index._conn.execute("SELECT count(*) FROM vector_log").fetchone()[0] == 0
    assert_in_step(index, "Docs")
    assert index.search(["Docs"], "feline", 1)[0].chunk_id == 1
    index.close()


class HeldBuild:
    """ann.build for one collection, held after it read its snapshot (as a build of a large
    collection takes minutes on its one core) until `release` is set."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, collection_id: int) -> None:
        self.read, self.release = threading.Event(), threading.Event()
        real = ann.build

        def held(conn: object, owner: ann.Owner, stop: threading.Event,
                 threads: int = 0) -> ann.Entry | None:
            entry = real(conn, owner, stop, threads)
            if owner.collection_id == collection_id:
                self.read.set()
                self.release.wait()
            return entry

        monkeypatch.setattr(ann, "build", held)


def without_files(tmp_path: Path, files: int = 6) -> SqliteFtsIndex:
    """A collection whose index has no file (a database from before v8, a file deleted), as
    a new start finds it."""
    index, _docs = collection(tmp_path, files=files)
    index.close()
    ann.close_all()
    shutil.rmtree(paths.knowledge_vector_index_dir(tmp_path / "k.db"))
    return SqliteFtsIndex(tmp_path / "k.db", WordEmbedder())


def test_a_build_under_way_keeps_the_log_it_needs_while_another_collection_saves(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    index = without_files(tmp_path)
    docs = index._id("Docs")
    monkeypatch.setattr(ann, "SYNC_BUILD", 0)  # built in the background
    monkeypatch.setattr(ann, "SAVE_EVERY", 1)  # an indexing run saves after every batch
    held = HeldBuild(monkeypatch, docs)
    try:
        assert indexes(index).ready(index._conn, [docs]) == [docs]  # searched exactly
        assert held.read.wait(30)
        built = indexes(index)._building[docs]
        other = tmp_path / "Other"  # meanwhile another collection is indexed and saved
        for n in range(4):
            write(other, f"o{n}.md", seed=70 + n)
        index.create_collection("Other", [str(other)], embed_model=MODEL)
        Indexer(index, "Other", embedder=index.embedder).run()
        assert (paths.knowledge_vector_index_dir(tmp_path / "k.db") / "c2.json").exists()
    finally:
        held.release.set()
    assert built.wait(30)
    # The build is used, not thrown away for a log trimmed past its snapshot (the collection
    # would be searched exactly until another build, as long, found the log it needs).
    assert indexes(index).ready(index._conn, [docs]) == []
    assert_in_step(index, "Docs", "Other")
    index.close()


def test_while_another_process_saves_a_search_is_exact_and_no_thread_waits_on_another(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from filelock import FileLock

    from inglenook.knowledge import ann_files

    index, _docs = collection(tmp_path)
    index.close()
    ann.close_all()  # a new start reads the file
    folder = paths.knowledge_vector_index_dir(tmp_path / "k.db")
    saved = (folder / "c1.json").read_text()
    monkeypatch.setattr(ann, "READ_WAIT_S", 0.05)
    monkeypatch.setattr(ann_files, "LOCK_TIMEOUT_S", 30.0)  # a run waits for the files
    waiting = threading.Event()
    real = ann_files.Files.locked

    def locked(self: ann_files.Files, timeout: float | None = None) -> object:
        waiting.set()
        return real(self, timeout)

    monkeypatch.setattr(ann_files.Files, "locked", locked)
    index = SqliteFtsIndex(tmp_path / "k.db", WordEmbedder())
    docs = [index._id("Docs")]
    other = FileLock(str(folder / ".lock"))  # another process saving
    other.acquire()
    answers: list[list[int]] = []

    def indexing() -> None:
        worker = SqliteFtsIndex(tmp_path / "k.db")
        try:
            answers.append(indexes(worker).ready(worker._conn, docs, wait=True))
        finally:
            worker.close()

    run = threading.Thread(target=indexing)
    try:
        run.start()  # an indexing run waits for the files' lock...
        assert waiting.wait(30)
        # ...while a search on another thread is not held up by it: it compares every
        # vector this time, and does not build an index whose file is there.
        assert indexes(index).ready(index._conn, docs) == docs
        assert docs[0] not in indexes(index)._building
    finally:
        other.release()
    run.join(30)
    assert answers == [[]]  # the run read the file once it could
    assert (folder / "c1.json").read_text() == saved  # read, not built again
    assert_in_step(index, "Docs")
    index.close()


def test_close_does_not_wait_long_for_a_build(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    index = without_files(tmp_path)
    docs = index._id("Docs")
    monkeypatch.setattr(ann, "SYNC_BUILD", 0)
    monkeypatch.setattr(ann, "CLOSE_WAIT_S", 0.05)
    held = HeldBuild(monkeypatch, docs)  # as one waiting for the files' lock
    try:
        assert indexes(index).ready(index._conn, [docs]) == [docs]
        assert held.read.wait(30)
        built = indexes(index)._building[docs]
        closing = threading.Thread(target=ann.close_all)  # at exit
        closing.start()
        closing.join(30)
        assert not closing.is_alive()
    finally:
        held.release.set()
    assert built.wait(30)
    assert not (paths.knowledge_vector_index_dir(tmp_path / "k.db") / "c1.json").exists()
    index.close()
