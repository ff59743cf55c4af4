"""The package layers, checked from the source: no import circles, and a layer imports
only the layers below it (core < sessionfs.view < sessionfs.writes < sessionfs.fs <
sessionfs.commands). Imports inside functions count too: a lazy import is still a
dependency, except the command line's deliberate lazy import of the daemon."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("core", "sessionfs")
LAYER_RANK = {
    "core": 0,
    "sessionfs.view": 1,
    "sessionfs.writes": 2,
    "sessionfs.fs": 3,
    "sessionfs.commands": 4,
}


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def all_modules() -> dict[str, Path]:
    return {
        module_name(p): p
        for package in PACKAGES
        for p in (REPO / package).rglob("*.py")
        if "__pycache__" not in p.parts
    }


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """Project modules `name` imports (resolved to the longest known module name)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [f"{base}.{alias.name}" for alias in node.names] + [base]
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def layer_of(name: str) -> str:
    for layer in sorted(LAYER_RANK, key=len, reverse=True):
        if name == layer or name.startswith(layer + "."):
            return layer
    return "sessionfs"  # the package root (__init__, __main__)


def graph() -> dict[str, set[str]]:
    modules = all_modules()
    known = set(modules)
    return {name: imports_of(name, path, known) for name, path in modules.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in edges:
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_circles() -> None:
    edges = {
        name: {t for t in targets if not t.endswith("__init__")}
        for name, targets in graph().items()
    }
    # A package's __init__ re-exporting its modules is not a circle through them.
    for name in list(edges):
        if (REPO / name.replace(".", "/") / "__init__.py").exists():
            edges[name] = set()
    assert cycles(edges) == []


def test_each_layer_imports_only_layers_below() -> None:
    wrong = []
    for name, targets in graph().items():
        mine = layer_of(name)
        if mine == "sessionfs":
            continue
        for target in targets:
            theirs = layer_of(target)
            if theirs != "sessionfs" and LAYER_RANK[theirs] > LAYER_RANK[mine]:
                wrong.append(f"{name} -> {target}")
    assert wrong == []


@pytest.mark.parametrize(
    "module",
    ["sessionfs.commands.check", "sessionfs.commands.history", "sessionfs.commands.search"],
)
def test_offline_commands_do_not_load_fuse(module: str) -> None:
    code = f"import sys, {module}; print('pyfuse3' in sys.modules, 'trio' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == ["False", "False"]
