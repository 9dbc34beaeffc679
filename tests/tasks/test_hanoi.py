from __future__ import annotations

import pytest

from seffi.tasks import get_task


@pytest.fixture(scope="module")
def task():
    return get_task("hanoi")


def test_negative_control_every_reference_matches_every_strategy(task):
    for x in task.make_inputs(12, seed=0):
        sets = task.reference_match_sets(x)
        assert set(sets) == set(task.strategies())
        assert all(m == frozenset(task.strategies()) for m in sets.values())
        assert task.base_match_distribution(x, valid_only=True)[
            frozenset(task.strategies())
        ] == pytest.approx(1 - task.config.invalid_rate - task.config.off_strategy_rate)


def test_hand_computed_two_disks(task):
    x = task.make_input(n_disks=2, source=0, target=2)
    assert task.solve(x, "iterative") == "move 1 0 1\nmove 2 0 2\nmove 1 1 2\nanswer 3"


def test_non_ascii_digits_and_huge_numbers_are_unparsable(task):
    x = task.make_input(n_disks=2, source=0, target=2)
    for text in ("move \u00b2 0 1\nanswer 1", "move 1 0 1\nmove 2 0 2\nmove 1 1 2\nanswer " + "3" * 5000):
        r = task.validate_y_text(x, text)
        assert not r.parse_ok and not r.error.startswith("internal")
