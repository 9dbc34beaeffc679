"""Infeasible strategies and the base law's missing mass are named."""

from __future__ import annotations

import pytest

from seffi.tasks import get_task
from seffi.tasks.summary import collect


def test_base_remainder_names_the_missing_mass() -> None:
    """base_distribution sums to 0.85; the rest is 0.10 invalid + 0.05 off-strategy."""
    task = get_task("coin_sum")
    for x in task.make_inputs(5, seed=0):
        on = sum(task.base_distribution(x).values())
        rest = task.base_remainder(x)
        assert on == pytest.approx(0.85)
        assert rest == pytest.approx({"invalid": 0.10, "off_strategy": 0.05})
        assert on + sum(rest.values()) == pytest.approx(1.0)


def test_seffi_tasks_reports_feasible_range_and_base_mass(capsys: pytest.CaptureFixture[str]) -> None:
    """coin_sum has 3.85 feasible strategies per input on average, 3 to 4."""
    (s,) = collect(["coin_sum"], pool=200, seed=0)
    assert round(s.mean_feasible, 2) == 3.85 and (s.min_feasible, s.max_feasible) == (3, 4)
    assert (s.base_strategy_mass, s.base_invalid, s.base_off_strategy) == pytest.approx((0.85, 0.10, 0.05))
    from seffi.cli import main

    assert main(["tasks", "coin_sum"]) == 0
    out = capsys.readouterr().out
    assert "3.85 [3, 4]" in out and "0.85 / 0.10 / 0.05" in out and "F(K) < 1" in out
