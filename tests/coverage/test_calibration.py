"""Calibration of the 95 % intervals of the iid baseline estimated from n base samples.

Datasets of n samples are simulated from known laws; the interval of the estimated coverage C(k)
(and AUC) from the implemented iNEXT bootstrap assemblage must contain the exact truth
C(k) = (1/M) sum_s 1 - (1 - pi_s)^k about as often as it claims. Everything is batched over
datasets and replicates (``inext_coverage_replicates`` on a (D, n, M) stack), so 2 x 1,000
datasets x 200 replicates cost a few seconds.

Expected values and bands. Measured over 1,000-3,000 datasets per law (``benchmarks/coverage.py``),
iNEXT (estimate +- 1.96 bootstrap sd) covers 0.91-0.94 at k <= n and for the AUC, and 0.90-0.91 at
the extrapolated k = 2n, on these small, skewed laws (the shortfall from 0.95 is the small-sample
correlation between the estimate and its bootstrap sd; it shrinks with n and M). The naive
bootstrap that resamples the samples covers 0.82-0.88 at k = n: it cannot produce strategies that
were never seen. With D = 1,000 datasets a single rate has a binomial standard error of
sqrt(0.92 x 0.08 / 1000) = 0.009, so each rate at k <= n must lie in [0.88, 0.98] (more than 4 SE
below its expectation, and an interval 3 points wider than nominal is flagged too), their mean
over both laws in [0.90, 0.97] (about 3 SE for the mean of 6 correlated rates), the extrapolated
rates in [0.85, 0.98], and iNEXT must beat the naive bootstrap at k = n by at least 0.03 (the paired
difference is 0.06-0.09 with SE ~0.01).
"""

from __future__ import annotations

import numpy as np
import pytest

from seffi._seeding import spawn
from seffi.coverage import IidBaseline
from seffi.coverage import estimators as est
from seffi.coverage.resampling import normal_quantile
from seffi.coverage.samples import (
    _covered_from_counts,
    _draw_counts,
    _widen,
    assemblage,
    inext_coverage_replicates,
    model_law,
)

Z95 = normal_quantile(0.95)


def _estimate(Y: np.ndarray, n: int, m: int, K: int) -> np.ndarray:
    """The point estimator on counts (..., M) -> (..., K): rarefaction, Chao beyond n, capped at m."""
    cov = np.concatenate([est.rarefaction_counts(Y, n, K), est.chao_extrapolation_counts(Y, n, K, m)], -1)
    return np.minimum(cov, m) / m


def _rates(X: np.ndarray, truth: np.ndarray, B: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Coverage of the truth by the iNEXT and naive 95 % intervals at k = n/2, n, 2n and AUC(2n).

    Args:
        X: bool array, shape (D, n, M): D simulated datasets.
        truth: float array, shape (2n,): exact C(k).
        B: bootstrap replicates.
        rng: generator.

    Returns:
        {"inext" | "naive": float array, shape (4,)}.
    """
    D, n, m = X.shape
    K = 2 * n
    ks = np.array([n // 2, n, 2 * n]) - 1
    true = np.r_[truth[ks], truth.mean()]
    hits = {"inext": np.zeros(4), "naive": np.zeros(4)}
    for a in range(0, D, 250):  # chunks keep the (datasets x replicates x K) arrays small
        x = X[a : a + 250]
        point = _estimate(x.sum(1), n, m, K)
        W = rng.multinomial(n, np.full(n, 1.0 / n), size=(len(x), B))  # naive: resample the samples
        reps = {
            "inext": inext_coverage_replicates(x, m, K, B, rng),
            "naive": _estimate(np.einsum("dbn,dnm->dbm", W, x.astype(np.int64)), n, m, K),
        }
        centre = np.c_[point[:, ks], point.mean(1)]
        for name, r in reps.items():
            sd = np.concatenate([r[:, :, ks], r.mean(2, keepdims=True)], 2).std(1, ddof=1)
            hits[name] += (np.abs(centre - true) <= Z95 * sd).sum(0)
    return {name: h / D for name, h in hits.items()}


def _single_label(rng: np.random.Generator, D: int) -> tuple[np.ndarray, np.ndarray]:
    """Zipf(1.2) over M = 20 strategies (the rarest has pi = 0.009), n = 50 samples per dataset."""
    m, n = 20, 50
    p = 1.0 / np.arange(1, m + 1) ** 1.2
    p /= p.sum()
    X = np.eye(m, dtype=bool)[rng.choice(m, size=(D, n), p=p)]
    return X, est.expected_covered_exact(p, 2 * n) / m


def _set_valued(rng: np.random.Generator, D: int) -> tuple[np.ndarray, np.ndarray]:
    """Each of M = 15 strategies is matched independently w.p. 0.6 / s^1.3 (rarest 0.018), n = 40."""
    m, n = 15, 40
    pi = 0.6 / np.arange(1, m + 1) ** 1.3
    X = rng.random((D, n, m)) < pi
    return X, est.expected_covered_exact(pi, 2 * n) / m


def test_inext_intervals_are_calibrated_and_beat_the_naive_bootstrap() -> None:
    rng = np.random.default_rng(2024)
    results = [_rates(*make(rng, 1000), 200, rng) for make in (_single_label, _set_valued)]
    inext = np.array([r["inext"] for r in results])  # (laws, 4): k = n/2, n, 2n, AUC(2n)
    naive = np.array([r["naive"] for r in results])
    within_n = inext[:, [0, 1, 3]]
    assert ((within_n >= 0.88) & (within_n <= 0.98)).all(), inext
    assert 0.90 <= within_n.mean() <= 0.97, inext
    assert ((inext[:, 2] >= 0.85) & (inext[:, 2] <= 0.98)).all(), inext
    assert (inext[:, 1] - naive[:, 1] >= 0.03).all(), (inext, naive)


@pytest.mark.parametrize("set_valued", [False, True])
def test_curves_report_estimate_plus_minus_z_sd_of_the_assemblage_replicates(set_valued: bool) -> None:
    """``IidBaseline.from_samples(...).curves`` intervals are estimate +- z sd, the sd the larger of the
    assemblage's (calibrated above) and that of the model law with the known unseen strategies."""
    rng = np.random.default_rng(9)
    ids = [f"s{i}" for i in range(8)]
    if set_valued:
        samples = [{ids[j] for j in np.flatnonzero(rng.random(8) < 0.4 / np.arange(1, 9))} for _ in range(30)]
    else:
        samples = [{ids[j]} for j in rng.choice(8, size=30, p=np.full(8, 1 / 8))]
    K, B, seed = 45, 150, 3
    c = IidBaseline.from_samples(samples, strategies=ids).curves(K, n_boot=B, seed=seed)
    X = np.array([[s in ms for s in ids] for ms in samples])
    boot_rng = np.random.default_rng(spawn(seed, 1)[0].spawn(4)[1])  # curves()' coverage bootstrap stream
    reps = inext_coverage_replicates(X, 8, K, B, boot_rng)
    model_rng = np.random.default_rng(spawn(seed, 1)[0].spawn(4)[2])  # the model-law stream
    single = np.array([X.sum(1).max() <= 1])
    n = X.shape[0]
    Yb = _draw_counts(model_law(X.sum(0)[None], n, 8, single), single, n, model_rng, B)[0]
    other = _covered_from_counts(Yb, n, 8, K) / 8
    sd = np.maximum(reps.std(0, ddof=1), other.std(0, ddof=1))
    np.testing.assert_allclose(c.coverage_lo, np.clip(c.coverage - Z95 * sd, 0, 1), atol=1e-12)
    np.testing.assert_allclose(c.coverage_hi, np.clip(c.coverage + Z95 * sd, 0, 1), atol=1e-12)
    # The AUC's replicates: the mean over k of the widened curve replicates, widened again.
    auc_sd = _widen(_widen(reps, other).mean(1), other.mean(1)).std(ddof=1)
    assert c.auc_lo == pytest.approx(max(0.0, c.auc - Z95 * auc_sd), abs=1e-12)
    assert c.auc_hi == pytest.approx(min(1.0, c.auc + Z95 * auc_sd), abs=1e-12)


def test_per_input_interval_is_that_of_the_mean_over_inputs() -> None:
    """Inputs are bootstrapped independently: U equal inputs shrink the sd by sqrt(U), not 1.

    With 4 copies of one input the mean curve is that input's curve and its sd is sd_1 / 2 (up to
    bootstrap noise: B = 400 gives ~5 % relative error per sd), whereas averaging the per-input
    bounds instead would keep the single-input width.
    """
    rng = np.random.default_rng(1)
    ids = [f"s{i}" for i in range(10)]
    p = 1.0 / np.arange(1, 11)
    samples = [{ids[j]} for j in rng.choice(10, size=40, p=p / p.sum())]
    one = IidBaseline.from_samples(samples, strategies=ids).curves(60, n_boot=400, seed=2)
    four = IidBaseline.from_samples({f"x{u}": samples for u in range(4)}, strategies=ids).curves(
        60, n_boot=400, seed=2
    )
    np.testing.assert_allclose(four.coverage, one.coverage, atol=1e-12)
    inner = (one.coverage_hi < 1) & (one.coverage_lo > 0)  # away from the clipping at 0 and 1
    ratio = (four.coverage_hi - four.coverage_lo)[inner] / (one.coverage_hi - one.coverage_lo)[inner]
    assert 0.4 <= np.median(ratio) <= 0.6, np.median(ratio)
    assert 0.4 <= (four.auc_hi - four.auc_lo) / (one.auc_hi - one.auc_lo) <= 0.6
    assert four.auc_reps.shape == (400,) and four.auc_lo < four.auc < four.auc_hi


def test_assemblage_matches_inext_by_hand() -> None:
    """iNEXT's EstiBootComm by hand: counts (1, 1, 2, 0, 0) out of n = 10 samples.

    f1 = 2, f2 = 1: f0 = (9/10) 2^2 / 2 = 1.8 -> 2 unseen; 1 - C_hat = (2/10)(18/20) = 0.18, so
    0.09 each; b = 2 (0.1)(0.9^10) + (0.2)(0.8^10), w = 0.18 / b, detected y/n (1 - w (1 - y/n)^10).
    Abundance keeps the 6 samples that match nothing as their own category (0.6); incidence does not.
    """
    b = 2 * 0.1 * 0.9**10 + 0.2 * 0.8**10
    w = 0.18 / b
    det = [0.1 * (1 - w * 0.9**10)] * 2 + [0.2 * (1 - w * 0.8**10), 0.0, 0.0]
    P = assemblage(np.array([1, 1, 2, 0, 0]), 10, True)
    np.testing.assert_allclose(P, [*det, 0.09, 0.09, 0.6], atol=1e-12)
    assert P.sum() == pytest.approx(1.0)
    np.testing.assert_allclose(assemblage(np.array([1, 1, 2, 0, 0]), 10, False), [*det, 0.09, 0.09, 0.0])
    # Batched rows pad the unseen slots with zeros; f1 = 0 (or f0 = 0) adds no unseen mass.
    both = assemblage(np.array([[1, 1, 2, 0, 0], [3, 4, 3, 0, 0]]), 10, np.array([True, True]))
    np.testing.assert_allclose(both[0], P, atol=1e-12)
    np.testing.assert_allclose(both[1], [0.3, 0.4, 0.3, 0, 0, 0, 0, 0], atol=1e-12)


def test_intervals_without_singletons_cover_set_valued_m6() -> None:
    """Set-valued M = 6 law, n = 12 (the calibration script's): many datasets miss a
    strategy and have no singleton, so the assemblage had no unseen mass and the interval collapsed
    onto the estimate (coverage of C(n) 0.85-0.87, AUC 0.89-0.92). With the known M_x - S_obs
    strategies given a uniform-prior mass, C(n/2), C(n) and AUC(n) cover >= 0.93 (measured
    0.95-0.97 over 1,000 datasets; 600 here, SE 0.008)."""
    sets = [(0,), (0, 1), (1, 2), (2,), (3,), (3, 4), (4,), (5,), (0, 5)]
    w = np.array([6.0, 4.0, 3.0, 3.0, 2.0, 1.6, 1.0, 0.9, 0.45])
    atoms = np.zeros((len(sets), 6), dtype=bool)
    for r, s in enumerate(sets):
        atoms[r, list(s)] = True
    p = w / w.sum()
    n, D, B = 12, 600, 200
    rng = np.random.default_rng(613)
    X = atoms[rng.choice(len(p), size=(D, n), p=p)]
    truth = est.expected_covered_exact(est.marginals(atoms, p), n) / 6
    point = _estimate(X.sum(1), n, 6, n)
    reps = inext_coverage_replicates(X, 6, n, B, rng)
    for k in (n // 2, n):
        sd = reps[:, :, k - 1].std(1, ddof=1)
        assert np.mean(np.abs(point[:, k - 1] - truth[k - 1]) <= Z95 * sd) >= 0.93, k
    auc_sd = reps.mean(2).std(1, ddof=1)
    assert np.mean(np.abs(point.mean(1) - truth.mean()) <= Z95 * auc_sd) >= 0.93
