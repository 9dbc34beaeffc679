"""The oracle over many inputs equals the mean of its inputs' own curves, inputs sharing strategy sets."""

from __future__ import annotations

import random

import numpy as np
import pytest

from seffi.coverage import OracleBaseline

STRATEGIES = ["a", "b", "c", "d", "e"]


def _random_refs(rng: random.Random) -> dict[str, set[str]]:
    """Feasible strategies of one input and their reference traces' match sets (some ambiguous)."""
    feasible = rng.sample(STRATEGIES, rng.randint(1, len(STRATEGIES)))
    return {s: {s} | ({rng.choice(STRATEGIES)} if rng.random() < 0.4 else set()) for s in feasible}


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("with_rarity", [False, True])
def test_oracle_over_inputs_equals_each_input_alone(seed: int, with_rarity: bool) -> None:
    rng = random.Random(seed)
    kinds = [_random_refs(rng) for _ in range(4)]  # 4 distinct inputs, each repeated over many prompts
    refs = {f"p{i:03d}": kinds[rng.randrange(len(kinds))] for i in range(60)}
    rarity = None
    if with_rarity:
        laws = [{s: w / sum(ws) for s, w in zip(STRATEGIES, ws, strict=True)}
                for ws in ([rng.random() for _ in STRATEGIES] for _ in range(2))]  # fmt: skip
        rarity = {p: laws[rng.randrange(2)] for p in refs}
    K = 7
    got = OracleBaseline(refs, strategies=STRATEGIES).curves(K, rarity=rarity)
    alone = [
        OracleBaseline({p: r}, strategies=STRATEGIES).curves(
            K, rarity=None if rarity is None else {p: rarity[p]}
        )
        for p, r in sorted(refs.items())
    ]
    assert not got.notes  # every input exact (no Monte Carlo)
    assert [k for _, k in got.input_keys] == sorted(refs)
    np.testing.assert_allclose(got.input_auc, [c.auc for c in alone], rtol=0, atol=1e-15)
    for name in ("coverage", "novelty", "expected_new", "full_coverage", "valid_at_k"):
        want = np.mean([getattr(c, name) for c in alone], axis=0)
        np.testing.assert_allclose(getattr(got, name), want, rtol=0, atol=1e-15)
    if with_rarity:
        want = np.mean([c.coverage_by_rarity for c in alone], axis=0)
        np.testing.assert_allclose(got.coverage_by_rarity, want, rtol=0, atol=1e-15)
    for key, ttc in got.time_to_coverage.items():
        want = np.mean([c.time_to_coverage[key].survival for c in alone], axis=0)
        np.testing.assert_allclose(ttc.survival, want, rtol=0, atol=1e-15)
    # Ambiguous inputs took the DP and unambiguous ones the closed form: both kinds are present.
    assert any(any(m != {s} for s, m in r.items()) for r in refs.values())
