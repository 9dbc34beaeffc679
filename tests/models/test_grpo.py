"""Rung 3's GRPO machinery: group-diversity reward, groups, positions (valid@k, C(k), gain: test_passk.py)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers import require

# ruff: noqa: E402
require("torch", "lm")
require("transformers", "lm")

from seffi.errors import SeffiError
from seffi.models.grpo import diversity_rewards, group_rewards, reward_function, split_groups


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
    assert group_rewards(batch, 2, weight=1.0) == [0.5, 0.5, 1.0, 1.0]  # groups never mix prompts


def test_left_padding_does_not_move_an_absolute_position_policy() -> None:
    """With positions from the mask a left-padded forward (TRL) equals the unpadded one."""
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
    """On CPU, whatever the installed TRL defaults to, rung 3's GRPOConfig is fp32
    without gradient checkpointing (TRL 1.16 turned bf16 autocast on by default: 5-8x slower on CPU and
    other numerics)."""
    require("trl", "trl")
    from seffi.experiment.ladder import LadderConfig
    from seffi.experiment.ladder_rung3 import GRPOSettings, grpo_config

    cfg = LadderConfig()
    args = grpo_config(cfg, GRPOSettings(), tmp_path, lr=3e-4, max_new=16, suppress=[0], seed=cfg.seed)
    assert (args.bf16, args.fp16, args.gradient_checkpointing) == (False, False, False)
    assert args.use_cpu and args.learning_rate == 3e-4 and args.num_generations == 8
