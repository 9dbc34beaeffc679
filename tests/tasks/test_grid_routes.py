from __future__ import annotations

import pytest

from seffi.tasks import get_task
from tests.tasks.checks import assert_illegal


@pytest.fixture(scope="module")
def task():
    return get_task("grid_routes")


def moves(task, x, s):
    trace = task.solve(x, s)
    return None if trace is None else trace.split("\n")[:-1]


def test_open_grid(task):
    x = task.make_input(rows=3, cols=3, walls=())
    assert moves(task, x, "right_first") == ["right", "right", "down", "down"]
    assert moves(task, x, "down_first") == ["down", "down", "right", "right"]
    assert moves(task, x, "staircase") == ["right", "down", "right", "down"]
    assert moves(task, x, "wall_following") == moves(task, x, "right_first")
    assert task.solve(x, "staircase").endswith("answer 2 2")
    assert task.reference_match_sets(x)["right_first"] == {"right_first", "wall_following"}


def test_walls_block_families(task):
    x = task.make_input(rows=3, cols=3, walls=((0, 1),))
    assert task.solve(x, "right_first") is None and task.solve(x, "staircase") is None
    assert moves(task, x, "wall_following") == ["down", "right", "right", "down"]
    assert task.feasible_strategies(x) == ("down_first", "wall_following")
    dist = task.base_distribution(x)
    assert dist["right_first"] == dist["staircase"] == 0.0 and dist["down_first"] > 0
    # wall_following gets stuck in a dead end: right along row 0 to (0,1), (0,2)... blocked below.
    y = task.make_input(rows=3, cols=3, walls=((1, 2), (1, 1)))
    assert task.solve(y, "wall_following") is None


def test_routes(task):
    x = task.make_input(rows=3, cols=3, walls=((1, 1),))
    r = task.validate_y_text(x, "down\nup\nright\nright\ndown\ndown\nanswer 2 2")
    assert r.valid and not r.strategy_matches  # a detour is correct but off-strategy
    assert_illegal(
        task,
        x,
        {
            "up\nanswer 2 2": "leaves the grid",
            "down\nright\nanswer 2 2": "wall",
            "right\nright\nanswer 2 2": "not at the goal",
        },
    )
    r = task.validate_y_text(x, "right\nright\ndown\ndown\nanswer 2 1")
    assert r.parse_ok and not r.valid and r.strategy_matches == {"right_first", "wall_following"}
    assert not task.validate_y_text(x, "right right\nanswer 2 2").parse_ok
