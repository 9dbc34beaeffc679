"""The iid baseline from samples at any M, against brute force and the exact law.

References: averages over every k-subset / ordered i-tuple of the samples (brute force), the exact
U-statistic where it exists, closed forms with ``math.comb``. Its cost in n is measured in
``benchmarks/coverage.py``.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from seffi.coverage import IidBaseline
from seffi.coverage import estimators as est


def test_single_label_samples_over_100_strategies() -> None:
    """M = 100 single-label strategies (above the set-valued limit of 62): coverage, novelty and
    expected new strategies at k <= n equal their closed forms from the incidence counts."""
    M, n, K = 100, 60, 80
    cols = [f"s{j}" for j in range(M)]
    rng = np.random.default_rng(11)
    p = 1.0 / np.arange(1, M + 1)
    draws = rng.choice(M + 1, size=n, p=np.r_[p / p.sum() * 0.9, 0.1])  # M = "matches nothing"
    samples = [[cols[d]] if d < M else [] for d in draws]
    c = IidBaseline.from_samples(samples, strategies=cols).curves(K, n_boot=50, seed=2)
    Y = np.bincount(draws[draws < M], minlength=M)
    for k in (1, 5, 30, n):
        want = sum(1 - math.comb(n - y, k) / math.comb(n, k) for y in Y) / M
        assert c.coverage[k - 1] == pytest.approx(want, abs=1e-12)
    for i in (1, 2, 10, n):  # Pr[sample i is new] = (1/n) sum_s Y_s C(n - Y_s, i - 1) / C(n - 1, i - 1)
        want = sum(y * math.comb(n - y, i - 1) for y in Y if y) / math.comb(n - 1, i - 1) / n
        assert c.novelty[i - 1] == pytest.approx(want, abs=1e-12)
        assert c.expected_new[i - 1] == pytest.approx(want, abs=1e-12)
    assert c.extrapolated[n:].all() and np.isfinite(c.coverage_hi).all()


def test_set_valued_samples_may_name_few_of_many_declared_strategies() -> None:
    """Set-valued samples naming 8 of 80 declared strategies: novelty equals brute force over every
    ordered tuple of the samples."""
    cols = [f"s{j}" for j in range(80)]
    rng = np.random.default_rng(4)
    n = 6
    X = np.zeros((n, 80), dtype=bool)
    X[:, rng.choice(80, 8, replace=False)] = rng.random((n, 8)) < 0.35
    samples = [[cols[j] for j in np.flatnonzero(r)] for r in X]
    c = IidBaseline.from_samples(samples, strategies=cols).curves(n, n_boot=0)
    for i in range(1, n + 1):
        news = []
        for t in itertools.permutations(range(n), i):
            seen = X[list(t[:-1])].any(axis=0) if i > 1 else np.zeros(80, bool)
            news.append(bool((X[t[-1]] & ~seen).any()))
        assert c.novelty[i - 1] == pytest.approx(np.mean(news), abs=1e-12)


def test_set_valued_samples_naming_more_than_62_strategies_refused_in_one_line() -> None:
    """The remaining set-valued limit: one ValueError line, at construction, saying what to do."""
    cols = [f"s{j}" for j in range(70)]
    samples = [[cols[j], cols[(j + 1) % 70]] for j in range(70)]  # pairs: set-valued, all 70 named
    with pytest.raises(ValueError) as info:
        IidBaseline.from_samples(samples, strategies=cols)
    text = str(info.value)
    assert "\n" not in text and "at most 62" in text and "single-label" in text
    IidBaseline.from_samples([[c] for c in cols], strategies=cols).curves(10, n_boot=0)  # single-label: fine


def test_set_valued_full_coverage_beyond_20_strategies_within_its_stated_error() -> None:
    """Set-valued F(k) with M = 24 (too many subsets to enumerate: Monte Carlo): the share of random sample
    orders equals the fraction of covering k-subsets (brute force) within 4 standard errors."""
    m, n = 24, 12
    rng = np.random.default_rng(8)
    X = rng.random((n, m)) < 0.3
    X[np.arange(m) % n, np.arange(m)] = True  # every strategy seen
    got = est.full_coverage_samples(X, m, n)
    for k in range(1, n + 1):
        want = np.mean([X[list(s)].any(axis=0).all() for s in itertools.combinations(range(n), k)])
        assert abs(got[k - 1] - want) <= 4 * max(math.sqrt(want * (1 - want) / est.PERMUTATIONS), 1e-12)
    cols = [f"s{j}" for j in range(m)]
    c = IidBaseline.from_samples([[cols[j] for j in np.flatnonzero(r)] for r in X], strategies=cols).curves(
        16
    )
    assert any("Monte Carlo over 4000 random orders" in note for note in c.notes)
    np.testing.assert_array_equal(c.full_coverage[:n], got)
