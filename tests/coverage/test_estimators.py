"""Estimators against brute-force enumeration, exact expectations and Monte Carlo."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from seffi.coverage import estimators as est


def _brute(X: np.ndarray, m: int, K: int):
    """Average over every k-subset (coverage, full) and every ordered i-tuple (novelty)."""
    n = X.shape[0]
    cov, full, nov = [], [], []
    for k in range(1, min(K, n) + 1):
        subsets = list(itertools.combinations(range(n), k))
        unions = [X[list(s)].any(axis=0) for s in subsets]
        cov.append(np.mean([u.sum() for u in unions]))
        full.append(np.mean([u[:m].all() for u in unions]))
        news = []
        for t in itertools.permutations(range(n), k):
            prev = X[list(t[:-1])].any(axis=0) if k > 1 else np.zeros(X.shape[1], bool)
            news.append(bool((X[t[-1]] & ~prev).any()))
        nov.append(np.mean(news))
    return np.array(cov), np.array(full), np.array(nov)


@pytest.mark.parametrize("set_valued", [False, True])
def test_rarefaction_novelty_full_match_brute_force(set_valued: bool) -> None:
    rng = np.random.default_rng(3)
    n, m = 7, 4
    if set_valued:
        X = rng.random((n, m)) < 0.35
    else:
        X = np.zeros((n, m), bool)
        cat = rng.choice(m + 1, size=n, p=[0.4, 0.25, 0.15, 0.1, 0.1])  # m = "no strategy"
        X[np.flatnonzero(cat < m), cat[cat < m]] = True
    X[0, :] = False
    X[1, 0] = X[2, 1] = X[3, 2] = X[4, 3] = True  # every strategy seen, so F > 0 somewhere
    cov, full, nov = _brute(X, m, K=n)
    np.testing.assert_allclose(est.rarefaction(X, n), cov, atol=1e-12)
    np.testing.assert_allclose(est.full_coverage_samples_many(X[None], m, n)[0], full, atol=1e-12)
    np.testing.assert_allclose(est.novelty_samples_many(X[None], n)[0], nov, atol=1e-12)


def test_estimator_unbiased_where_plugin_is_not() -> None:
    """Exact expectation over every dataset of n = 5 draws: rarefaction equals the truth, plug-in is low."""
    p = np.array([0.55, 0.3, 0.1, 0.05])  # index 3 = "no strategy"
    m, n, K = 3, 5, 5
    truth = est.expected_covered_exact(p[:m], K)
    e_rare, e_plug = np.zeros(n), np.zeros(n)
    for seq in itertools.product(range(4), repeat=n):
        w = np.prod(p[list(seq)])
        X = np.zeros((n, m), bool)
        for t, s in enumerate(seq):
            if s < m:
                X[t, s] = True
        e_rare += w * est.rarefaction(X, K)
        phat = X.mean(axis=0)
        e_plug += w * (1 - (1 - phat[None, :]) ** np.arange(1, n + 1)[:, None]).sum(axis=1)
    np.testing.assert_allclose(e_rare, truth[:n], atol=1e-12)
    assert (truth[1:n] - e_plug[1:n] > 0.01).all()  # plug-in is biased low for k >= 2


def test_single_label_full_coverage_exact_vs_inclusion_exclusion_and_mc() -> None:
    p = np.array([0.3, 0.2, 0.15, 0.12, 0.1, 0.08, 0.05])  # remaining 0.0 -> p0 = 0
    p = p / p.sum() * 0.9  # p0 = 0.1 (off-strategy mass)
    m, K = len(p), 120
    atoms = np.vstack([np.eye(m, dtype=bool), np.zeros((1, m), bool)])
    law = np.r_[p, 0.1]
    F = est.full_coverage_exact(atoms, law, m, K)
    ks = np.arange(1, K + 1)
    ie = np.zeros(K)
    for r in range(m + 1):
        for B in itertools.combinations(range(m), r):
            ie += (-1) ** r * (1 - p[list(B)].sum()) ** ks
    np.testing.assert_allclose(F, ie, atol=1e-12)
    rng = np.random.default_rng(0)
    draws = rng.choice(m + 1, size=(40000, K), p=law)
    first = np.stack([np.where((draws == s).any(1), (draws == s).argmax(1), K) for s in range(m)], 1)
    T = first.max(axis=1) + 1
    mc = (T[:, None] <= ks[None, :]).mean(axis=0)
    assert np.abs(F - mc).max() < 4 * 0.5 / math.sqrt(40000)


def test_full_coverage_dp_large_matches_inclusion_exclusion_tail() -> None:
    """M = 30 Zipf: the banded DP agrees with the integral through E[T] = sum_k Pr[T > k]."""
    p = 1 / np.arange(1, 31)
    p /= p.sum()
    F = est.full_coverage_exact(np.eye(30, dtype=bool), p, 30, 2500)
    assert np.all(np.diff(F) >= -1e-15) and 0 <= F[0] and F[-1] <= 1
    mean_t = est.time_to_full_mean(np.eye(30, dtype=bool), p, 30)
    assert abs((1 + (1 - F[:-1]).sum()) - mean_t) < 1e-3 * mean_t


def test_time_to_full_mean_single_label_vs_coupon_collector() -> None:
    m = 10  # uniform coupon collector: E[T] = m H_m
    val = est.time_to_full_mean(np.eye(m, dtype=bool), np.full(m, 1 / m), m)
    assert abs(val - m * sum(1 / i for i in range(1, m + 1))) < 1e-6


def test_set_valued_exact_vs_monte_carlo() -> None:
    atoms = np.array([[1, 1, 0, 0], [0, 0, 1, 0], [0, 1, 0, 1], [0, 0, 0, 0], [0, 0, 0, 1]], bool)
    p = np.array([0.35, 0.25, 0.2, 0.1, 0.1])
    K, R = 25, 40000
    rng = np.random.default_rng(1)
    draws = rng.choice(len(p), size=(R, K), p=p)
    A = atoms[draws]  # (R, K, M)
    S = np.logical_or.accumulate(A, axis=1)
    prev = np.concatenate([np.zeros((R, 1, 4), bool), S[:, :-1]], axis=1)
    tol = 4 * 0.5 / math.sqrt(R)
    np.testing.assert_allclose(est.full_coverage_exact(atoms, p, 4, K), S.all(axis=2).mean(0), atol=tol)
    np.testing.assert_allclose(est.novelty_exact(atoms, p, K), (A & ~prev).any(2).mean(0), atol=tol)
    cov = est.expected_covered_exact(est.marginals(atoms, p), K)
    np.testing.assert_allclose(cov, S.sum(2).mean(0), atol=4 * 2 / math.sqrt(R))
    # E[T(1)] = sum_{k >= 0} Pr[T > k]; the MC runs above pin F, so the identity checks the closed form.
    F_long = est.full_coverage_exact(atoms, p, 4, 600)
    assert abs(est.time_to_full_mean(atoms, p, 4) - (1 + (1 - F_long).sum())) < 1e-9


def test_chao_extrapolation_formula_and_cap() -> None:
    X = np.zeros((10, 6), bool)
    for t, s in enumerate([0, 0, 0, 1, 1, 2, 3, 0, 1, 0]):
        X[t, s] = True
    # f1 = 2 (strategies 2, 3), f2 = 0 -> f0 = (9/10) * 2 * 1 / 2 = 0.9
    ext = est.chao_extrapolation_counts(X.sum(axis=0), 10, 13, m=6)
    f0 = 0.9
    expect = 4 + f0 * (1 - (1 - 2 / (10 * f0 + 2)) ** np.arange(1, 4))
    np.testing.assert_allclose(ext, expect)
    capped = est.chao_extrapolation_counts(X.sum(axis=0), 10, 13, m=4)  # S_obs = M: nothing left to find
    np.testing.assert_allclose(capped, 4.0)


def test_single_label_full_coverage_dense_dp_equals_banded_dp(monkeypatch: pytest.MonkeyPatch) -> None:
    """The batched matrix DP (k <= DENSE_DP_K) against the banded DP, on random count vectors."""
    rng = np.random.default_rng(11)
    checked = 0
    for _ in range(60):
        n, m = int(rng.integers(2, 90)), int(rng.integers(1, 10))
        kmax = int(rng.integers(1, min(n, est.DENSE_DP_K) + 1))
        labels = rng.integers(-1, m, size=(6, n))  # -1: the sample matches nothing
        Y = np.stack([(labels == s).sum(axis=1) for s in range(m)], axis=1)
        Y = Y[(Y >= 1).all(axis=1)]
        if not len(Y):
            continue
        dense = est._full_single_label_many(Y, n, kmax)
        monkeypatch.setattr(est, "DENSE_DP_K", -1)
        banded = est._full_single_label_many(Y, n, kmax)
        monkeypatch.setattr(est, "DENSE_DP_K", 64)
        np.testing.assert_allclose(dense, banded, rtol=0, atol=1e-12)
        checked += len(Y)
    assert checked > 100


def test_incidence_counts_and_single_label_flags() -> None:
    rng = np.random.default_rng(5)
    X = rng.random((7, 12, 5)) < 0.15
    X[2] = False
    X[3, :, 1:] = False  # single-label (one column)
    Y, single = est.incidence(X)
    np.testing.assert_array_equal(Y, X.sum(axis=1))
    np.testing.assert_array_equal(single, X.sum(axis=2).max(axis=1) <= 1)
    assert single[2] and single[3] and Y.dtype == np.int64


@pytest.mark.parametrize("m", [3, 40])  # fewer columns than distinct counts, and more
def test_rarefaction_counts_equal_the_binomial_formula(m: int) -> None:
    rng = np.random.default_rng(m)
    n, K = 12, 9
    Y = rng.integers(0, n + 1, size=(2, 5, m))
    want = np.array(
        [
            [sum(1 - math.comb(n - int(y), k) / math.comb(n, k) for y in row) for k in range(1, K + 1)]
            for row in Y.reshape(-1, m)
        ]
    ).reshape(2, 5, K)
    np.testing.assert_allclose(est.rarefaction_counts(Y, n, K), want, rtol=0, atol=1e-12)


def test_rarefaction_counts_of_many_rows_sum_their_columns_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """Bootstrap-like counts (2,000 rows of 3 counts out of n), summed a block of rows at a time:
    the same bits as whole columns at once, and the binomial formula."""
    rng = np.random.default_rng(11)
    n, K = 12, 12
    Y = rng.binomial(n, [0.1, 0.5, 0.9], size=(40, 50, 3))
    blocked = est.rarefaction_counts(Y, n, K)
    monkeypatch.setattr(est, "COLUMN_SUM_ROWS", 10**9)
    np.testing.assert_array_equal(blocked, est.rarefaction_counts(Y, n, K))
    for at in range(0, 2000, 97):
        row = Y.reshape(-1, 3)[at]
        want = [sum(1 - math.comb(n - int(y), k) / math.comb(n, k) for y in row) for k in range(1, K + 1)]
        np.testing.assert_allclose(blocked.reshape(-1, K)[at], want, rtol=0, atol=1e-12)
