"""The shape ARCHITECTURE.md asks for, read from the sources: the window reaches the engines
only through the worker's typed methods, and imports do not run in loops."""

from __future__ import annotations

import ast
from pathlib import Path

import inglenook

APP = Path(inglenook.__file__).parent
UI = APP / "ui"
ENGINE_PARTS = {"router", "scheduler"}  # the worker's own; `client` is its router too


def _sources(folder: Path) -> list[tuple[str, ast.Module]]:
    return [(str(path.relative_to(APP)), ast.parse(path.read_text(encoding="utf-8")))
            for path in sorted(folder.rglob("*.py"))]


def _reaches_past_the_worker(node: ast.Attribute) -> bool:
    if node.attr in ENGINE_PARTS:
        return True
    base = node.value
    owner = base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", "")
    return node.attr == "client" and owner.endswith("worker")


def test_the_window_reaches_the_engines_only_through_the_worker():
    found = [f"{name}:{node.lineno}: {ast.unparse(node)}"
             for name, tree in _sources(UI) for node in ast.walk(tree)
             if isinstance(node, ast.Attribute) and _reaches_past_the_worker(node)]
    assert not found, "ui/ reaches past EngineWorker:\n" + "\n".join(found)


def test_the_window_writes_nothing_of_the_worker():
    found = []
    for name, tree in _sources(UI):
        for node in ast.walk(tree):
            targets = node.targets if isinstance(node, ast.Assign) else \
                [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
            for target in targets:
                for part in ast.walk(target):
                    if isinstance(part, ast.Attribute) and "worker" in ast.unparse(part.value):
                        found.append(f"{name}:{node.lineno}: {ast.unparse(node)}")
    assert not found, "ui/ sets the worker's attributes:\n" + "\n".join(found)
