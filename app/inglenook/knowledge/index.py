"""The index behind one small interface: documents in, ranked chunks out.

SqliteFtsIndex (fts.py) is the implementation: BM25 over SQLite FTS5, and dense vectors as a
second ranking of the same chunks (a vectors.VectorStore per collection: sqlite-vec in the same
file, or Qdrant for collections that outgrow a desktop); it ranks by each (search.py) and merges
them with `fuse` (relative score fusion), so callers never learn which rankings exist.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Collection:
    """A collection as its index holds it: its folders and how its vectors are made."""

    name: str
    roots: tuple[str, ...]
    follow_links: bool
    indexed_at: float | None
    embed_model: str = ""  # the GGUF whose vectors its chunks get ("" none)
    embed_error: str = ""  # why the last embedding failed ("" it did not)
    watch: bool = True  # re-indexed when its files change
    backend: str = ""  # where its vectors live: "" this database, "qdrant"
    qdrant_url: str = ""  # "" Qdrant's local mode under the data dir, else a server
    qdrant_name: str = ""  # its Qdrant collection's name (qdrant_store.py)
    embed_prompts: str = ""  # the prefix style of its vectors (embed_prompts.py)


@dataclass(frozen=True)
class Chunk:
    """A passage of a document, with where it came from (for the citation)."""

    text: str
    line_start: int  # 1-based, in the converted text of its page (or of the file)
    line_end: int
    page: int | None = None  # PDFs
    heading: str = ""  # the heading the passage sits under, if any

    @property
    def location(self) -> str:
        lines = (f"line {self.line_start}" if self.line_start == self.line_end
                 else f"lines {self.line_start}–{self.line_end}")
        return f"page {self.page}, {lines}" if self.page is not None else lines


@dataclass(frozen=True)
class Document:
    """What the index knows of a file: enough to tell whether it changed."""

    path: str  # absolute, as scanned
    size: int
    mtime_ns: int
    sha256: str
    kind: str  # the converter that read it: text, markdown, code, csv, html, pdf, docx
    reader: int = 0  # the reader's version that made its passages (indexer.READER_VERSION)
    note: str = ""  # what of it was not read ("" all of it): a cap reached


@dataclass(frozen=True)
class Hit:
    """One chunk found by a search, best first."""

    chunk_id: int
    collection: str
    path: str
    chunk: Chunk
    score: float  # higher is better; comparable within one search only

    @property
    def citation(self) -> str:
        return f"{self.path}, {self.chunk.location}"


@dataclass(frozen=True)
class IndexStats:
    documents: int
    chunks: int
    characters: int


class KnowledgeIndex(Protocol):
    """Documents of named collections, searched by what the user asks. `search_note` says
    why the last search used no vectors where it could have ("" it did, or none were
    there to use)."""

    search_note: str

    def add_document(self, collection: str, document: Document,
                     chunks: Sequence[Chunk]) -> None:
        """Add a document, or replace the one at the same path with its new chunks."""

    def remove_document(self, collection: str, path: str) -> None: ...

    def documents(self, collection: str) -> dict[str, Document]:
        """The documents indexed, by path (what an incremental re-index compares with)."""

    def search(self, collections: Sequence[str], query: str, limit: int = 5) -> list[Hit]: ...

    def stats(self, collection: str) -> IndexStats: ...


def fuse(rankings: Sequence[Sequence[tuple[int, float]]], limit: int) -> list[int]:
    """Relative score fusion of rankings of (chunk id, score), best first, higher better: each
    ranking's scores scaled to 0..1 over what it returned (its best 1, its last 0), summed with
    equal weight (0 from a ranking that did not return the id). Unlike reciprocal rank fusion,
    which keeps the ranks alone, a ranking's margin counts: the one passage BM25 finds far
    ahead of the rest (it names a rare name) is not overtaken by one both put second; with
    all-MiniLM-L6-v2's vectors, RRF took BM25's recall@5 of 1.0 down to 0.81 (200 documents,
    bench/knowledge_bench.py), this keeps it. Bruch et al. (2023), "An Analysis of Fusion
    Functions for Hybrid Retrieval", find this convex combination better than RRF, which
    depends on its constant; it is Weaviate's default (relativeScoreFusion)."""
    scores: dict[int, float] = {}
    for ranking in rankings:
        if not ranking:
            continue
        low, high = min(s for _, s in ranking), max(s for _, s in ranking)
        for chunk_id, score in ranking:
            scaled = (score - low) / (high - low) if high > low else 1.0
            scores[chunk_id] = scores.get(chunk_id, 0.0) + scaled
    return sorted(scores, key=lambda cid: (-scores[cid], cid))[:limit]
