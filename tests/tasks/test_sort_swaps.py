from __future__ import annotations

import itertools

import numpy as np
import pytest

from seffi.tasks import get_task
from tests.tasks.checks import assert_illegal


@pytest.fixture(scope="module")
def task():
    return get_task("sort_swaps")


def matches(task, values, text):
    x = task.make_input(values=tuple(values))
    return task.validate_y_text(x, text)


def test_hand_computed_traces(task):
    x = task.make_input(values=(2, 3, 1))
    # bubble: pass 1 swaps (1,2) -> 2 1 3, pass 2 swaps (0,1); insertion and odd-even do the same.
    for s in ("bubble", "insertion", "odd_even"):
        assert task.solve(x, s) == "swap 1 2\nswap 0 1\nanswer 1 2 3"
    # selection brings the minimum (position 2) to the front, then fixes position 1.
    assert task.solve(x, "selection") == "swap 0 2\nswap 1 2\nanswer 1 2 3"
    assert task.reference_match_sets(x) == {
        "bubble": frozenset({"bubble", "insertion", "odd_even"}),
        "insertion": frozenset({"bubble", "insertion", "odd_even"}),
        "odd_even": frozenset({"bubble", "insertion", "odd_even"}),
        "selection": frozenset({"selection"}),
    }
    # 3 1 2: every procedure makes the same two adjacent swaps -> one trace matching all four.
    y = task.make_input(values=(3, 1, 2))
    assert task.validate_y_text(y, "swap 0 1\nswap 1 2\nanswer 1 2 3").strategy_matches == frozenset(
        task.strategies()
    )


def test_swap_operands_are_unordered(task):
    x = task.make_input(values=(2, 3, 1))
    r = task.validate_y_text(x, "swap 2 0\nswap 2 1\nanswer 1 2 3")
    assert r.valid and r.strategy_matches == {"selection"}


def test_illegal_and_wrong_traces(task):
    x = task.make_input(values=(2, 3, 1))
    assert_illegal(
        task,
        x,
        {
            "swap 1 1\nanswer 1 2 3": "distinct",
            "swap 0 7\nanswer 1 2 3": "below 3",
            "swap 0 1\nanswer 1 2 3": "not sorted",
        },
    )
    r = task.validate_y_text(x, "swap 1 2\nswap 0 1\nanswer 1 3 2")
    assert not r.valid and r.strategy_matches == {"bubble", "insertion", "odd_even"}
    assert not task.validate_y_text(x, "swap 1 2\nswap 0 1\nanswer 1 2").parse_ok
    assert not task.validate_y_text(x, "swap 1\nanswer 1 2 3").parse_ok


def test_procedures_against_brute_force_invariants():
    # Independent facts: adjacent-swap sorts make exactly inv(a) swaps; selection at most n - 1;
    # every procedure sorts every permutation.
    task = get_task("sort_swaps")
    for perm in itertools.permutations(range(5)):
        x = task.make_input(values=perm)
        inversions = sum(perm[i] > perm[j] for i in range(5) for j in range(i + 1, 5))
        for s in task.strategies():
            steps = task.steps(x, s)
            assert task.validate_y_text(x, task.solve(x, s)).valid
            if s == "selection":
                assert len(steps) <= 4
            else:
                assert len(steps) == inversions and all(j == i + 1 for _, i, j in steps)


def test_config_validation():
    with pytest.raises(ValueError):
        get_task("sort_swaps", min_length=5, max_length=4)
    with pytest.raises(ValueError):
        get_task("sort_swaps", max_length=8, max_value=5)
    with pytest.raises(ValueError):
        get_task("sort_swaps", nonsense=1)
    task = get_task("sort_swaps", min_length=6, max_length=6)
    assert {len(x.values) for x in task.make_inputs(10, seed=0)} == {6}


def test_ambiguity_is_natural_and_tunable():
    # Short lists leave the adjacent-swap procedures fewer ways to differ.
    def rate(n):
        task = get_task("sort_swaps", min_length=n, max_length=n)
        sets = [m for x in task.make_inputs(60, seed=1) for m in task.reference_match_sets(x).values()]
        return np.mean([len(m) > 1 for m in sets])

    assert rate(3) > rate(6) > 0
