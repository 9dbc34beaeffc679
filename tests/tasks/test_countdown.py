from __future__ import annotations

import pytest

from seffi.tasks import get_task
from tests.tasks.checks import assert_illegal


@pytest.fixture(scope="module")
def task():
    return get_task("countdown")


def test_hand_computed_shapes(task):
    x = task.make_input(numbers=(1, 2, 3, 4), target=24)
    # Operators are tried in the order + - * /, numbers in prompt order: (1 + 2 + 3) * 4 comes first.
    assert task.solve(x, "chain") == "1 + 2 = 3\n3 + 3 = 6\n4 * 6 = 24\nanswer 24"
    assert task.solve(x, "multiply_first") == "1 * 2 = 2\n2 * 3 = 6\n4 * 6 = 24\nanswer 24"
    assert task.solve(x, "largest_first") == "3 * 4 = 12\n2 * 12 = 24\n1 * 24 = 24\nanswer 24"
    assert task.solve(x, "pairwise") == "1 * 2 = 2\n3 * 4 = 12\n2 * 12 = 24\nanswer 24"


def test_commutative_operands_are_canonicalised(task):
    x = task.make_input(numbers=(1, 2, 3, 4), target=24)
    swapped = "2 + 1 = 3\n3 + 3 = 6\n6 * 4 = 24\nanswer 24"
    r = task.validate_y_text(x, swapped)
    assert r.valid and r.strategy_matches == {"chain"}
    # Subtraction is not commutative: 6 - 3 and 3 - 6 are different steps (the latter is illegal).
    y = task.make_input(numbers=(6, 3, 2, 5), target=5)
    assert not task.validate_y_text(y, "3 - 6 = 3\n3 - 2 = 1\n1 * 5 = 5\nanswer 5").valid


def test_ambiguity_when_the_first_chain_multiplies_first(task):
    x = task.make_input(numbers=(2, 3, 4, 1), target=24)
    # chain: ((2+3)... never 24 before (2*3)*4*1 = 24 with ops * * *? (2+3+4)... check against references.
    sets = task.reference_match_sets(x)
    for s, m in sets.items():
        assert s in m
        assert all(task.solve(x, o) == task.solve(x, s) for o in m)
    assert any(len(m) > 1 for m in sets.values())


def test_rules(task):
    x = task.make_input(numbers=(1, 2, 3, 4), target=24)
    assert_illegal(
        task,
        x,
        {
            "5 + 1 = 6\n6 * 4 = 24\nanswer 24": "not both available",
            "1 + 2 = 4\n4 + 3 = 7\nanswer 24": "is 3, not 4",
            "1 / 2 = 0\nanswer 24": "positive integer",
            "1 + 2 = 3\n3 * 4 = 12\nanswer 24": "use every number",
            "2 - 2 = 0\nanswer 24": "not both available",
        },
    )
    r = task.validate_y_text(x, "3 - 1 = 2\n2 * 4 = 8\n8 * 2 = 16\nanswer 24")
    assert not r.valid and "leave [16]" in r.error
    r = task.validate_y_text(x, "4 - 1 = 3\n3 * 2 = 6\n6 * 3 = 18\nanswer 18")
    assert not r.valid
    r = task.validate_y_text(x, "4 - 2 = 2\n1 + 2 = 3\n3 ^ 3 = 27\nanswer 24")
    assert not r.parse_ok


def test_every_off_strategy_candidate_is_a_legal_solution(task):
    for x in task.make_inputs(5, seed=4):
        for steps in task.off_strategy_steps(x):
            assert steps[-1][-1] == x.target and len(steps) == len(x.numbers) - 1


def test_five_numbers():
    task = get_task("countdown", n_numbers=5, max_value=80)
    x = task.make_inputs(1, seed=0)[0]
    assert len(x.numbers) == 5
    for s in task.feasible_strategies(x):
        assert task.validate_y_text(x, task.solve(x, s)).valid
