"""Search by meaning at scale (issue 21), for knowledge_bench.py (or alone: `--fused`):

  knowledge_query_fused_p95_ms  95th percentile of a search as a chat reply makes it (its 20
                              candidate passages: retrieval.CANDIDATES) over 100,000 passages of
                              5 windows each (500,000 vectors of 384 dimensions, MiniLM's size),
                              BM25 fused with the vectors' ranking through the collection's
                              approximate index (knowledge/ann.py: usearch HNSW, 8-bit; the
                              candidates rescored exactly). The question's embedding is not in it
  knowledge_query_fused_10k_p95_ms  the same at 10,000 passages (~1,000 files of 10 kB)
  knowledge_query_fused_first_ms  the first such search in a fresh process at 100,000: the saved
                              index read (crc32 checked) and its count checked against the database
  knowledge_vector_index_build_s  building that index from chunk_vectors (after an upgrade, or its
                              file deleted or damaged: searches scan exactly meanwhile)
  knowledge_vector_index_rss_mb  what that first search adds to a process's resident memory
  knowledge_vector_index_file_mb  the saved index's size on disk
  knowledge_query_fused_vs_exact  how many of the 20 passages the search returns are the ones
                              the exact scan of every vector gives (fused with BM25 the same way),
                              over 20 questions; knowledge_query_dense_vs_exact the same for the
                              vectors' own ranking (its 80 best: what is fused)

The vectors are synthetic but shaped like all-MiniLM-L6-v2's of real text (TextLikeEmbedder):
random unit vectors, the former stand-in, are the worst case for a graph index (no structure:
every point about as far as every other; HNSW found a tenth of their true neighbours) and tell
nothing of what a real collection gets.
"""

from __future__ import annotations

import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import psutil

from inglenook import paths
from inglenook.knowledge import ann, vectors
from inglenook.knowledge.fts import SqliteFtsIndex
from inglenook.knowledge.index import Chunk, Document, fuse
from inglenook.knowledge.retrieval import CANDIDATES
from inglenook.store.db import transaction

DIMENSIONS = 384
PER_DOC = 100  # passages per document


class TextLikeEmbedder:
    """Vectors with the shape of all-MiniLM-L6-v2's of real text, measured on 3,264 windows of
    the documentation installed here (README/Markdown/docstrings): a direction they all share
    (|mean| 0.32, mean cosine of two 0.10), the rest spread over rotated axes with variances
    falling as i^-0.85 (effective dimension ~60, as measured), a document's windows nearer one
    another (cosine ~0.45) and a passage's nearer still. A question is a new window of some
    document. The texts are ignored: `window(d)` and `query()` draw them."""

    model = "text-like-384"

    def __init__(self, documents: int, seed: int = 21) -> None:
        self.rng = np.random.default_rng(seed)
        spread = np.arange(1, DIMENSIONS + 1) ** -0.85
        self.scale = np.sqrt(spread / spread.sum())
        self.axes, _ = np.linalg.qr(self.rng.standard_normal((DIMENSIONS, DIMENSIONS)))
        common = self.rng.standard_normal(DIMENSIONS)
        self.common = common / np.linalg.norm(common) * np.sqrt(0.1)
        self.documents = self._draw(max(1, documents))

    def _draw(self, n: int) -> np.ndarray:
        rows = (self.rng.standard_normal((n, DIMENSIONS)) * self.scale) @ self.axes.T
        return rows.astype(np.float32)

    @staticmethod
    def _unit(rows: np.ndarray) -> np.ndarray:
        return (rows / np.linalg.norm(rows, axis=-1, keepdims=True)).astype(np.float32)

    def passages(self, document: int, count: int, windows: int) -> list[np.ndarray]:
        """`count` passages of a document, `windows` vectors each."""
        topic = self.common + np.sqrt(0.35) * self.documents[document % len(self.documents)]
        own = np.repeat(self._draw(count), windows, axis=0)
        rows = self._unit(topic + np.sqrt(0.2) * own + np.sqrt(0.35) * self._draw(count * windows))
        return list(rows.reshape(count, windows, DIMENSIONS))

    def query(self) -> np.ndarray:
        document = self.documents[self.rng.integers(len(self.documents))]
        return self._unit(self.common + np.sqrt(0.35) * document
                          + np.sqrt(0.55) * self._draw(1)[0])

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        return np.stack([self.query() for _ in texts])


def fill(path: Path, chunks: int, windows: int, filler: Callable[[int], str]) -> TextLikeEmbedder:
    """A collection "Big" of `chunks` passages (full text from `filler(words)`) and their
    vectors, written straight to the database (what an indexing run leaves, without its
    approximate index, which `build_s` then makes)."""
    documents = max(1, chunks // PER_DOC)
    embedder = TextLikeEmbedder(documents)
    index = SqliteFtsIndex(path, embedder)
    index.create_collection("Big", ["/big"], embed_model=embedder.model)
    assert not index.vectors_unavailable("Big"), index.vectors_unavailable("Big")
    store = vectors.SqliteVectorStore(index._conn)  # no approximate index: written below
    for d in range(documents):
        index.add_document("Big", Document(f"/big/{d}.md", 1, 1, str(d), "markdown"),
                           [Chunk(filler(60), 1, 5) for _ in range(PER_DOC)])
        ids = [cid for cid, _ in index.missing_vectors("Big", PER_DOC)]
        with transaction(index._conn):
            store.add(1, ids, embedder.passages(d, len(ids), windows))
    assert index.vector_count("Big") == chunks
    index.close()
    return embedder


def build_s(path: Path) -> float:
    index = SqliteFtsIndex(path)
    began = time.perf_counter()
    assert ann.for_database(path, vectors.driver()[0]).ready(
        index._conn, [index._id("Big")], wait=True) == []
    elapsed = time.perf_counter() - began
    index.close()
    return elapsed


def p95(times: list[float]) -> float:
    return statistics.quantiles(times, n=20)[-1] * 1000 if len(times) > 1 else times[0] * 1000


def searches(path: Path, embedder: TextLikeEmbedder, questions: list[str]) -> float:
    index = SqliteFtsIndex(path, embedder)
    times = []
    for question in questions:
        began = time.perf_counter()
        hits = index.search(["Big"], question, CANDIDATES)
        times.append(time.perf_counter() - began)
        assert hits and not index.search_note, index.search_note
    index.close()
    return p95(times)


def against_exact(path: Path, embedder: TextLikeEmbedder, questions: list[str]
                  ) -> tuple[float, float]:
    """Share of the exact scan's passages found: fused top 20, and the vectors' top 80."""
    index = SqliteFtsIndex(path)
    ids = [index._id("Big")]
    depth = CANDIDATES * 4  # search.FUSED_DEPTH
    fused = dense = 0.0
    for question in questions:
        query = embedder.query()
        ours = index._sqlite_vectors.ranking(ids, query, depth)
        exact = vectors.ranking(index._conn, ids, query, depth)
        dense += len({c for c, _ in ours} & {c for c, _ in exact}) / len(exact)
        bm25 = index.searcher._bm25_ranking(ids, question, depth)
        similar = [[(c, 1.0 - d) for c, d in ranking] for ranking in (ours, exact)]
        mine, truth = (fuse([bm25, ranking], CANDIDATES) for ranking in similar)
        fused += len(set(mine) & set(truth)) / len(truth)
    index.close()
    return fused / len(questions), dense / len(questions)


def probe(path: Path) -> None:
    """--rss-probe DB: in a process of its own, the first search's time and what it adds to
    resident memory (the saved index read and checked), as JSON."""
    embedder = TextLikeEmbedder(1)
    index = SqliteFtsIndex(path, embedder)
    before = psutil.Process().memory_info().rss
    began = time.perf_counter()
    assert index.search(["Big"], "ribe cloven", CANDIDATES) and not index.search_note
    first = time.perf_counter() - began
    grown = psutil.Process().memory_info().rss - before
    index.close()
    print(json.dumps({"first_ms": first * 1000, "rss_mb": grown / 2**20}))


def figures(quick: bool, filler: Callable[[int], str], words: Sequence[str],
            rng: random.Random) -> dict[str, float]:
    """The figures above; quick: 1,000 passages, every figure, meaning nothing."""
    results: dict[str, float] = {}
    for key, chunks in (("knowledge_query_fused_10k_p95_ms", 1_000 if quick else 10_000),
                        ("knowledge_query_fused_p95_ms", 1_000 if quick else 100_000)):
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "k.db"
            embedder = fill(path, chunks, 5, filler)
            questions = [" ".join(rng.choice(words) for _ in range(6))
                         for _ in range(3 if quick else 40)]
            built = build_s(path)
            results[key] = round(searches(path, embedder, questions), 2)
            if key != "knowledge_query_fused_p95_ms":
                continue
            results["knowledge_vector_index_build_s"] = round(built, 1)
            folder = paths.knowledge_vector_index_dir(path)
            results["knowledge_vector_index_file_mb"] = round(
                sum(f.stat().st_size for f in folder.glob("*.usearch")) / 2**20, 1)
            done = subprocess.run([sys.executable, __file__, "--rss-probe", str(path)],
                                  capture_output=True, text=True, env=dict(os.environ))
            assert done.returncode == 0, done.stderr[-2000:]
            found = json.loads(done.stdout.splitlines()[-1])
            results["knowledge_query_fused_first_ms"] = round(found["first_ms"], 1)
            results["knowledge_vector_index_rss_mb"] = round(found["rss_mb"], 1)
            fused, dense = against_exact(path, embedder, questions[:3 if quick else 20])
            results["knowledge_query_fused_vs_exact"] = round(fused, 3)
            results["knowledge_query_dense_vs_exact"] = round(dense, 3)
        ann.close_all()
    return results


if __name__ == "__main__":
    if sys.argv[1:2] == ["--rss-probe"]:
        probe(Path(sys.argv[2]))
