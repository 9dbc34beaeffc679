"""`TimeToCoverage.from_survivals`: several taus' intervals at once, against numpy's quantiles per tau."""

from __future__ import annotations

import numpy as np

from seffi.coverage.summaries import TimeToCoverage


def _median(s: np.ndarray) -> float:
    """The first k (1-based) with S(k) <= 1/2, +inf when the replicate never gets there."""
    return next((k + 1.0 for k, v in enumerate(s.tolist()) if v <= 0.5 + 1e-12), np.inf)


def test_intervals_of_several_taus_are_each_taus_own_percentiles() -> None:
    rng = np.random.default_rng(5)
    K, B, taus = 6, 50, [0.5, 0.8, 1.0]
    survivals = [np.sort(rng.random(K))[::-1] for _ in taus]
    reps = [np.sort(rng.random((B, K)), axis=1)[:, ::-1] * scale for scale in (1.0, 1.6, 3.0)]
    got = TimeToCoverage.from_survivals(taus, survivals, reps, level=0.9)
    q = [(1.0 - 0.9) / 2.0, 1.0 - (1.0 - 0.9) / 2.0]  # the equal tails of a 90 % interval
    for tau, s, r, t in zip(taus, survivals, reps, got, strict=True):
        r = np.clip(r, 0.0, 1.0)
        assert t.tau == tau and t.survival == s.tolist() and t.restricted_mean == 1.0 + s[:-1].sum()
        lo, hi = np.quantile(r, q, axis=0)
        assert (t.survival_lo, t.survival_hi) == (lo.tolist(), hi.tolist())
        rmean = np.quantile(1.0 + r[:, :-1].sum(axis=1), q)
        assert (t.restricted_mean_lo, t.restricted_mean_hi) == tuple(rmean.tolist())
        assert (t.fraction_censored_lo, t.fraction_censored_hi) == tuple(np.quantile(r[:, -1], q))
        med = np.quantile([_median(row) for row in r], q, method="nearest")
        assert (t.median_lo, t.median_hi) == tuple(None if np.isinf(v) else v for v in med.tolist())
    assert got[0] == TimeToCoverage.from_survival(taus[0], survivals[0], reps[0], level=0.9)
