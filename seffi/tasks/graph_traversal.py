"""Traverse a connected graph: breadth-first, depth-first and best-first (smallest label) orders."""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import Field

from seffi.tasks._steps import Answer, Step, StepTask
from seffi.tasks.base import TaskConfig, TaskInput, Vocabulary, register_task

_MAX_ORDERS = 400  # search orders enumerated for off-strategy traces


class GraphTraversalConfig(TaskConfig):
    """A random spanning tree on ``min_nodes..max_nodes`` nodes plus ``extra_edges``."""

    min_nodes: int = Field(5, ge=3, le=9)
    max_nodes: int = Field(6, ge=3, le=9)
    extra_edges: int = Field(2, ge=0, le=20)

    ordered_fields = (("min_nodes", "max_nodes"),)


class GraphTraversalInput(TaskInput):
    """Visit every node of the undirected graph ``edges`` (pairs ``u < v``) starting at ``start``."""

    n_nodes: int
    start: int
    edges: tuple[tuple[int, int], ...]


def _adjacency(x: GraphTraversalInput) -> list[list[int]]:
    adj: list[list[int]] = [[] for _ in range(x.n_nodes)]
    for u, v in x.edges:
        adj[u].append(v)
        adj[v].append(u)
    return [sorted(a) for a in adj]


def _bfs(adj: list[list[int]], start: int) -> list[int]:
    order = [start]
    for u in order:  # the list grows as it is read: discovery order is visit order
        order += [v for v in adj[u] if v not in order]
    return order


def _dfs(adj: list[list[int]], u: int, order: list[int] | None = None) -> list[int]:
    order = [] if order is None else order
    order.append(u)
    for v in adj[u]:
        if v not in order:
            _dfs(adj, v, order)
    return order


def _best_first(adj: list[list[int]], start: int) -> list[int]:
    order = [start]
    while frontier := [v for u in order for v in adj[u] if v not in order]:
        order.append(min(frontier))
    return order


_PROCEDURES = {"bfs": _bfs, "dfs": _dfs, "best_first": _best_first}


@register_task
class GraphTraversal(StepTask[GraphTraversalInput, GraphTraversalConfig]):
    """Graph search orders with a fixed smallest-label tie-break."""

    name = "graph_traversal"
    strategy_names = tuple(_PROCEDURES)
    command = ("visit", 1)
    step_format = "visit <node>"
    answer_format = "answer <number of nodes visited>"

    def _draw(self, rng: np.random.Generator) -> dict[str, Any]:
        cfg = self.config
        n = int(rng.integers(cfg.min_nodes, cfg.max_nodes + 1))
        label = rng.permutation(n)
        edges = {tuple(sorted((int(label[v]), int(label[rng.integers(v)])))) for v in range(1, n)}
        missing = [(u, v) for u in range(n) for v in range(u + 1, n) if (u, v) not in edges]
        k = min(cfg.extra_edges, len(missing))
        for i in rng.choice(len(missing), size=k, replace=False) if k else ():
            edges.add(missing[int(i)])
        return {"n_nodes": n, "start": int(rng.integers(n)), "edges": tuple(sorted(edges))}

    def prompt(self, x: GraphTraversalInput) -> str:
        pairs = " ".join(f"{u} {v}" for u, v in x.edges)
        return f"graph {x.n_nodes} start {x.start} edges {pairs}"

    def vocabulary(self) -> Vocabulary:
        return Vocabulary(
            ("graph", "start", "edges", "visit", "answer", *map(str, range(self.config.max_nodes + 2)))
        )

    def _strategy_steps(self, x: GraphTraversalInput, strategy: str) -> list[Step] | None:
        return [("visit", v) for v in _PROCEDURES[strategy](_adjacency(x), x.start)]

    def _check(self, x: GraphTraversalInput, steps: list[Step]) -> str | None:
        adj = _adjacency(x)
        seen: set[int] = set()
        for k, (_, v) in enumerate(steps, 1):
            if v >= x.n_nodes:
                return f"step {k}: there is no node {v}"
            if v in seen:
                return f"step {k}: node {v} was already visited"
            if not seen and v != x.start:
                return f"the first visit must be the start node {x.start}"
            if seen and not any(u in seen for u in adj[v]):
                return f"step {k}: node {v} is not adjacent to a visited node"
            seen.add(v)
        if len(seen) != x.n_nodes:
            return f"visited {len(seen)} of {x.n_nodes} nodes"
        return None

    def _wrong_answer(self, x: GraphTraversalInput, steps: list[Step], rng: np.random.Generator) -> Answer:
        return (len(steps) + int(rng.choice([-1, 1])),)

    def _max_steps(self, x: GraphTraversalInput) -> int:
        return x.n_nodes + 1

    def _off_candidates(self, x: GraphTraversalInput) -> list[list[Step]]:
        # Every valid search order, depth-first in label order, capped.
        adj = _adjacency(x)
        orders: list[list[int]] = []

        def extend(order: list[int]) -> None:
            if len(orders) >= _MAX_ORDERS:
                return
            if len(order) == x.n_nodes:  # complete: no node is left to extend it with
                orders.append(order)
            for v in sorted({v for u in order for v in adj[u]} - set(order)):
                extend([*order, v])

        extend([x.start])
        return [[("visit", v) for v in o] for o in orders]
