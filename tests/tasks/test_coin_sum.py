from __future__ import annotations

import pytest

from seffi.tasks import get_task
from tests.tasks.checks import assert_illegal


@pytest.fixture(scope="module")
def task():
    return get_task("coin_sum")


def test_non_canonical_coins_pull_greedy_apart(task):
    x = task.make_input(coins=(1, 3, 4), target=6)
    assert task.solve(x, "greedy") == "take 4 1\ntake 1 2\nanswer 3"
    for s in ("min_coin", "ascending", "fewest_denominations"):
        assert task.solve(x, s) == "take 3 2\nanswer 2"
    assert task.reference_match_sets(x)["greedy"] == {"greedy"}
    assert task.reference_match_sets(x)["min_coin"] == {"min_coin", "ascending", "fewest_denominations"}


def test_each_strategy_hand_computed(task):
    # 1 2 5, target 12: greedy 5 5 2 is optimal; ascending avoids 1s and 2s: 12 = 2*1 + 5*2 -> "take 2 1
    # take 5 2" ascending; fewest denominations: 2 x6 (one denomination).
    x = task.make_input(coins=(1, 2, 5), target=12)
    assert task.solve(x, "greedy") == task.solve(x, "min_coin") == "take 5 2\ntake 2 1\nanswer 3"
    assert task.solve(x, "ascending") == "take 2 1\ntake 5 2\nanswer 3"
    assert task.solve(x, "fewest_denominations") == "take 2 6\nanswer 6"


def test_greedy_infeasible_without_small_coins(task):
    x = task.make_input(coins=(3, 5), target=9)  # greedy: 5, then 3, then 1 left -> stuck
    assert task.solve(x, "greedy") is None
    assert task.solve(x, "min_coin") == "take 3 3\nanswer 3"
    assert task.base_distribution(x)["greedy"] == 0.0


def test_min_coin_is_optimal_against_dynamic_programming(task):
    for x in task.make_inputs(40, seed=2):
        best = [0] + [10**9] * x.target
        for v in range(1, x.target + 1):
            best[v] = min([best[v - c] + 1 for c in x.coins if c <= v] + [10**9])
        steps = task.steps(x, "min_coin")
        assert sum(k for _, _, k in steps) == best[x.target]
        greedy = task.steps(x, "greedy")
        if greedy is not None:
            assert sum(k for _, _, k in greedy) >= best[x.target]


def test_illegal_payments(task):
    x = task.make_input(coins=(1, 3, 4), target=6)
    assert_illegal(
        task,
        x,
        {
            "take 2 3\nanswer 3": "no coin 2",
            "take 3 0\ntake 4 1\ntake 1 2\nanswer 3": "at least one",
            "take 4 1\nanswer 1": "sum to 4",
        },
    )
    r = task.validate_y_text(x, "take 1 2\ntake 4 1\nanswer 3")  # right coins, unusual order
    assert r.valid and not r.strategy_matches
    r = task.validate_y_text(x, "take 3 2\nanswer 3")
    assert not r.valid and r.strategy_matches == {"min_coin", "ascending", "fewest_denominations"}
