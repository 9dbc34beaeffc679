"""Per-input metric state declared with ``add_state``: it grows with the inputs and strategies a
user's loop brings, in any order."""

from __future__ import annotations

import numpy as np

from seffi.coverage import CoverageTracker


def test_a_strategy_first_seen_after_many_inputs_keeps_every_count() -> None:
    """A free-form tracker (strategies named as they appear) fed by a plain loop: 40 inputs, then a
    strategy none of them matched before. Every per-input strategy count stays the hand count."""
    rng = np.random.default_rng(2)
    t = CoverageTracker(None)
    want: dict[tuple[str, str], int] = {}
    calls = [(f"x{i}", "p") for i in range(40)] + [("x3", "q"), ("x7", "r"), ("x3", "q"), ("x41", "p")]
    calls += [(f"x{rng.integers(45)}", str(rng.choice(list("pqrs")))) for _ in range(200)]
    for x, s in calls:
        t.update(x, {s}, num_strategies=4, stream=int(rng.integers(3)))
        want[(x, s)] = want.get((x, s), 0) + 1
    (metric,) = t.metrics
    counts = metric.rows("counts")
    got = {
        (key[1], col): int(counts[u, j]) for u, key in enumerate(t.keys) for j, col in enumerate(t.columns)
    }
    assert {k: v for k, v in got.items() if v} == want
