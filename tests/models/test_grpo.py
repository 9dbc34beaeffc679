"""Issue 16 (rung 3): group-diversity reward, unbiased valid@k / C(k), crossover k, gain vs the base."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from tests.helpers import require

# ruff: noqa: E402
require("torch", "lm")
require("transformers", "lm")

from seffi.coverage import IidBaseline
from seffi.errors import SeffiError
from seffi.models.grpo import diversity_rewards, group_rewards, reward_function, split_groups
from seffi.models.passk import crossover_k, evaluate_samples, gain_vs_base, unbiased_at_k


def test_diversity_reward_formula_and_group_permutations() -> None:
    """Issue 16 case 2: r_i = valid_i ((1-w) + w [A_i != {}] / c_i); a permuted group's rewards move along."""
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
    """Issue 16 case 2: a batch's groups (one prompt twice in a row makes two groups of G)."""
    recs = [("p", (), True)] * 4 + [("q", (), True)] * 2 + [("p", (), True)] * 2
    assert split_groups(recs, 2) == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert split_groups(recs, None) == [[0, 1, 2, 3], [4, 5], [6, 7]]
    batch = [("p", ("a",), True), ("p", ("a",), True), ("q", ("a",), True), ("q", ("b",), True)]
    assert group_rewards(batch, 2, weight=1.0) == [0.5, 0.5, 1.0, 1.0]  # groups never mix prompts


def test_unbiased_at_k_is_pass_at_k() -> None:
    """Issue 16 case 4: valid@k = 1 - C(n-c, k)/C(n, k) for every (c, k), up to n = 64."""
    n = 64
    counts = [0, 1, 5, 32, 63, 64]
    got = unbiased_at_k(n, counts, np.arange(1, n + 1))
    for r, c in enumerate(counts):
        for k in (1, 2, 7, 33, 64):
            assert got[r, k - 1] == pytest.approx(1 - math.comb(n - c, k) / math.comb(n, k), abs=1e-12)
    with pytest.raises(SeffiError, match="k must lie"):
        unbiased_at_k(4, [1], [5])


def test_evaluation_curves_match_the_iid_estimator() -> None:
    """Issue 16 case 4: C(k) from the evaluation equals from_samples' rarefaction; solvable share."""
    rng = np.random.default_rng(3)
    strategies = ("a", "b", "c", "d")
    sets, valid = {}, {}
    for pid in ("p1", "p2", "p3"):
        sets[pid] = [frozenset(s for s in strategies if rng.random() < 0.3) for _ in range(16)]
        valid[pid] = [bool(rng.random() < (0.0 if pid == "p3" else 0.4)) for _ in range(16)]
    res = evaluate_samples(sets, valid, strategies)
    ref = IidBaseline.from_samples(sets, strategies=strategies, valid=valid).curves(16, n_boot=0)
    np.testing.assert_allclose(res.coverage, ref.coverage, atol=1e-12)
    np.testing.assert_allclose(res.valid_at_k, ref.valid_at_k, atol=1e-12)
    assert res.solvable == pytest.approx(2 / 3)  # p3 never valid
    assert res.valid_rate == pytest.approx(sum(map(sum, valid.values())) / 48)


def test_crossover_needs_a_lead_beyond_noise_over_prompts() -> None:
    """Issue 16 case 4: per-prompt curves cross only where the base's lead is significant over prompts.

    The lr = 0 sanity run (the base resampled) "crossed" at k = 1 with the mean-curve rule; reference
    values by hand: paired differences d = base - policy per prompt, bound mean - t(0.975, P-1) * sd/sqrt(P).
    """
    rng = np.random.default_rng(3)
    # The same model twice: 32 prompts, valid rate 0.88, n = 64 samples each -> no significant lead.
    p_valid = rng.uniform(0.6, 1.0, size=32)
    a = evaluate_samples(
        {f"p{i}": [frozenset()] * 64 for i in range(32)},
        {f"p{i}": list(rng.random(64) < p_valid[i]) for i in range(32)},
        ("a",),
    )
    b = evaluate_samples(
        {f"p{i}": [frozenset()] * 64 for i in range(32)},
        {f"p{i}": list(rng.random(64) < p_valid[i]) for i in range(32)},
        ("a",),
    )
    assert a.per_prompt_valid_at_k.shape == (32, 64)
    np.testing.assert_allclose(a.per_prompt_valid_at_k.mean(axis=0), a.valid_at_k, atol=1e-12)
    assert crossover_k(a.per_prompt_valid_at_k, b.per_prompt_valid_at_k) is None
    assert crossover_k(b.per_prompt_valid_at_k, a.per_prompt_valid_at_k) is None
    # ... while the mean curves alone "cross" one way or the other on sampling noise.
    assert crossover_k(a.valid_at_k, b.valid_at_k) or crossover_k(b.valid_at_k, a.valid_at_k)
    # A hand-made lead: 4 prompts, lead 0.1 everywhere at k = 2 but noisy at k = 1.
    base = np.array([[0.5, 0.9], [0.9, 0.9], [0.6, 0.8], [0.8, 0.8]])
    pol = np.array([[0.4, 0.8], [1.0, 0.8], [0.5, 0.7], [0.9, 0.7]])
    # k = 1: d = (0.1, -0.1, 0.1, -0.1), mean 0 -> no; k = 2: d = 0.1 each, sd 0 -> bound 0.1 > 0.
    assert crossover_k(base, pol) == 2
    # The mean-curve form (shape (n,)) keeps the plain margin rule.
    assert crossover_k(base.mean(axis=0), pol.mean(axis=0)) == 2
    with pytest.raises(SeffiError):
        crossover_k(base, pol[:3])


def test_crossover_k_and_gain_vs_base() -> None:
    """Issue 16 case 4: the first k where the base overtakes the policy; gain 0 for identical samples."""
    assert crossover_k([0.2, 0.5, 0.9], [0.4, 0.6, 0.8]) == 3
    assert crossover_k([0.2, 0.5], [0.4, 0.6]) is None
    assert crossover_k([0.5, 0.6], [0.4, 0.6]) == 1
    assert crossover_k([0.9, 0.9999995, 1.0], [0.95, 0.9999990, 1.0]) is None  # saturated: no crossing
    sets = {f"p{i}": [frozenset({"a"})] * 6 + [frozenset({"b"})] * 2 for i in range(6)}
    valid = {k: [True] * 8 for k in sets}
    base = evaluate_samples(sets, valid, ("a", "b"))
    oracle = {k: float(np.mean([min(j, 2) / 2 for j in range(1, 5)])) for k in sets}
    same = gain_vs_base(base, base, oracle, 4, n_boot=50)
    assert same == {"value": 0.0, "lo": 0.0, "hi": 0.0}
    spread = {k: [frozenset({"a"}), frozenset({"b"})] * 4 for k in sets}
    better = gain_vs_base(evaluate_samples(spread, valid, ("a", "b")), base, oracle, 4, n_boot=50)
    assert 0 < better["value"] <= 1 and better["lo"] <= better["value"] <= better["hi"]
    assert list(itertools.islice(better, 3)) == ["value", "lo", "hi"]


def test_left_padding_does_not_move_an_absolute_position_policy() -> None:
    """Issue 16 case 3: with positions from the mask a left-padded forward (TRL) equals the unpadded one."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from seffi.models.grpo import positions_from_mask

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=20, n_embd=16, n_layer=1, n_head=2, n_positions=32)).eval()
    seq = torch.tensor([[5, 6, 7, 8]])
    padded = torch.tensor([[0, 0, 5, 6, 7, 8]])
    mask = torch.tensor([[0, 0, 1, 1, 1, 1]])
    with torch.no_grad():
        alone = model(input_ids=seq).logits[0]
        shifted = model(input_ids=padded, attention_mask=mask).logits[0, 2:]
        assert (alone - shifted).abs().max() > 1e-3  # transformers numbers the padding too
        positions_from_mask(model)
        fixed = model(input_ids=padded, attention_mask=mask).logits[0, 2:]
    torch.testing.assert_close(fixed, alone, rtol=0, atol=1e-5)


def test_rung3_trains_in_full_precision_without_checkpointing(tmp_path) -> None:
    """Issue 16 (rung 3 on CPU): whatever the installed TRL defaults to, rung 3's GRPOConfig is fp32
    without gradient checkpointing (TRL 1.16 turned bf16 autocast on by default: 5-8x slower on CPU and
    other numerics)."""
    require("trl", "trl")
    from seffi.experiment.ladder import LadderConfig
    from seffi.experiment.ladder_rung3 import GRPOSettings, _grpo_args

    args = _grpo_args(LadderConfig(), GRPOSettings(), tmp_path, 3e-4, 16, [0])
    assert (args.bf16, args.fp16, args.gradient_checkpointing) == (False, False, False)
    assert args.use_cpu and args.learning_rate == 3e-4 and args.num_generations == 8
