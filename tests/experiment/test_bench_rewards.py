"""The advantage rules and the surface reward of `seffi.experiment.bench_rewards`, on hand-computed groups."""

from __future__ import annotations

import numpy as np
import pytest

from seffi.errors import SeffiError
from seffi.experiment.bench_rewards import (
    ADVANTAGE_METHODS,
    batch_advantages,
    cluster_sizes,
    surface_rewards,
    uarl_advantages,
    ucpo_advantages,
    w_reinforce_advantages,
)

#: One prompt's group: clusters {a} x 2, {b}, {} (the invalid one); GRPO advantages of rewards 1, 1, 1, 0.
GROUP = [("x", ("a",), True), ("x", ("a",), True), ("x", ("b",), True), ("x", (), False)]
BASE = [0.5, 0.5, 0.5, -1.5]


def test_cluster_sizes_count_every_completion_with_the_same_match_set() -> None:
    """Sizes over the whole group, invalid completions and the empty set included."""
    group = [*GROUP, ("x", ("a",), False), ("x", (), True)]
    np.testing.assert_array_equal(cluster_sizes(group), [3, 3, 1, 2, 3, 2])


def test_uarl_divides_each_advantage_by_its_cluster_size() -> None:
    """{a} shared by two: half the advantage each; {b} and the lone invalid completion keep theirs."""
    assert uarl_advantages(GROUP, BASE) == pytest.approx([0.25, 0.25, 0.5, -1.5])
    assert uarl_advantages([], []) == []
    with pytest.raises(SeffiError, match="3 advantages for a group of 4"):
        uarl_advantages(GROUP, BASE[:3])
    with pytest.raises(SeffiError, match="finite"):
        uarl_advantages(GROUP, [0.5, float("nan"), 0.5, -1.5])


def test_ucpo_spreads_the_valid_advantage_toward_the_less_likely_correct_answers() -> None:
    """q over the 3 valid completions = (1/2, 1/4, 1/4): 1/q = (2, 4, 4), w = (0.2, 0.4, 0.4); at
    tau = 0.2 the factors are 0.8 + 0.2 * 3 * w = (0.92, 1.04, 1.04); the invalid completion keeps -1.5."""
    lp = [np.log(0.5), np.log(0.25), np.log(0.25), -9.0]
    got = ucpo_advantages(GROUP, BASE, lp, tau=0.2)
    assert got == pytest.approx([0.46, 0.52, 0.52, -1.5])
    assert sum(got[:3]) == pytest.approx(1.5)  # the valid completions' total is kept
    # A shift of every log-probability leaves q alone; tau = 1 is the full inverse-q weighting.
    assert ucpo_advantages(GROUP, BASE, [v - 3.0 for v in lp], tau=0.2) == pytest.approx(got)
    assert ucpo_advantages(GROUP, BASE, lp, tau=1.0) == pytest.approx([0.3, 0.6, 0.6, -1.5])
    assert ucpo_advantages(GROUP, BASE, lp, tau=0.0) == pytest.approx(BASE)
    one_valid = [("x", ("a",), True), ("x", (), False)]
    assert ucpo_advantages(one_valid, [0.7, -0.7], [-1.0, -2.0]) == pytest.approx([0.7, -0.7])
    with pytest.raises(SeffiError, match="tau"):
        ucpo_advantages(GROUP, BASE, lp, tau=1.5)
    with pytest.raises(SeffiError, match="log-probability"):
        ucpo_advantages(GROUP, BASE, lp[:3])


def test_w_reinforce_is_lambda_for_a_valid_completion_and_minus_one_otherwise() -> None:
    """No baseline: the values do not depend on the rest of the group."""
    assert w_reinforce_advantages(GROUP) == pytest.approx([0.1, 0.1, 0.1, -1.0])
    assert w_reinforce_advantages(GROUP[3:], weight=0.3) == [-1.0]
    assert w_reinforce_advantages(GROUP[:1], weight=0.3) == [0.3]
    with pytest.raises(SeffiError, match="weight"):
        w_reinforce_advantages(GROUP, weight=-0.1)


def test_surface_reward_is_validity_with_the_surface_bonus() -> None:
    """r = valid ((1 - w) + w b): 0.5 + 0.5 * 0.2, 0.5 + 0.5 * 0.6, and 0 for the invalid completion."""
    group = [("x", ("a",), True), ("x", ("a",), True), ("x", ("b",), False)]
    assert surface_rewards(group, [0.2, 0.6, 1.0], 0.5) == pytest.approx([0.6, 0.8, 0.0])
    assert surface_rewards(group, [0.2, 0.6, 1.0], 0.0) == pytest.approx([1.0, 1.0, 0.0])
    with pytest.raises(SeffiError, match="bonus"):
        surface_rewards(group, [0.2, 1.6, 1.0])


def test_batch_advantages_apply_each_rule_group_by_group() -> None:
    """Two prompts x G = 4: each group gets its own rule's values, in record order."""
    other = [("y", ("b",), True), ("y", ("b",), False), ("y", ("b",), True), ("y", ("c",), True)]
    records, base = GROUP + other, [*BASE, 0.3, -0.9, 0.3, 0.3]
    got = batch_advantages("uarl", records, 4, base)
    assert got == pytest.approx([0.25, 0.25, 0.5, -1.5, 0.1, -0.3, 0.1, 0.3])
    assert batch_advantages("w_reinforce", records, 4, base, weight=0.2) == [0.2] * 3 + [-1.0] + [
        0.2,
        -1.0,
        0.2,
        0.2,
    ]
    lp = [np.log(0.5), np.log(0.25), np.log(0.25), -9.0, -1.0, -5.0, -1.0, -1.0]
    got = batch_advantages("ucpo", records, 4, base, logprobs=lp, tau=0.2)
    assert got[:4] == pytest.approx([0.46, 0.52, 0.52, -1.5])
    assert got[4:] == pytest.approx([0.3, -0.9, 0.3, 0.3])  # equal q: uniform already, nothing moves
    assert set(ADVANTAGE_METHODS) == {"uarl", "ucpo", "w_reinforce"}


def test_batch_advantages_reject_unknown_rules_options_and_missing_inputs() -> None:
    with pytest.raises(SeffiError, match="unknown advantage method 'nope'"):
        batch_advantages("nope", GROUP, 4, BASE)
    with pytest.raises(SeffiError, match="takes options"):
        batch_advantages("uarl", GROUP, 4, BASE, weight=0.1)
    with pytest.raises(SeffiError, match="needs one log-probability"):
        batch_advantages("ucpo", GROUP, 4, BASE)
    with pytest.raises(SeffiError, match="3 advantages for a batch of 4"):
        batch_advantages("uarl", GROUP, 4, BASE[:3])
