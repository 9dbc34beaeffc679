"""Group scoring (`seffi.group_scoring`): every reward rule against hand-computed groups and brute force."""

from __future__ import annotations

import itertools
import math
import subprocess
import sys

import numpy as np
import pytest

from seffi.errors import SeffiError
from seffi.group_scoring import (
    METHODS,
    OutcomeCounts,
    ascending_ranks,
    batch_penalty_rewards,
    batch_rewards,
    diversity_rewards,
    historical_bonus,
    passk_advantages,
    reward_function,
    split_groups,
    unlikeliness_rewards,
)


def test_diversity_reward_formula_and_group_permutations() -> None:
    """r_i = valid_i ((1-w) + w [A_i != {}] / c_i); a permuted group's rewards move along."""
    group = [
        ("x", ("a",), True),
        ("x", ("a",), True),
        ("x", ("b",), True),
        ("x", ("a", "b"), True),
        ("x", ("b",), False),  # invalid: 0, and it does not count in c
        ("x", (), True),  # valid but off-strategy: no diversity bonus
        ("x", ("a",), True),
        ("x", ("b",), True),
    ]
    got = diversity_rewards(group, weight=0.5)
    assert got == pytest.approx([0.5 + 0.5 / 3, 0.5 + 0.5 / 3, 0.75, 1.0, 0.0, 0.5, 0.5 + 0.5 / 3, 0.75])
    assert diversity_rewards(group, weight=0.0) == [1, 1, 1, 1, 0, 1, 1, 1]  # w = 0: plain validity
    rng = np.random.default_rng(0)
    for _ in range(50):
        perm = rng.permutation(len(group))
        permuted = diversity_rewards([group[i] for i in perm], weight=0.5)
        assert permuted == pytest.approx([got[i] for i in perm])
    with pytest.raises(SeffiError, match="diversity weight"):
        diversity_rewards(group, weight=1.5)
    assert reward_function("diversity") is None
    with pytest.raises(SeffiError, match="reward must be one of"):
        reward_function("nope")


def test_groups_are_consecutive_runs_cut_at_the_group_size() -> None:
    """A batch's groups (one prompt twice in a row makes two groups of G)."""
    recs = [("p", (), True)] * 4 + [("q", (), True)] * 2 + [("p", (), True)] * 2
    assert split_groups(recs, 2) == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert split_groups(recs, None) == [[0, 1, 2, 3], [4, 5], [6, 7]]
    batch = [("p", ("a",), True), ("p", ("a",), True), ("q", ("a",), True), ("q", ("b",), True)]
    # groups never mix prompts
    assert batch_rewards("diversity", batch, 2, weight=1.0) == [0.5, 0.5, 1.0, 1.0]


def group_of(valid: list[bool], outcomes: list[tuple[str, ...]] | None = None, x: str = "x") -> list:
    """Records of one prompt: (input id, match set, valid)."""
    outcomes = outcomes or [("a",)] * len(valid)
    return [(x, o, v) for o, v in zip(outcomes, valid, strict=True)]


# -- unlikeliness ----------------------------------------------------------------------------------------


def test_unlikeliness_reward_ranks_the_group_by_log_probability() -> None:
    group = group_of([True, True, False, True])
    # ascending log-prob: -3.0 (#1) u=0, -2.0 (#2) u=1, -1.0 (#0) u=2, -0.5 (#3) u=3; G = 4, beta = 0.5
    # #0: 1 - 0.5*2/4 = 0.75; #1: 1 - 0 = 1; #2 invalid: 0; #3: 1 - 0.5*3/4 = 0.625
    got = unlikeliness_rewards(group, [-1.0, -3.0, -2.0, -0.5], beta=0.5)
    assert got == pytest.approx([0.75, 1.0, 0.0, 0.625])
    # beta = 0 is the validity reward; beta = 1: the most likely valid one gets 1 - 3/4 = 0.25
    assert unlikeliness_rewards(group, [-1.0, -3.0, -2.0, -0.5], beta=0.0) == [1.0, 1.0, 0.0, 1.0]
    assert unlikeliness_rewards(group, [-1.0, -3.0, -2.0, -0.5], beta=1.0)[3] == pytest.approx(0.25)
    # the paper's default rank penalty 0.25: #0 gets 1 - 0.25*2/4 = 0.875
    assert unlikeliness_rewards(group, [-1.0, -3.0, -2.0, -0.5])[0] == pytest.approx(0.875)
    assert unlikeliness_rewards([], []) == []


def test_unlikeliness_ties_share_the_mean_rank_whatever_the_record_order() -> None:
    # ascending: -2 (#2) u=0, the two -1 share u=(1+2)/2=1.5, -0.5 (#3) u=3; beta = 0.5, G = 4
    # #0, #1: 1 - 0.5*1.5/4 = 0.8125; #2: 1; #3: 1 - 0.5*3/4 = 0.625
    group = group_of([True] * 4)
    assert unlikeliness_rewards(group, [-1.0, -1.0, -2.0, -0.5], beta=0.5) == pytest.approx(
        [0.8125, 0.8125, 1.0, 0.625]
    )
    assert ascending_ranks([-1.0, -np.inf, -1.0, -1.0]).tolist() == [2.0, 0.0, 2.0, 2.0]
    # two completions with identical (match set, validity, log-prob) get identical rewards in any order
    lp = [-1.0, -1.0, -2.0, -0.5]
    for perm in itertools.permutations(range(4)):
        got = unlikeliness_rewards([group[i] for i in perm], [lp[i] for i in perm], beta=0.5)
        assert got == pytest.approx([[0.8125, 0.8125, 1.0, 0.625][i] for i in perm])


def test_unlikeliness_rejects_bad_arguments_with_readable_messages() -> None:
    group = group_of([True, False])
    with pytest.raises(SeffiError, match=r"beta must be in \[0, 1\], got 1.5"):
        unlikeliness_rewards(group, [-1.0, -2.0], beta=1.5)
    with pytest.raises(SeffiError, match="beta must be in"):
        unlikeliness_rewards(group, [-1.0, -2.0], beta=-0.1)
    with pytest.raises(SeffiError, match="beta must be a number"):
        unlikeliness_rewards(group, [-1.0, -2.0], beta="high")  # type: ignore[arg-type]
    with pytest.raises(SeffiError, match="one log-probability per completion: 3 for 2"):
        unlikeliness_rewards(group, [-1.0, -2.0, -3.0])
    with pytest.raises(SeffiError, match="finite or -inf"):
        unlikeliness_rewards(group, [float("nan"), -2.0])


# -- pass@k ----------------------------------------------------------------------------------------------


def test_passk_advantage_matches_the_hand_computed_group() -> None:
    # N = 5, c = 2, k = 2: R = 1 - C(3,2)/C(5,2) = 1 - 3/10 = 0.7, sigma = sqrt(0.7*0.3) = sqrt(0.21)
    # A_valid = 0.3/sqrt(0.21) = 0.65465367; A_invalid = (0.3 - C(2,1)/C(4,1))/sqrt(0.21) = -0.2/sqrt(0.21)
    got = passk_advantages(group_of([True, False, True, False, False]), 2)
    assert got == pytest.approx([0.65465367, -0.43643578, 0.65465367, -0.43643578, -0.43643578])
    # k = 1 is GRPO's (valid - p)/sigma: N = 4, c = 1, p = 0.25, sigma = sqrt(0.1875)
    # A_valid = 0.75/0.4330127 = sqrt(3), A_invalid = -0.25/0.4330127 = -1/sqrt(3)
    got = passk_advantages(group_of([False, True, False, False]), 1)
    assert got == pytest.approx([-1 / math.sqrt(3), math.sqrt(3), -1 / math.sqrt(3), -1 / math.sqrt(3)])
    # N = 4, c = 1, k = 3: R = 1 - C(3,3)/C(4,3) = 0.75, sigma = sqrt(0.1875) = 0.4330127
    # A_valid = 0.25/0.4330127 = 0.57735027; A_invalid = (0.25 - C(2,2)/C(3,2))/0.4330127 = -0.19245009
    got = passk_advantages(group_of([False, False, True, False]), 3)
    assert got == pytest.approx([-0.19245009, -0.19245009, 0.57735027, -0.19245009])


def test_passk_groups_without_spread_get_zero() -> None:
    assert passk_advantages(group_of([False] * 4), 2) == [0.0] * 4  # no k-subset solves
    assert passk_advantages(group_of([True] * 4), 2) == [0.0] * 4
    # N = 4, c = 3, k = 2: N - c = 1 < k, every pair holds a valid completion: R = 1, sigma = 0
    assert passk_advantages(group_of([True, True, False, True]), 2) == [0.0] * 4


def brute_force_passk(valid: list[bool], k: int) -> list[float]:
    """Subset-level advantages (max valid in S - mean) / std over all k-subsets, averaged per sample."""
    subsets = list(itertools.combinations(range(len(valid)), k))
    reward = np.array([max(valid[i] for i in s) for s in subsets], dtype=float)
    mean, std = reward.mean(), reward.std()
    if std == 0:
        return [0.0] * len(valid)
    adv = (reward - mean) / std
    return [
        float(np.mean([a for a, s in zip(adv, subsets, strict=True) if i in s])) for i in range(len(valid))
    ]


def test_passk_advantage_equals_brute_force_over_all_k_subsets_and_sums_to_zero() -> None:
    rng = np.random.default_rng(3)
    checked = 0
    for n in range(1, 9):
        for k in range(1, n + 1):
            for _ in range(4):
                valid = [bool(v) for v in rng.random(n) < rng.random()]
                got = passk_advantages(group_of(valid), k)
                assert got == pytest.approx(brute_force_passk(valid, k), abs=1e-12)
                assert sum(got) == pytest.approx(0.0, abs=1e-9)
                checked += any(got)
    assert checked > 40  # most draws have spread: the comparison is not between zeros


def test_passk_rejects_k_outside_the_group() -> None:
    group = group_of([True, False, False])
    with pytest.raises(SeffiError, match="1 <= k <= group size, got k=4 for a group of 3"):
        passk_advantages(group, 4)
    with pytest.raises(SeffiError, match="got k=0"):
        passk_advantages(group, 0)
    with pytest.raises(SeffiError, match="integer k"):
        passk_advantages(group, 2.5)  # type: ignore[arg-type]


# -- outcome-based exploration ---------------------------------------------------------------------------


def test_historical_bonus_reads_counts_before_the_group_then_counts_it() -> None:
    counts = OutcomeCounts({"x": {("a",): 3, ("b",): 8}, "y": {("a",): 99}})
    group = group_of([True, False, True, True], [("a",), ("b",), (), ("a", "b")])
    # c = 0.5: a seen 3 times -> 1 + 0.5/sqrt(4) = 1.25; b (invalid) seen 8 -> 0 + 0.5/sqrt(9) = 0.1667;
    # () and (a, b) never seen for x -> 1 + 0.5/sqrt(1) = 1.5 (y's counts are another input's)
    assert historical_bonus(group, counts, c=0.5) == pytest.approx([1.25, 0.5 / 3, 1.5, 1.5])
    assert counts.as_dict()["x"] == {("a",): 4, ("b",): 9, (): 1, ("a", "b"): 1}
    assert counts.count("y", ("a",)) == 99 and counts.total("x") == 15
    # the same group again: a 4 -> 1 + 0.5/sqrt(5); b 9 -> 0.5/sqrt(10); () and (a, b) 1 -> 1 + 0.5/sqrt(2)
    again = historical_bonus(group, counts, c=0.5, update=False)
    expect = [1 + 0.5 / math.sqrt(5), 0.5 / math.sqrt(10), 1 + 0.5 / math.sqrt(2), 1 + 0.5 / math.sqrt(2)]
    assert again == pytest.approx(expect)
    assert counts.count("x", ("a",)) == 4  # update=False leaves the counts alone
    # valid_only: the invalid completion gets no bonus (still counted afterwards)
    got = historical_bonus(group, counts, c=0.5, valid_only=True)
    assert got[1] == 0.0 and counts.count("x", ("b",)) == 10
    # completions sharing an outcome within the group get the same bonus
    dup = group_of([True, True], [("c",), ("c",)])
    assert historical_bonus(dup, OutcomeCounts(), c=0.5) == [1.5, 1.5]


def test_batch_penalty_counts_repeated_outcomes_in_the_group() -> None:
    group = group_of([True, True, True, False, True], [("a",), ("a",), ("b",), ("a",), ()])
    # G = 5, c = 0.5, n_a = 3 -> penalty 0.5*(3-1)/4 = 0.25; b and () unique -> 0
    assert batch_penalty_rewards(group, c=0.5) == pytest.approx([0.75, 0.75, 1.0, -0.25, 1.0])
    # valid_only: n_a counts the 2 valid a's -> 0.5*(2-1)/4 = 0.125; the invalid one is not penalised
    assert batch_penalty_rewards(group, c=0.5, valid_only=True) == pytest.approx(
        [0.875, 0.875, 1.0, 0.0, 1.0]
    )
    # all share one outcome: each loses c; a group of one is never penalised
    assert batch_penalty_rewards(group_of([True] * 3), c=0.5) == pytest.approx([0.5, 0.5, 0.5])
    assert batch_penalty_rewards(group_of([True]), c=0.5) == [1.0]


def test_outcome_rules_reject_bad_scales_and_counts() -> None:
    with pytest.raises(SeffiError, match=r"outcome bonus c must be >= 0, got -1"):
        historical_bonus(group_of([True]), OutcomeCounts(), c=-1)
    with pytest.raises(SeffiError, match="outcome penalty c must be >= 0"):
        batch_penalty_rewards(group_of([True]), c=float("inf"))
    with pytest.raises(SeffiError, match="outcome count must be >= 0"):
        OutcomeCounts({"x": {("a",): -2}})


# -- every rule: order independence ----------------------------------------------------------------------


def test_permuting_a_group_permutes_every_rule_s_rewards() -> None:
    rng = np.random.default_rng(7)
    sets = [(), ("a",), ("b",), ("a", "b")]
    for _ in range(30):
        g = int(rng.integers(2, 9))
        group = group_of([bool(v) for v in rng.random(g) < 0.6], [sets[i] for i in rng.integers(0, 4, g)])
        lp = rng.choice([-1.0, -2.0, -3.5, -0.25], size=g)  # few values: ties are common
        history = {"x": {s: int(n) for s, n in zip(sets, rng.integers(0, 5, 4), strict=True)}}
        k = int(rng.integers(1, g + 1))
        base = {
            "unlikeliness": unlikeliness_rewards(group, lp, beta=0.5),
            "passk": passk_advantages(group, k),
            "batch": batch_penalty_rewards(group),
            "ucb": historical_bonus(group, OutcomeCounts(history), update=False),
        }
        perm = rng.permutation(g)
        pg = [group[i] for i in perm]
        permuted = {
            "unlikeliness": unlikeliness_rewards(pg, lp[perm], beta=0.5),
            "passk": passk_advantages(pg, k),
            "batch": batch_penalty_rewards(pg),
            "ucb": historical_bonus(pg, OutcomeCounts(history), update=False),
        }
        for name, rewards in base.items():
            assert permuted[name] == pytest.approx([rewards[i] for i in perm]), name


# -- registry and batches --------------------------------------------------------------------------------


def test_registry_names_every_method_and_the_inputs_it_needs() -> None:
    assert set(METHODS) == {"valid", "diversity", "unlikeliness", "passk", "outcome_ucb", "outcome_batch"}
    assert METHODS["unlikeliness"].needs == ("logprobs",)
    assert METHODS["passk"].needs == ("k",)
    assert METHODS["outcome_ucb"].needs == ("counts",)
    assert METHODS["valid"].needs == METHODS["diversity"].needs == METHODS["outcome_batch"].needs == ()


def test_batch_rewards_apply_each_rule_group_by_group() -> None:
    batch = group_of([True, False, True, True], [("a",), ("a",), ("b",), ("a",)], x="p") + group_of(
        [True, True], [("a",), ("a",)], x="q"
    )
    assert batch_rewards("valid", batch, 4) == [1.0, 0.0, 1.0, 1.0, 1.0, 1.0]
    assert batch_rewards("diversity", batch, 4, weight=0.5) == (
        diversity_rewards(batch[:4], 0.5) + diversity_rewards(batch[4:], 0.5)
    )
    # unlikeliness slices the batch's log-probs per group: p ranks [-1,-2,-3,-4] -> u = 3,2,1,0 (G=4);
    # q ranks [-5,-1] -> u = 0,1 (G=2); beta = 0.5
    lp = [-1.0, -2.0, -3.0, -4.0, -5.0, -1.0]
    expect = [1 - 0.5 * 3 / 4, 0.0, 1 - 0.5 * 1 / 4, 1.0, 1.0, 1 - 0.5 * 1 / 2]
    assert batch_rewards("unlikeliness", batch, 4, logprobs=lp, beta=0.5) == pytest.approx(expect)
    assert batch_rewards("passk", batch, 4, k=2)[:4] == pytest.approx(passk_advantages(batch[:4], 2))
    assert batch_rewards("passk", batch, 4, k=2)[4:] == [0.0, 0.0]
    assert batch_rewards("outcome_batch", batch, 4, c=0.5) == pytest.approx(
        batch_penalty_rewards(batch[:4], c=0.5) + batch_penalty_rewards(batch[4:], c=0.5)
    )


def test_batch_ucb_reads_the_counts_from_before_the_batch() -> None:
    # one prompt drawn twice in a row: two groups of 2, both scored from the empty history
    batch = group_of([True, True, True, True], [("a",), ("b",), ("a",), ("b",)], x="p")
    counts = OutcomeCounts()
    assert batch_rewards("outcome_ucb", batch, 2, counts=counts, c=0.5) == [1.5] * 4
    assert counts.as_dict() == {"p": {("a",): 2, ("b",): 2}}
    # the next batch sees them: 1 + 0.5/sqrt(3)
    assert batch_rewards("outcome_ucb", batch[:1], 2, counts=counts, c=0.5) == pytest.approx(
        [1 + 0.5 / math.sqrt(3)]
    )


def test_batch_rewards_reject_unknown_methods_options_and_missing_inputs() -> None:
    batch = group_of([True, False])
    with pytest.raises(SeffiError, match="unknown reward method 'novelty'"):
        batch_rewards("novelty", batch, 2)
    with pytest.raises(SeffiError, match="'unlikeliness' needs logprobs"):
        batch_rewards("unlikeliness", batch, 2)
    with pytest.raises(SeffiError, match="'passk' needs k"):
        batch_rewards("passk", batch, 2)
    with pytest.raises(SeffiError, match="'outcome_ucb' needs counts"):
        batch_rewards("outcome_ucb", batch, 2)
    with pytest.raises(SeffiError, match=r"takes options \['beta'\], got \['c'\]"):
        batch_rewards("unlikeliness", batch, 2, logprobs=[-1.0, -2.0], c=1.0)
    with pytest.raises(SeffiError, match="3 log-probabilities for a batch of 2"):
        batch_rewards("unlikeliness", batch, 2, logprobs=[-1.0, -2.0, -3.0])
    with pytest.raises(SeffiError, match="got k=3 for a group of 2"):
        batch_rewards("passk", batch, 2, k=3)


def test_importing_the_reward_rules_does_not_import_torch() -> None:
    code = "import sys, seffi.group_scoring; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
