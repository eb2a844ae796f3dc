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


def test_only_the_status_bar_writes_the_status_bar():
    """Its fields own their widgets (ui/window/status_bar.py); a controller feeds them through
    signals. Three controllers once wrote one label, and a reply's "Reading the prompt…" wiped
    the model's notice."""
    found = [f"{name}:{node.lineno}: {ast.unparse(node)}"
             for name, tree in _sources(UI) if name != "ui/window/status_bar.py"
             for node in ast.walk(tree)
             if (isinstance(node, ast.Attribute) and node.attr in STATUS_BAR_CALLS)
             or (isinstance(node, ast.Name) and node.id in STATUS_BAR_CALLS)]
    assert not found, "the status bar reached outside window/status_bar.py:\n" + \
        "\n".join(found)


STATUS_BAR_CALLS = {"statusBar", "QStatusBar", "showMessage", "clearMessage"}


# ---- imports ----------------------------------------------------------------------------------
# Loops that remain (imports inside functions and under TYPE_CHECKING count: a helper typed
# by its owner is handed it whole). Modules that should not know each other; the list
# only shrinks.
KNOWN_LOOPS: set[frozenset[str]] = set()  # every loop is gone; keep it so


def _module_name(path: Path) -> str:
    parts = path.relative_to(APP).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph() -> dict[str, set[str]]:
    files = {_module_name(path): path for path in APP.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                # `from package import module` imports the module; else the module named
                targets.update(f"{node.module}.{a.name}" if f"{node.module}.{a.name}"
                               .removeprefix("inglenook.") in files else node.module
                               for a in node.names)
        graph[name] = {t.removeprefix("inglenook.") for t in targets
                       if t.startswith("inglenook.")} & files.keys() - {name}
    return graph


def _loops(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """Strongly connected components of more than one module (Tarjan's, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(frozenset(component))
    return found


def test_no_new_import_loops():
    loops = set(_loops(_import_graph()))
    new = [sorted(loop) for loop in loops - KNOWN_LOOPS]
    assert not new, f"modules that import each other: {new}"
    gone = [sorted(loop) for loop in KNOWN_LOOPS - loops]
    assert not gone, f"these loops are gone: take them out of KNOWN_LOOPS: {gone}"


SHARED_UI = ("ui.theme", "ui.plain", "ui.tasks", "ui.contrast", "ui.app_settings", "ui.widgets")
UI_FLOORS = ("ui.chat", "ui.models", "ui.side", "ui.history", "ui.knowledge", "ui.server",
             "ui.tools", "ui.window", "ui.main_window")


def test_what_the_window_shares_imports_none_of_its_parts():
    """The theme, the task runner and the small widgets are below every part of the window:
    an arrow from them to ui/chat (the theme once took its palette from the renderer) runs up."""
    up = sorted(f"{module} -> {target}" for module, targets in _import_graph().items()
                if module.startswith(SHARED_UI) for target in targets
                if target.startswith(UI_FLOORS))
    assert not up, up


def test_no_two_parts_of_the_window_import_each_other():
    """ui/'s parts (chat, models, side, window, main_window…) stand one above another: the
    models' tune once wrote the side panel's spin boxes while the side panel opened the models'
    defaults dialog, and the menus took the whole main window that built them."""
    arrows = {(_part(module), _part(target)) for module, targets in _import_graph().items()
              if module.startswith("ui.") for target in targets if target.startswith("ui.")}
    both = sorted({tuple(sorted(arrow)) for arrow in arrows
                   if arrow[0] != arrow[1] and arrow[::-1] in arrows})
    assert not both, both


def _part(module: str) -> str:
    return ".".join(module.split(".")[:2])
