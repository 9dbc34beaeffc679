from __future__ import annotations

import itertools

import pytest

from seffi.tasks import get_task
from tests.tasks.checks import assert_illegal


@pytest.fixture(scope="module")
def task():
    return get_task("graph_traversal")


def graph(task, n, start, edges):
    return task.make_input(n_nodes=n, start=start, edges=tuple(sorted(edges)))


def test_hand_computed_orders(task):
    # 0 - 1 - 3 and 0 - 2: BFS 0 1 2 3; DFS 0 1 3 2; best-first by label 0 1 2 3 (= BFS).
    x = graph(task, 4, 0, [(0, 1), (0, 2), (1, 3)])
    body = {s: [ln.split()[1] for ln in task.solve(x, s).split("\n")[:-1]] for s in task.strategies()}
    assert body == {"bfs": list("0123"), "dfs": list("0132"), "best_first": list("0123")}
    assert task.solve(x, "bfs").endswith("\nanswer 4")
    assert task.reference_match_sets(x) == {
        "bfs": frozenset({"bfs", "best_first"}),
        "dfs": frozenset({"dfs"}),
        "best_first": frozenset({"bfs", "best_first"}),
    }
    # Best-first differs from BFS when a small label hangs off a later node: 0-3, 0-4, 3-1.
    y = graph(task, 5, 0, [(0, 3), (0, 4), (1, 3), (2, 4)])
    assert task.solve(y, "best_first").split("\n")[:-1] == [f"visit {v}" for v in (0, 3, 1, 4, 2)]
    assert task.solve(y, "bfs").split("\n")[:-1] == [f"visit {v}" for v in (0, 3, 4, 1, 2)]
    assert task.solve(y, "dfs").split("\n")[:-1] == [f"visit {v}" for v in (0, 3, 1, 4, 2)]


def test_illegal_orders(task):
    x = graph(task, 4, 0, [(0, 1), (0, 2), (1, 3)])
    assert_illegal(
        task,
        x,
        {
            "visit 1\nvisit 0\nvisit 2\nvisit 3\nanswer 4": "start",
            "visit 0\nvisit 3\nvisit 1\nvisit 2\nanswer 4": "adjacent",
            "visit 0\nvisit 1\nvisit 1\nvisit 2\nanswer 4": "already",
            "visit 0\nvisit 1\nvisit 2\nanswer 3": "visited 3 of 4",
            "visit 0\nvisit 9\nanswer 2": "no node",
        },
    )
    r = task.validate_y_text(x, "visit 0\nvisit 2\nvisit 1\nvisit 3\nanswer 4")
    assert r.valid and not r.strategy_matches  # a legal search order no strategy produces


def test_off_strategy_orders_are_exactly_the_other_search_orders(task):
    # Brute force: every permutation that is a legal search order and is no strategy's order.
    for x in task.make_inputs(8, seed=3):
        adj = {v: set() for v in range(x.n_nodes)}
        for u, v in x.edges:
            adj[u].add(v)
            adj[v].add(u)
        legal = [
            p
            for p in itertools.permutations(range(x.n_nodes))
            if p[0] == x.start and all(adj[p[i]] & set(p[:i]) for i in range(1, len(p)))
        ]
        refs = {tuple(s[1] for s in task.steps(x, k)) for k in task.strategies()}
        off = {tuple(s[1] for s in steps) for steps in task.off_strategy_steps(x)}
        assert refs <= set(legal)
        assert off == set(legal) - refs
