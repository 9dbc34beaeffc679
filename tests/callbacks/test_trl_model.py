"""The trainer's model as GRPOTrainer drives it (`seffi.callbacks.trl_model`): sequence log-probabilities."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from seffi.callbacks.trl_model import sequence_logprobs
from seffi.errors import SeffiError
from tests.helpers import require


def tiny_causal_lm(torch: Any, vocab: int = 11, width: int = 8) -> Any:
    """A causal LM in plain torch: token + position embeddings, prefix mean, dropout, linear head.

    Position embeddings make a padding on the left visible; dropout makes train-mode scoring visible.
    """

    class PrefixLM(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.tok = torch.nn.Embedding(vocab, width)
            self.pos = torch.nn.Embedding(32, width)
            self.drop = torch.nn.Dropout(0.5)
            self.head = torch.nn.Linear(width, vocab)

        def forward(self, input_ids: Any, attention_mask: Any = None) -> Any:
            steps = torch.arange(input_ids.shape[1])
            h = self.tok(input_ids) + self.pos(steps)
            h = h.cumsum(dim=1) / (steps + 1).unsqueeze(-1)  # position t sees tokens 0..t only
            return SimpleNamespace(logits=self.head(torch.tanh(self.drop(h))))

    torch.manual_seed(0)
    return PrefixLM()


def test_sequence_logprobs_equal_a_token_by_token_loop() -> None:
    torch = require("torch", "lm")
    torch.set_num_threads(1)
    model = tiny_causal_lm(torch)
    model.train()  # dropout on: the function must score in eval mode and give the mode back
    prompts = [[1, 2, 3], [4], [5, 6]]
    completions = [[7, 8], [9, 10, 3, 1], []]
    got = sequence_logprobs(model, prompts, completions)
    assert model.training
    model.eval()
    expect = []
    with torch.no_grad():
        for p, c in zip(prompts, completions, strict=True):
            logits = model(torch.tensor([p + c])).logits[0]  # one unpadded row at a time
            total = 0.0
            for j, tok in enumerate(c):
                total += float(torch.log_softmax(logits[len(p) + j - 1], dim=-1)[tok])
            expect.append(total)
    assert got == pytest.approx(expect, abs=1e-5)
    assert got[2] == 0.0 and all(v < 0 for v in got[:2])
    mean = sequence_logprobs(model, prompts, completions, reduction="mean", batch_size=2)
    assert mean == pytest.approx([expect[0] / 2, expect[1] / 4, 0.0], abs=1e-5)
    with pytest.raises(SeffiError, match="at least one token"):
        sequence_logprobs(model, [[]], [[1]])
    with pytest.raises(SeffiError, match="2 prompts for 1 completions"):
        sequence_logprobs(model, [[1], [2]], [[1]])
    with pytest.raises(SeffiError, match="reduction must be"):
        sequence_logprobs(model, [[1]], [[1]], reduction="max")
