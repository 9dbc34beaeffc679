"""The import graph of seffi: layers, no cycles, and function-level imports only where they defer a cost.

Every module under ``seffi/``, ``envs/`` and ``callbacks/`` is parsed with ``ast``; relative imports
are resolved and ``if TYPE_CHECKING:`` blocks are skipped (they never run). ``envs/`` and
``callbacks/`` are installed as ``seffi.envs`` / ``seffi.callbacks``, so both spellings name one
module. ``from pkg import name`` is an edge to ``pkg.name`` when that is a module, else to ``pkg``
itself (its ``__init__`` re-exports the name, which is an edge of its own); importing ``pkg.mod`` is
an edge to ``pkg.mod`` only (running ``pkg/__init__`` first is Python's doing, not a dependency the
importer chose).

The layers, bottom to top:

* **core** (`CORE`): tasks, labelers, coverage, report, lanes, group scoring and the utilities;
* **adapters** (`ADAPTERS`): ``seffi.envs``, ``seffi.callbacks`` and ``seffi.score`` (files of
  generations), built on the core only;
* **research** (`RESEARCH`): the models trained here and the experiments (``seffi.models``,
  ``seffi.experiment``), built on anything below;
* **top**: the package root and the command line.

A module imports only modules of its own layer or of a layer below, counting imports inside functions:
an import moved into a function still runs, so it cannot hide a cycle or an upward edge.

**Function-level imports of seffi's own modules** are allowed in two cases only:

1. the importer is the command line (``seffi.cli`` and its subcommands): a command loads its code when
   it runs, so ``seffi --help`` stays fast;
2. the imported module pulls in an optional heavy dependency (`HEAVY`: torch, transformers, trl,
   wandb, matplotlib, ...) when imported, directly or through the seffi modules it imports at module
   level, and the importer does not pull that dependency in already: deferring it keeps ``import
   seffi`` light (``tests/test_import.py``).

Every other function-level import of a seffi module is a module-level import written in the wrong
place (or a cycle being dodged) and fails `test_function_level_imports_only_defer_heavy_dependencies`.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Source folders and the package name each is installed as.
TREES = {"seffi": "seffi", "envs": "seffi.envs", "callbacks": "seffi.callbacks"}
#: Top-level spellings of the installed aliases.
ALIASES = {"envs": "seffi.envs", "callbacks": "seffi.callbacks"}
#: The core: it imports nothing of the adapters or of the research code.
CORE = (
    "seffi._cache",
    "seffi._convert",
    "seffi._io",
    "seffi._seeding",
    "seffi.coverage",
    "seffi.episodes",
    "seffi.errors",
    "seffi.group_scoring",
    "seffi.labelers",
    "seffi.lanes",
    "seffi.report",
    "seffi.tasks",
)
#: The adapters to training libraries: built on the core, never on the research code.
ADAPTERS = ("seffi.envs", "seffi.callbacks", "seffi.score")
#: The models trained here and the experiments run on them.
RESEARCH = ("seffi.models", "seffi.experiment")
#: The package root and the command line package (every ``seffi.cli.*`` module) sit above everything.
TOP = ("seffi", "seffi.cli")
#: Optional or heavy third-party packages: importing one of them is worth deferring into a function.
HEAVY = frozenset(
    {
        "accelerate",
        "copia",
        "datasets",
        "matplotlib",
        "pandas",
        "pyarrow",
        "ray",
        "safetensors",
        "sb3_contrib",
        "stable_baselines3",
        "tokenizers",
        "torch",
        "transformers",
        "trl",
        "wandb",
    }
)


@dataclass(frozen=True)
class Edge:
    """One import of a seffi module by another."""

    source: str
    target: str
    line: int
    in_function: bool


def _modules(root: Path, trees: dict[str, str]) -> dict[str, Path]:
    """Module name -> file, for every module of the trees."""
    out: dict[str, Path] = {}
    for folder, package in trees.items():
        for path in sorted((root / folder).rglob("*.py")):
            parts = list(path.relative_to(root / folder).with_suffix("").parts)
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


def _imports(node: ast.AST, in_function: bool = False) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import statement that can run, and whether it sits in a function (TYPE_CHECKING skipped)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _is_type_checking(child):
            for stmt in child.orelse:
                yield from _imports(ast.Module(body=[stmt], type_ignores=[]), in_function)
            continue
        if isinstance(child, ast.Import | ast.ImportFrom):
            yield child, in_function
        inner = in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
        yield from _imports(child, inner)


def _known(name: str, modules: dict[str, Path]) -> str | None:
    """``name`` or its longest prefix that is a module of ours."""
    parts = name.split(".")
    for n in range(len(parts), 0, -1):
        candidate = ".".join(parts[:n])
        if candidate in modules:
            return candidate
    return None


@dataclass
class Graph:
    """The parsed sources: edges between seffi modules, and third-party packages imported at module level."""

    edges: list[Edge]
    external: dict[str, set[str]]

    def targets(self, *, function_level: bool = True) -> dict[str, set[str]]:
        """Module -> the modules of ours it imports (module level only unless ``function_level``)."""
        out: dict[str, set[str]] = {m: set() for m in self.external}
        for e in self.edges:
            if function_level or not e.in_function:
                out[e.source].add(e.target)
        return out


def parse(root: Path = ROOT, trees: dict[str, str] = TREES) -> Graph:
    """Parse every module of ``trees`` under ``root``."""
    modules = _modules(root, trees)
    edges: list[Edge] = []
    external: dict[str, set[str]] = {}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        external[name] = set()
        for node, in_function in _imports(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.Import):
                targets = [_canonical(a.name) for a in node.names]
            elif node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
                targets = [
                    f"{source}.{a.name}" if f"{source}.{a.name}" in modules else source for a in node.names
                ]
            else:
                source = _canonical(node.module or "")
                targets = [
                    f"{source}.{a.name}" if f"{source}.{a.name}" in modules else source for a in node.names
                ]
            for target in targets:
                hit = _known(target, modules)
                if hit is not None and hit != name:
                    edges.append(Edge(name, hit, node.lineno, in_function))
                elif hit is None and not in_function and not getattr(node, "level", 0):
                    external[name].add(target.split(".")[0])
    return Graph(edges, external)


def import_graph() -> dict[str, set[str]]:
    """Module -> the modules of ours it imports, function-level imports included."""
    return parse().targets()


def heavy_modules(graph: Graph) -> dict[str, set[str]]:
    """Module -> the `HEAVY` packages importing it pulls in (through its module-level imports)."""
    below = graph.targets(function_level=False)
    out: dict[str, set[str]] = {}

    def visit(m: str, seen: set[str]) -> set[str]:
        if m in out:
            return out[m]
        seen.add(m)
        found = graph.external[m] & HEAVY
        for t in below[m]:
            if t not in seen:
                found = found | visit(t, seen)
        return found

    for m in graph.external:
        out[m] = visit(m, set())
    return out


def function_level_offenders(graph: Graph) -> list[Edge]:
    """Function-level imports of seffi modules that neither the command line nor a heavy import explains."""
    heavy = heavy_modules(graph)
    return [
        e
        for e in graph.edges
        if e.in_function and not e.source.startswith(TOP[1]) and not heavy[e.target] - heavy[e.source]
    ]


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


def _upward(graph: dict[str, set[str]], sources: tuple[str, ...], forbidden: tuple[str, ...]) -> list[str]:
    return sorted(
        f"{src} -> {dst}"
        for src, targets in graph.items()
        if src.startswith(sources)
        for dst in targets
        if dst.startswith(forbidden)
    )


def test_every_module_belongs_to_a_layer() -> None:
    """Each module is in the core, the adapters, the research code or the top: none escapes the checks."""
    loose = sorted(
        m
        for m in import_graph()
        if m not in TOP and not m.startswith((*CORE, *ADAPTERS, *RESEARCH, "seffi.cli."))
    )
    assert not loose, loose


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def test_the_walker_sees_every_kind_of_import(tmp_path: Path) -> None:
    """On a small tree of its own: function-local, relative, aliased and re-exported imports are edges;
    TYPE_CHECKING imports are not; a function-level import is told apart; heaviness is transitive."""
    _write(
        tmp_path,
        {
            "seffi/__init__.py": "",
            "seffi/a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from seffi import c\n"
            "def f():\n    from seffi.b import x\n",
            "seffi/b.py": "import torch\nx = 1\n",
            "seffi/h.py": "from seffi.d import y\ndef f():\n    from seffi.b import x\n",
            "seffi/c.py": "from .d import y\nimport envs.e\n",
            "seffi/d.py": "from seffi.b import x\ny = x\n",
            "seffi/pkg/__init__.py": "from .inner import z\n",
            "seffi/pkg/inner.py": "z = 0\n",
            "seffi/user.py": "from seffi.pkg import z\n",
            "envs/__init__.py": "",
            "envs/e.py": "def g():\n    from seffi import user\n",
        },
    )
    graph = parse(tmp_path, {"seffi": "seffi", "envs": "seffi.envs"})
    edges = {(e.source, e.target, e.in_function) for e in graph.edges}
    assert edges == {
        ("seffi.a", "seffi.b", True),
        ("seffi.c", "seffi.d", False),
        ("seffi.c", "seffi.envs.e", False),
        ("seffi.d", "seffi.b", False),
        ("seffi.pkg", "seffi.pkg.inner", False),
        ("seffi.user", "seffi.pkg", False),
        ("seffi.envs.e", "seffi.user", True),
        ("seffi.h", "seffi.d", False),
        ("seffi.h", "seffi.b", True),
    }
    heavy = heavy_modules(graph)
    assert heavy["seffi.c"] == {"torch"} and heavy["seffi.b"] == {"torch"} and not heavy["seffi.user"]
    # seffi.a defers torch; seffi.h loads torch through seffi.d already; seffi.envs.e defers nothing heavy
    offenders = sorted((e.source, e.target) for e in function_level_offenders(graph))
    assert offenders == [("seffi.envs.e", "seffi.user"), ("seffi.h", "seffi.b")]
    assert _cycles(graph.targets()) == []
    assert _cycles({"p": {"q"}, "q": {"r"}, "r": {"p"}, "s": {"p"}}) == [["p", "q", "r", "p"]]


def test_no_import_cycles() -> None:
    """No import cycle between seffi modules, function-local ones and package re-exports included."""
    cycles = _cycles(import_graph())
    for cycle in cycles:
        print("import cycle: " + " -> ".join(cycle))
    assert not cycles, f"{len(cycles)} import cycle(s): " + "; ".join(" -> ".join(c) for c in cycles)


def test_the_core_never_imports_adapters_or_research_code() -> None:
    """The core (coverage, report, tasks, ...) imports nothing of envs, callbacks, models or experiment."""
    upward = _upward(import_graph(), CORE, (*ADAPTERS, *RESEARCH))
    assert not upward, upward


def test_adapters_never_import_research_code() -> None:
    """``seffi.callbacks`` and ``seffi.envs`` import nothing of ``seffi.models`` or ``seffi.experiment``,
    not even inside a function (the latent-LM env is registered by a string entry point)."""
    upward = _upward(import_graph(), ADAPTERS, RESEARCH)
    assert not upward, upward


def test_function_level_imports_only_defer_heavy_dependencies() -> None:
    """A function-level import of a seffi module is the command line's lazy loading or defers a heavy
    dependency (module docstring)."""
    offenders = sorted(f"{e.source}:{e.line} imports {e.target}" for e in function_level_offenders(parse()))
    assert not offenders, offenders
