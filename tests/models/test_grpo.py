"""Rung 3's task LM as a TRL policy: positions from the mask, CPU training settings (group rewards:
tests/test_group_scoring.py; valid@k, C(k), gain: test_passk.py)."""

from __future__ import annotations

from tests.helpers import require

require("torch", "lm")
require("transformers", "lm")


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
