"""Imports run one way: the import-linter contracts pass, and the project's modules form no cycle.

The contracts ([tool.importlinter] in pyproject.toml) encode the layering of
docs/architecture.md; `lint-imports` from the .venv checks them, TYPE_CHECKING imports
included. The second test does not trust any tool's idea of an import: it reads every
`import` / `from` statement with `ast` (at any depth: TYPE_CHECKING blocks, lazy imports in
functions) and asserts the module graph is acyclic, printing each cycle with its import lines.

    .venv/bin/python -m pytest tests/test_imports.py -q
"""

from __future__ import annotations

import ast
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = (
    "ground", "feedback", "agent_server", "lsp", "learner", "modelbuild", "apprentice",
    "migrations",
)  # fmt: skip


def test_import_linter_contracts_are_kept() -> None:
    # The venv's own script: the test run and a fresh clone (scripts/bootstrap.sh --dev) agree.
    lint_imports = Path(sys.executable).with_name("lint-imports")
    assert lint_imports.exists(), f"{lint_imports} missing: pip install -e '.[dev]'"
    # --no-cache: a stale cache under .import_linter_cache must never hide a new import.
    command = [str(lint_imports), "--no-cache", "--no-logo"]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout, done.stdout


# --- the module graph, read with ast --------------------------------------------------------


@dataclass(frozen=True)
class Edge:
    target: str
    line: int
    text: str  # the import statement as written, for the failure message


def module_files(root: Path = REPO, packages: tuple[str, ...] = PACKAGES) -> dict[str, Path]:
    """Module name -> file, for every .py file of the packages under `root`."""
    modules = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join(parts)] = path
    return modules


def _known(name: str, modules: dict[str, Path]) -> str | None:
    """The most specific module of ours that `name` names: the module itself or its parent."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(module: str, path: Path, modules: dict[str, Path]) -> list[Edge]:
    """Every import of ours in the file, at any nesting level, relative ones resolved.

    `from pkg import sub` where `sub` is a module is an edge to `pkg.sub`; `import pkg.sub`
    (or `from pkg.sub import x`) is an edge to `pkg.sub` only. Python runs `pkg/__init__`
    first too, but that is not this module's dependency: counting it would turn every
    `__init__` that re-exports its submodules into a false cycle.
    """
    source = path.read_text()
    lines = source.splitlines()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    edges = []
    for node in ast.walk(ast.parse(source, str(path))):
        if isinstance(node, ast.Import):
            targets = [_known(alias.name, modules) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            targets = [_known(f"{base}.{alias.name}", modules) for alias in node.names]
        else:
            continue
        text = lines[node.lineno - 1].strip()
        edges += [Edge(t, node.lineno, text) for t in targets if t and t != module]
    return edges


def import_graph(modules: dict[str, Path]) -> dict[str, list[Edge]]:
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def knots(graph: dict[str, list[Edge]]) -> list[list[str]]:
    """The strongly connected components of more than one module, each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(root: str) -> None:
        # Tarjan's algorithm, iterative: the graph is deep enough to worry the recursion limit.
        work = [(root, iter(graph[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for edge in edges:
                if edge.target not in index:
                    index[edge.target] = low[edge.target] = len(index)
                    stack.append(edge.target)
                    on_stack.add(edge.target)
                    work.append((edge.target, iter(graph[edge.target])))
                    break
                if edge.target in on_stack:
                    low[node] = min(low[node], index[edge.target])
            else:
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
                        components.append(component)

    for name in sorted(graph):
        if name not in index:
            visit(name)
    return sorted(sorted(component) for component in components)


def cycles(graph: dict[str, list[Edge]]) -> list[list[str]]:
    """One cycle through each knot: the shortest from its first module back to it."""
    return [_cycle_in(knot, graph) for knot in knots(graph)]


def _cycle_in(component: list[str], graph: dict[str, list[Edge]]) -> list[str]:
    """The shortest path from the component's first module back to itself (breadth first)."""
    members, start = set(component), component[0]
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for edge in graph[node]:
                if edge.target == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return [*reversed(path), start]
                if edge.target in members and edge.target not in came_from:
                    came_from[edge.target] = node
                    following.append(edge.target)
        frontier = following
    raise AssertionError(f"no cycle in the component {component}")  # Tarjan promised one


def describe(
    cycle: list[str], graph: dict[str, list[Edge]], modules: dict[str, Path], root: Path = REPO
) -> str:
    """The cycle, then each of its imports as `path:line: statement`."""
    steps = [" -> ".join(cycle)]
    for importer, imported in zip(cycle, cycle[1:], strict=False):
        edge = next(e for e in graph[importer] if e.target == imported)
        steps.append(f"    {modules[importer].relative_to(root)}:{edge.line}: {edge.text}")
    return "\n".join(steps)


def test_the_graph_reader_sees_every_kind_of_import(tmp_path: Path) -> None:
    """Guards the reader: lazy, TYPE_CHECKING and relative imports, no edges to a parent."""
    files = {
        "pkg/__init__.py": "from pkg.sub import thing  # re-export\n",
        "pkg/sub.py": "import typing\nif typing.TYPE_CHECKING:\n    from . import other\n",
        "pkg/other.py": "def lazy():\n    from .deep.leaf import x\n",
        "pkg/deep/__init__.py": "from ..sub import thing\n",
        "pkg/deep/leaf.py": "import os\nimport pkg.sub as s\nfrom pkg import deep\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    modules = module_files(tmp_path, ("pkg",))
    graph = import_graph(modules)
    assert {name: {e.target for e in edges} for name, edges in graph.items()} == {
        "pkg": {"pkg.sub"},
        "pkg.sub": {"pkg.other"},
        "pkg.other": {"pkg.deep.leaf"},
        "pkg.deep": {"pkg.sub"},
        "pkg.deep.leaf": {"pkg.sub", "pkg.deep"},  # not `pkg`: its __init__ is no dependency
    }
    # One real cycle (through the TYPE_CHECKING and the lazy import); `pkg` is not in it.
    found = cycles(graph)
    assert found == [["pkg.deep", "pkg.sub", "pkg.other", "pkg.deep.leaf", "pkg.deep"]]
    assert knots(graph) == [["pkg.deep", "pkg.deep.leaf", "pkg.other", "pkg.sub"]]
    text = describe(found[0], graph, modules, tmp_path)
    assert "pkg/other.py:2: from .deep.leaf import x" in text, text


def test_no_import_cycles() -> None:
    modules = module_files()
    graph = import_graph(modules)
    found = [
        f"{describe(_cycle_in(knot, graph), graph, modules)}\n    (all in this knot: {knot})"
        for knot in knots(graph)
    ]
    assert not found, "import cycles (TYPE_CHECKING and lazy imports count):\n" + "\n".join(found)
