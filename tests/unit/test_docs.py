"""The manual stays true to the code: every file it names exists, its links resolve, and what
docs/architecture.md says about Qt holds for the sources."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import inglenook
from tests.helpers.bench_report import load_report

ROOT = Path(__file__).resolve().parents[2]
APP = Path(inglenook.__file__).parent
DOCS = [ROOT / "README.md", ROOT / "DEVELOPERS.md", *sorted((ROOT / "docs").glob("*.md"))]
# Names the manual gives for things outside this repository: llama.cpp's converter, folders in
# the user's data directory or a build, litellm's provider prefix.
OUTSIDE = {"convert_hf_to_gguf.py", "knowledge-vectors/", "ollama_chat/", "build/dist/inglenook/",
           "share/", "_internal/"}
QT_OUTSIDE_UI = {"engine/worker.py", "cli/self_test.py"}


def _repo_paths() -> tuple[set[str], set[str]]:
    files, folders = set(), set()
    for base in (ROOT / "app", ROOT / "tests", ROOT / "bench", ROOT / "packaging",
                 ROOT / "resources", ROOT / "docs"):
        for path in base.rglob("*"):
            rel = path.relative_to(ROOT).as_posix()
            (folders if path.is_dir() else files).add(rel + ("/" if path.is_dir() else ""))
    files |= {p.name for p in ROOT.iterdir() if p.is_file()}
    folders |= {p.name + "/" for p in ROOT.iterdir() if p.is_dir()}
    return files, folders


def _exists(name: str, files: set[str], folders: set[str]) -> bool:
    pool = folders if name.endswith("/") else files
    pattern = re.compile("(^|/)" + re.escape(name).replace(r"\*", "[^/]*") + "$")
    return any(pattern.search(path) for path in pool)


def test_every_file_the_manual_names_exists():
    files, folders = _repo_paths()
    missing = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        names = set(re.findall(r"`([\w./*-]+\.py|[\w./-]+/)`", text))
        if doc.name == "architecture.md":  # its layout block names files without backticks
            names |= set(re.findall(r"[\w*/]+\.py", text))
        missing += [f"{doc.name}: {name}" for name in sorted(names - OUTSIDE)
                    if not _exists(name, files, folders)]
    assert not missing, "the manual names files that do not exist:\n" + "\n".join(missing)


def test_every_link_in_the_manual_resolves():
    broken = []
    for doc in DOCS:
        for target in re.findall(r"\]\(([^)#\s]+)", doc.read_text(encoding="utf-8")):
            if "://" not in target and not (doc.parent / target).exists():
                broken.append(f"{doc.name}: {target}")
    assert not broken, "\n".join(broken)


def test_qt_is_imported_where_the_architecture_says():
    importers = set()
    for path in APP.rglob("*.py"):
        rel = path.relative_to(APP).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            if any(name.split(".")[0] == "PySide6" for name in names):
                importers.add(rel)
    outside_ui = {rel for rel in importers if not rel.startswith("ui/")}
    assert outside_ui == QT_OUTSIDE_UI
    architecture = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert all(f"`{rel}`" in architecture for rel in QT_OUTSIDE_UI)


def test_a_bench_run_rewrites_the_figures_of_the_performance_page(tmp_path: Path):
    report = load_report()
    doc = tmp_path / "performance.md"
    text = (ROOT / "docs" / "performance.md").read_text(encoding="utf-8")
    doc.write_text(text, encoding="utf-8")
    keys = [key for row in report.table_keys(text) for key in row]
    assert len(keys) > 80 and len(set(keys)) == len(keys)
    results = dict.fromkeys(keys, 7.25) | {"quick": True}
    (tmp_path / "quick.json").write_text(json.dumps(results))
    report.main([str(tmp_path / "quick.json"), str(doc)])
    assert doc.read_text(encoding="utf-8") == text  # a quick run's figures mean nothing
    results |= {"quick": False, "date": "2027-01-02", "window_switch_ms": 3.14159}
    (tmp_path / "full.json").write_text(json.dumps(results))
    report.main([str(tmp_path / "full.json"), str(doc)])
    written = doc.read_text(encoding="utf-8")
    assert "Figures of the run of 2027-01-02." in written
    assert "| **3.1 ms** | `window_switch_ms` |" in written
    assert "| **7.25 / 7.25** | `spec_draft_speedup` / `spec_acceptance_rate` |" in written
    assert written.split("<!-- end of figures -->")[1] == text.split("<!-- end of figures -->")[1]
