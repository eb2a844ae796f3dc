"""Searching the knowledge index (fts.SqliteFtsIndex.search): BM25, fused with the vectors'.

The user's question is never parsed as FTS5 syntax: each word becomes a quoted term, and the
terms are OR-ed, so BM25 ranks passages holding more of the rarer words first (a question
shares few of its words with the answer). Words so common that they match everywhere are left
out: they add nothing to the ranking and make every query visit every row.

A collection with an embedding model also has vectors for each chunk, one per window of it
(vectors.py), a chunk as near as its nearest window; given an embedder of that model, a search
ranks by both and fuses the two rankings' scores (index.fuse). A query that cannot be embedded
is searched in full text, and `search_note` says why. Where a collection's vectors live is its
backend's store: the index's file (vectors.SqliteVectorStore) or Qdrant (qdrant_store.py); the
rankings of both are merged by distance.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

from inglenook.knowledge import embed_prompts, vectors
from inglenook.knowledge.index import Chunk, Collection, Hit, fuse
from inglenook.knowledge.vectors import Embedder, VectorStore


class SearchedIndex(Protocol):
    """What a Searcher reads of its index (knowledge/fts.py's SqliteFtsIndex) at each search."""

    embedder: Embedder | None
    embedder_for: Callable[[str], Embedder] | None

    def collection_id(self, name: str) -> int: ...

    def collection(self, name: str) -> Collection: ...

    def vector_store(self, collection: Collection) -> VectorStore: ...

    def vectors_unavailable(self, name: str) -> str: ...

# English function words: they match everywhere and say nothing of what is asked (a passage
# that shares only "they" with a question is not an answer to it).
STOPWORDS = frozenset((
    "a", "about", "after", "all", "also", "am", "an", "and", "any", "are", "as", "at", "be",
    "because", "been", "being", "but", "by", "can", "could", "did", "do", "does", "doing",
    "for", "from", "get", "gets", "got", "had", "has", "have", "having", "he", "her", "here",
    "hers", "him", "his", "how", "i", "if", "in", "into", "is", "it", "its", "itself", "just",
    "me", "my", "myself", "of", "on", "or", "our", "ours", "she", "should", "so", "some",
    "such", "than", "that", "the", "their", "theirs", "them", "then", "there", "these", "they",
    "this", "those", "to", "too", "us", "very", "was", "we", "were", "what", "when", "where",
    "which", "while", "who", "whom", "why", "will", "with", "would", "you", "your", "yours"))
MAX_QUERY_TERMS = 32
# Words in more than this share of the chunks are dropped from a query that has rarer ones
# (at least KEPT_TERMS are kept, the rarest): their weight in BM25 is small, and each one makes
# the search score most of the index (100,000 chunks: ~70 ms for six such words, ~40 for three).
COMMON_SHARE = 0.05
OVERFETCH = 20  # matches scored per hit wanted before the collections' filter
KEPT_TERMS = 3
FUSED_DEPTH = 4  # of each ranking, this many times the hits wanted are fused
_WORD = re.compile(r"\w+(?:['’-]\w+)*")


def query_words(question: str) -> list[str]:
    words: list[str] = []
    for word in _WORD.findall(question.lower()):
        if word not in STOPWORDS and word not in words:
            words.append(word)
    return words[:MAX_QUERY_TERMS]


def fts_query(question: str | list[str]) -> str | None:
    """The FTS5 query for a question (or its words), or None when it holds no word worth
    searching."""
    words = query_words(question) if isinstance(question, str) else question
    if not words:
        return None
    return " OR ".join('"' + w.replace('"', '""') + '"' for w in words)


class Searcher:
    """The searching half of a SqliteFtsIndex, on its connection: it reads the index's
    collections, their vector stores and its `embedder` / `embedder_for` at each search.
    `note`: why the last search used no vectors, when it could have ("" it did)."""

    def __init__(self, index: SearchedIndex, conn: sqlite3.Connection) -> None:
        self.index = index
        self._conn = conn
        self.note = ""

    def search(self, collections: Sequence[str], query: str, limit: int = 5) -> list[Hit]:
        """BM25, fused with the vectors' ranking of each embedding model the collections use
        (where there is an embedder of it)."""
        self.note = ""
        ids = [self.index.collection_id(name) for name in collections]
        dense = self._dense(collections, ids, query, limit * FUSED_DEPTH)
        if not dense:
            return self._bm25(ids, query, limit)
        fused = fuse([self._bm25_ranking(ids, query, limit * FUSED_DEPTH), *dense], limit)
        scores = {cid: float(len(fused) - rank) for rank, cid in enumerate(fused)}
        return self._hits(fused, {cid: -score for cid, score in scores.items()}, ids)

    def _embedder(self, model: str) -> Embedder | None:
        """An embedder of `model`: `embedder` when it is that model's, else `embedder_for`'s."""
        if self.index.embedder is not None and self.index.embedder.model == model:
            return self.index.embedder
        return self.index.embedder_for(model) if self.index.embedder_for is not None else None

    def _dense(self, collections: Sequence[str], ids: list[int], query: str,
               depth: int) -> list[list[tuple[int, float]]]:
        """The vectors' rankings (chunk id, cosine similarity), one per embedding model of
        the collections: the question is embedded by each (the distances of two models do
        not compare, so each is fused as a ranking of its own), once per prefix style of the
        vectors it meets (one style but while a collection is embedded again in its model's
        new style; those of one model are merged). [] when there is none to use; `note`
        says why where there could have been (no embedder of a collection's model, a store or
        an embedder that failed)."""
        if (self.index.embedder is None and self.index.embedder_for is None) or not query.strip():
            return []
        by_model: dict[str, dict[str, dict[int, tuple[VectorStore, list[int]]]]] = {}
        names: dict[str, list[str]] = {}
        for cid, name in zip(ids, collections, strict=True):
            collection = self.index.collection(name)
            if not collection.embed_model:
                continue
            if why := self.index.vectors_unavailable(name):
                self.note = why
                continue
            store = self.index.vector_store(collection)
            by_style = by_model.setdefault(collection.embed_model, {})
            by_store = by_style.setdefault(collection.embed_prompts, {})
            by_store.setdefault(id(store), (store, []))[1].append(cid)
            names.setdefault(collection.embed_model, []).append(collection.name)
        rankings, notes = [], []
        for model, by_style in by_model.items():
            searched = ", ".join(names[model])
            embedder = self._embedder(model)
            if embedder is None:
                notes.append(f"{searched} searched in full text only: no embedder of its "
                             f"model ({Path(model).name}) for this search.")
                continue
            styles = sorted(by_style)
            try:
                found = embedder([embed_prompts.query_text(style, query) for style in styles])
            except Exception as exc:  # the engine's error: full text still answers
                notes.append(f"The question could not be embedded ({exc}): {searched} "
                             "searched in full text only.")
                continue
            merged: list[tuple[int, float]] | None = None
            for style, vector in zip(styles, found, strict=True):
                ranking, note = vectors.merged_ranking(list(by_style[style].values()), vector,
                                                       depth)
                if note:
                    notes.append(note)
                if ranking is not None:
                    merged = (merged or []) + ranking
            if merged is not None:
                rankings.append(sorted(merged, key=lambda p: -p[1])[:depth])
        self.note = " ".join(notes) or self.note
        return rankings

    def _bm25(self, ids: list[int], query: str, limit: int) -> list[Hit]:
        ranking = self._bm25_ranking(ids, query, limit)
        return self._hits([cid for cid, _ in ranking], {c: -s for c, s in ranking}, ids)

    def _bm25_ranking(self, ids: list[int], query: str, limit: int) -> list[tuple[int, float]]:
        """(chunk id, BM25 score: higher better) of the collections' best matches. Ids alone:
        a fused search reads the text of the passages it keeps, not of the 80 it ranks (the
        1,600 read for them, filter included, took 45 of its 60 ms at 10,000 passages)."""
        match = fts_query(self._without_common(query_words(query)))
        if match is None or not ids:
            return []
        # The best matches by score alone first: joining every match to its document costs as
        # much again as scoring them (100,000 chunks: 25 ms against 45). Only when the
        # collections' filter leaves too few of them is the whole set joined.
        wanted = limit * OVERFETCH
        best = self._conn.execute(
            "SELECT rowid, bm25(chunks_fts, 1.0, 2.0) AS score FROM chunks_fts "
            "WHERE chunks_fts MATCH ? ORDER BY score LIMIT ?", (match, wanted)).fetchall()
        kept = self._in_collections([rowid for rowid, _ in best], ids)
        # bm25() is lower for better matches; the heading column weighs double.
        found = [(rowid, -score) for rowid, score in best if rowid in kept]
        if len(found) >= limit or len(best) < wanted:
            return found[:limit]
        marks = ", ".join("?" * len(ids))
        every = self._conn.execute(
            f"SELECT chunks_fts.rowid, bm25(chunks_fts, 1.0, 2.0) AS score FROM chunks_fts "
            f"JOIN chunks c ON c.id = chunks_fts.rowid "
            f"JOIN documents d ON d.id = c.document_id "
            f"WHERE chunks_fts MATCH ? AND d.collection_id IN ({marks}) "
            f"ORDER BY score LIMIT ?", (match, *ids, limit)).fetchall()
        return [(rowid, -score) for rowid, score in every]

    def _in_collections(self, rowids: list[int], ids: list[int]) -> set[int]:
        """Those of the chunks that are in the collections `ids`."""
        if not rowids:
            return set()
        if len(set(ids)) == self._conn.execute("SELECT count(*) FROM collections").fetchone()[0]:
            return set(rowids)  # every collection: every chunk is in one
        marks, kept = ", ".join("?" * len(rowids)), ", ".join("?" * len(ids))
        return {row[0] for row in self._conn.execute(
            f"SELECT c.id FROM chunks c CROSS JOIN documents d ON d.id = c.document_id "
            f"WHERE c.id IN ({marks}) AND d.collection_id IN ({kept})", (*rowids, *ids))}

    def _hits(self, rowids: list[int], scores: dict[int, float], ids: list[int]) -> list[Hit]:
        """The chunks of `rowids` in the collections `ids`, in the order given."""
        if not rowids:
            return []
        marks = ", ".join("?" * len(rowids))
        kept = ", ".join("?" * len(ids))
        # CROSS JOIN: chunks by id first. Left to choose, SQLite walked every chunk of the
        # collections by document and kept those in the list (100,000 chunks: 11 ms, not 1).
        rows = self._conn.execute(
            f"SELECT c.id, k.name, d.path, c.text, c.heading, c.line_start, c.line_end, c.page "
            f"FROM chunks c CROSS JOIN documents d ON d.id = c.document_id "
            f"JOIN collections k ON k.id = d.collection_id "
            f"WHERE c.id IN ({marks}) AND d.collection_id IN ({kept})",
            (*rowids, *ids)).fetchall()
        found = {row[0]: row for row in rows}
        return [Hit(cid, name, path, Chunk(text, start, end, page, heading), -scores[cid])
                for cid, name, path, text, heading, start, end, page in
                (found[r] for r in rowids if r in found)]

    def _without_common(self, words: list[str]) -> list[str]:
        if len(words) <= KEPT_TERMS:
            return words
        marks = ", ".join("?" * len(words))
        counts = dict(self._conn.execute(
            f"SELECT term, doc FROM temp.chunks_vocab WHERE term IN ({marks})", words))
        total = self._conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
        by_rarity = sorted(words, key=lambda w: counts.get(w, 0))  # stable: question order
        return [w for n, w in enumerate(by_rarity)
                if n < KEPT_TERMS or counts.get(w, 0) <= COMMON_SHARE * total]

