"""The bench's per-prompt pool data: the pieces each seed's pool gain is a ratio of."""

from __future__ import annotations

import numpy as np
import pytest

from seffi.coverage import CoverageTracker, IidBaseline, OracleBaseline
from seffi.experiment.bench_report import prompt_aucs
from seffi.experiment.bench_stats import prompt_gains

STRATS = ("a", "b", "c", "d")


def _pool(seed: int, ids: list[str], K: int, runs: int, p: list[float]) -> CoverageTracker:
    """A user's policy: ``runs`` runs of K single-strategy samples per input, drawn from ``p``."""
    rng = np.random.default_rng(seed)
    t = CoverageTracker(strategies=STRATS, task="toy")
    stream = 0
    for x in ids:
        for _ in range(runs):
            for _ in range(K):
                s = STRATS[int(rng.choice(4, p=p))]
                t.update(x, {s} if rng.random() < 0.9 else set(), valid=True, stream=stream)
            stream += 1
    return t


@pytest.mark.parametrize("extra", [0, 3], ids=["same prompts", "baselines with more prompts"])
def test_prompt_aucs_reproduce_the_pool_gain_to_1e_12(extra: int) -> None:
    """The mean per-prompt gain is the gain `Curves.gain` reports, baselines restricted to the pool."""
    K = 4
    ids = [f"x{i}" for i in range(9)]
    base_ids = [f"y{i}" for i in range(extra)] + ids  # extra prompts first: matched by id, not position
    rng = np.random.default_rng(1)
    base = {x: [{STRATS[int(rng.choice(4, p=[0.7, 0.2, 0.07, 0.03]))]} for _ in range(16)] for x in base_ids}
    iid = IidBaseline.from_samples(base, strategies=STRATS)
    oracle = OracleBaseline(
        {x: {s: {s} for s in STRATS[: 2 + i % 3]} for i, x in enumerate(base_ids)}, strategies=STRATS
    )
    iid_curves = iid.curves(K, seed=2)
    oracle_curves = oracle.curves(K, rarity=iid)
    for seed, p in ((3, [0.4, 0.3, 0.2, 0.1]), (4, [0.9, 0.05, 0.03, 0.02])):
        policy = _pool(seed, ids, K, 3, p).curves(K, n_boot=200, seed=5)
        gain = policy.gain(iid_curves, oracle_curves)
        pieces = prompt_aucs(policy, iid_curves, oracle_curves)
        assert pieces["input_ids"] == ids
        g = prompt_gains(pieces["auc"], pieces["iid_auc"], pieces["oracle_auc"])
        assert gain.value is not None
        assert abs(g.mean() - gain.value) < 1e-12
