"""The import graph of seffi: no cycles, no upward imports, every package in a layer.

Every module under ``seffi/``, ``envs/`` and ``callbacks/`` is parsed with ``ast``; module-level and
function-local imports count alike (a function-local import that closes a cycle only hides it),
relative imports are resolved, and ``if TYPE_CHECKING:`` blocks are skipped (they never run).
``envs/`` and ``callbacks/`` are installed as ``seffi.envs`` / ``seffi.callbacks``, so both
spellings name one module. ``from pkg import name`` is an edge to ``pkg.name`` when that is a
module, else to ``pkg`` itself (its ``__init__`` re-exports the name, which is an edge of its own);
importing ``pkg.mod`` is an edge to ``pkg.mod`` only (running ``pkg/__init__`` first is Python's
doing, not a dependency the importer chose).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Source folders and the package name each is installed as.
TREES = {"seffi": "seffi", "envs": "seffi.envs", "callbacks": "seffi.callbacks"}
#: Top-level spellings of the installed aliases.
ALIASES = {"envs": "seffi.envs", "callbacks": "seffi.callbacks"}
#: Layers below the adapters: they must not import envs, callbacks or the experiments.
LOWER = (
    "seffi._convert",
    "seffi._io",
    "seffi._seeding",
    "seffi.coverage",
    "seffi.episodes",
    "seffi.errors",
    "seffi.labelers",
    "seffi.lanes",
    "seffi.models",
    "seffi.report",
    "seffi.tasks",
)
#: The adapters, and what is built on them.
UPPER = ("seffi.envs", "seffi.callbacks", "seffi.experiment")
#: The package root and the command line package (every ``seffi.cli.*`` module) sit above everything.
TOP = ("seffi", "seffi.cli")


def _modules() -> dict[str, Path]:
    """Module name -> file, for every module of the three trees."""
    out: dict[str, Path] = {}
    for folder, package in TREES.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join([package, *parts])] = path
    return out


def _canonical(name: str) -> str:
    head, _, rest = name.partition(".")
    if head in ALIASES:
        return ALIASES[head] + (f".{rest}" if rest else "")
    return name


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement that can run (anywhere in the file, TYPE_CHECKING blocks skipped)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _is_type_checking(child):
            for stmt in child.orelse:
                yield from _imports(ast.Module(body=[stmt], type_ignores=[]))
            continue
        if isinstance(child, ast.Import | ast.ImportFrom):
            yield child
        yield from _imports(child)


def _known(name: str, modules: dict[str, Path]) -> str | None:
    """``name`` or its longest prefix that is a module of ours."""
    parts = name.split(".")
    for n in range(len(parts), 0, -1):
        candidate = ".".join(parts[:n])
        if candidate in modules:
            return candidate
    return None


def import_graph() -> dict[str, set[str]]:
    """Module -> the modules of ours it imports."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        edges: set[str] = set()
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.Import):
                targets = [_canonical(a.name) for a in node.names]
            else:
                if node.level:
                    base = name.split(".") if is_package else name.split(".")[:-1]
                    base = base[: len(base) - (node.level - 1)]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = _canonical(node.module or "")
                targets = [
                    f"{source}.{a.name}" if f"{source}.{a.name}" in modules else source for a in node.names
                ]
            for target in targets:
                hit = _known(target, modules)
                if hit is not None and hit != name:
                    edges.add(hit)
        graph[name] = edges
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One shortest cycle through each strongly connected component with more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[set[str]] = []
    counter = [0]

    def visit(v: str) -> None:  # Tarjan; the graph is a few hundred modules deep at most
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                components.append(comp)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    out = []
    for comp in components:
        start = min(comp)
        # Breadth-first within the component: the shortest way back to the start.
        paths = {start: [start]}
        frontier = [start]
        cycle = None
        while frontier and cycle is None:
            nxt = []
            for v in frontier:
                for w in sorted(graph[v] & comp):
                    if w == start:
                        cycle = paths[v] + [start]
                        break
                    if w not in paths:
                        paths[w] = paths[v] + [w]
                        nxt.append(w)
                if cycle:
                    break
            frontier = nxt
        out.append(cycle or sorted(comp))
    return out


def test_every_module_belongs_to_a_layer() -> None:
    """No package escapes the layering checks: each module is in the lower layers, the upper or the top."""
    loose = sorted(
        m for m in import_graph()
        if m not in TOP and not m.startswith((*LOWER, *UPPER, "seffi.cli."))
    )
    assert not loose, loose


def test_graph_sees_function_local_relative_and_aliased_imports() -> None:
    """The walker finds the edges the cycle test relies on (else it could pass vacuously): a
    function-local import, a package re-export, the seffi.envs alias."""
    graph = import_graph()
    assert "seffi.report.plots" in graph["seffi.report.files"]  # function-local in write_report
    assert "seffi.report.files" in graph["seffi.report"]  # the package re-exports write_report
    assert "seffi.coverage.columns" in graph["seffi.report.keys"]
    assert any(t.startswith("seffi.envs") for t in graph["seffi.experiment.runner"])
    assert len(graph) > 60


def test_no_import_cycles() -> None:
    """No import cycle between seffi modules, function-local ones and package re-exports included."""
    cycles = _cycles(import_graph())
    for cycle in cycles:
        print("import cycle: " + " -> ".join(cycle))
    assert not cycles, f"{len(cycles)} import cycle(s): " + "; ".join(" -> ".join(c) for c in cycles)


def test_lower_layers_never_import_adapters() -> None:
    """Coverage, report, tasks, labelers, lanes and models import nothing of envs/callbacks/experiment."""
    graph = import_graph()
    upward = sorted(
        f"{src} -> {dst}"
        for src, targets in graph.items()
        if src.startswith(LOWER)
        for dst in targets
        if dst.startswith(UPPER)
    )
    for line in upward:
        print("upward import: " + line)
    assert not upward, upward
