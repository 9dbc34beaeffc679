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


def _row(method: str, seed: int, auc: list[float], valid: float = 0.9, base_valid: float = 0.9) -> dict:
    """A bench row with per-prompt pool data: iid AUC 0.5 and oracle AUC 0.7 on every prompt (room 0.2)."""
    ids = [f"p{i}" for i in range(len(auc))]
    pp = {"input_ids": ids, "auc": auc, "iid_auc": [0.5] * len(auc), "oracle_auc": [0.7] * len(auc)}
    gain = (np.mean(auc) - 0.5) / 0.2
    return {"method": method, "label": method.upper(), "seed": seed, "pool_gain": gain, "valid_at_1": valid,
            "base_valid_at_1": base_valid, "pool_prompts": {"validator": pp}}  # fmt: skip


def test_aggregates_pool_seeds_by_prompt_and_pair_with_validity() -> None:
    """Hand case: with equal rooms the mean over seeds x prompts is the mean of the seeds' pool gains."""
    from seffi.experiment.bench_report import NEEDS_PROMPTS, aggregates

    rows = [
        _row("validity", 0, [0.5, 0.4, 0.5, 0.45]),
        _row("validity", 1, [0.45, 0.5, 0.4, 0.5]),
        _row("wide", 0, [0.62, 0.6, 0.64, 0.66], valid=0.91),
        _row("wide", 1, [0.6, 0.7, 0.64, 0.62], valid=0.9),
        _row("bad_valid", 0, [0.62, 0.6, 0.64, 0.66], valid=0.8),
        _row("bad_valid", 1, [0.6, 0.7, 0.64, 0.62], valid=0.85),
    ]
    agg = aggregates(rows, n_boot=400)
    assert agg["needs"] is None and agg["reference"] == "validity"
    res = agg["labelers"]["validator"]
    wide = res["wide"]
    assert wide["mean"]["value"] == pytest.approx(np.mean([r["pool_gain"] for r in rows[2:4]]), abs=1e-12)
    # per-prompt gains (a - 0.5) / 0.2: every one positive, every one above validity's on its prompt
    assert wide["poi_base"]["value"] == 1.0 and wide["poi_reference"]["value"] == 1.0
    assert wide["mean"]["lo"] > 0 and wide["valid_at_1_diff"] == pytest.approx(0.005)
    assert wide["widens"] is True
    assert res["bad_valid"]["widens"] is False  # its held-out valid@1 is below the base's on average
    assert res["validity"]["poi_reference"] is None and res["validity"]["widens"] is False
    # validity: gains 0, -0.5, 0, -0.25 and -0.25, 0, -0.5, 0: four ties at 0 count half
    assert res["validity"]["poi_base"]["value"] == pytest.approx(4 * 0.5 / 8)
    del rows[0]["pool_prompts"]
    bare = aggregates(rows)
    assert bare["needs"] == NEEDS_PROMPTS and bare["labelers"] == {}
