from __future__ import annotations

import numpy as np
import pytest

from seffi.tasks import get_task
from seffi.tasks.summary import input_pool, summarize


def test_input_pool_is_seeded_and_distinct():
    task = get_task("grid_routes")
    pool = input_pool(task, 30, seed=4)
    assert [x.id for x in pool] == [x.id for x in input_pool(task, 30, seed=4)]
    assert len({x.id for x in pool}) == len(pool) <= 30
    # Hanoi has only 18 distinct default inputs: the pool shrinks instead of failing.
    assert len(input_pool(get_task("hanoi"), 300, seed=0)) == 18
    with pytest.raises(ValueError):
        input_pool(task, 0)


def test_summary_against_direct_count():
    task = get_task("sort_swaps")
    s = summarize(task, n_inputs=25, seed=2)
    pool = input_pool(task, 25, seed=2)
    sets = [m for x in pool for m in task.reference_match_sets(x).values()]
    assert s.inputs == len(pool)
    assert s.reference_ambiguity == pytest.approx(np.mean([len(m) > 1 for m in sets]))
    # Base ambiguity by brute force over the base modes' traces.
    rng = np.random.default_rng(0)
    manual = []
    for x in pool:
        total = 0.0
        for mode in task.base_modes(x):
            matches = task.validate_y_text(x, task.emit(x, mode, rng)).strategy_matches
            total += mode.probability * (len(matches) > 1)
        manual.append(total)
    assert s.base_ambiguity == pytest.approx(np.mean(manual))
    assert s.mean_feasible == 4.0 and 0 < s.mean_trace_tokens <= s.max_trace_tokens
    assert s.to_dict()["strategies"] == list(task.strategies())


def test_negative_control_is_fully_ambiguous():
    s = summarize(get_task("hanoi"), n_inputs=30, seed=0)
    assert s.reference_ambiguity == 1.0
    cfg = get_task("hanoi").config
    assert s.base_ambiguity == pytest.approx(1 - cfg.off_strategy_rate)
