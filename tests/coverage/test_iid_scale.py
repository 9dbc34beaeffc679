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


def test_set_valued_novelty_interval_the_same_at_any_declared_m() -> None:
    """Set-valued samples naming <= 10 strategies, declared among M = 10, 63, 200 and 1,000 (each
    strategy seen twice or never, so the unseen ones get a prior's mass): the curves
    and their intervals exist at every M, and N(i)'s interval at i <= n/2 is estimate +- t_{n-1} x the
    delete-one jackknife sd, recomputed here by dropping each sample in turn (brute force)."""
    from seffi.coverage.resampling import t_quantile

    rng = np.random.default_rng(21)
    n, K = 16, 8
    X = np.tile(rng.random((n // 2, 10)) < 0.4 / np.arange(1, 11) ** 0.5, (2, 1))  # no singletons
    jack = np.array([est.novelty_samples_many(np.delete(X, drop, axis=0)[None], K)[0] for drop in range(n)])
    sd = np.sqrt((n - 1) / n * ((jack - jack.mean(axis=0)) ** 2).sum(axis=0))
    for M in (10, 63, 200, 1000):
        cols = [f"s{j}" for j in range(M)]
        samples = [[cols[j] for j in np.flatnonzero(r)] for r in X]
        c = IidBaseline.from_samples(samples, strategies=cols).curves(2 * n, n_boot=50, seed=3)
        half = np.arange(n // 2)
        assert np.allclose(c.novelty[:n], est.novelty_samples_many(X[None], n)[0], atol=1e-12)
        inside = (c.novelty_lo[half] > 0) & (c.novelty_hi[half] < 1)
        np.testing.assert_allclose(
            (c.novelty_hi - c.novelty_lo)[half][inside],
            2 * t_quantile(0.95, n - 1) * sd[half][inside],
            rtol=1e-9,
        )
        for name in ("coverage", "novelty", "full_coverage"):
            lo, hi, pt = (getattr(c, name + x) for x in ("_lo", "_hi", ""))
            assert np.isfinite(lo).all() and np.isfinite(hi).all() and (lo <= pt + 1e-12).all(), (M, name)
        assert c.auc_lo < c.auc < c.auc_hi


def test_set_valued_inputs_naming_different_strategies_over_62_in_all() -> None:
    """Four inputs each naming its own 20 of 80 declared strategies (80 named in all): the mean
    curves equal each input's alone, with intervals around them."""
    rng = np.random.default_rng(22)
    cols = [f"s{j}" for j in range(80)]
    samples = {}
    for u in range(4):
        X = rng.random((12, 20)) < 0.15
        samples[f"x{u}"] = [[cols[20 * u + j] for j in np.flatnonzero(r)] for r in X]
    alone = [
        IidBaseline.from_samples(samples[x], strategies=cols).curves(12, n_boot=0) for x in sorted(samples)
    ]
    c = IidBaseline.from_samples(samples, strategies=cols).curves(12, n_boot=40, seed=1)
    for name in ("coverage", "novelty", "full_coverage"):
        want = np.mean([getattr(a, name) for a in alone], axis=0)
        np.testing.assert_allclose(getattr(c, name), want, rtol=0, atol=1e-12, err_msg=name)
        assert (getattr(c, name + "_lo") <= want + 1e-12).all() and (
            want <= getattr(c, name + "_hi") + 1e-12
        ).all()
    assert (c.novelty_hi - c.novelty_lo)[:6].min() > 0


def test_set_valued_samples_naming_more_than_62_strategies_refused_in_one_line() -> None:
    """The remaining set-valued limit, 62 strategies named within one input: one ValueError line, at
    construction, saying what to do."""
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
    got = est.full_coverage_samples_many(X[None], m, n)[0]
    for k in range(1, n + 1):
        want = np.mean([X[list(s)].any(axis=0).all() for s in itertools.combinations(range(n), k)])
        assert abs(got[k - 1] - want) <= 4 * max(math.sqrt(want * (1 - want) / est.PERMUTATIONS), 1e-12)
    cols = [f"s{j}" for j in range(m)]
    c = IidBaseline.from_samples([[cols[j] for j in np.flatnonzero(r)] for r in X], strategies=cols).curves(
        16
    )
    assert any("Monte Carlo over 4000 random orders" in note for note in c.notes)
    np.testing.assert_array_equal(c.full_coverage[:n], got)


def _mixed_inputs(rng: np.random.Generator) -> tuple[dict, dict, dict]:
    """Inputs of different n and M, single-label and set-valued, with correctness."""
    samples, valid, ms = {}, {}, {}
    for u, (n, m, set_valued) in enumerate(
        [
            (8, 4, False),
            (20, 6, False),
            (20, 6, False),
            (20, 6, True),
            (33, 5, True),
            (8, 4, False),
            (20, 6, True),
        ]
    ):
        ids = [f"s{j}" for j in range(m)]
        if set_valued:
            rows = [
                [ids[j] for j in np.flatnonzero(rng.random(m) < 0.5 / np.arange(1, m + 1))] for _ in range(n)
            ]
        else:
            rows = [[ids[j]] if j < m else [] for j in rng.choice(m + 1, size=n)]
        samples[f"x{u}"], valid[f"x{u}"], ms[f"x{u}"] = rows, list(rng.random(n) < 0.6), m
    return samples, valid, ms


def test_inputs_batched_in_chunks_give_each_input_alone_averaged(monkeypatch: pytest.MonkeyPatch) -> None:
    """Point curves over inputs of several n and M (processed as arrays, in chunks) equal the mean of
    each input's baseline alone, chunk size aside; each input's AUC is its own coverage's mean."""
    from seffi.coverage import samples as samples_module

    samples, valid, ms = _mixed_inputs(np.random.default_rng(5))
    K = 24
    alone = [
        IidBaseline.from_samples(samples[x], num_strategies=ms[x], valid=valid[x]).curves(K, n_boot=0)
        for x in sorted(samples)
    ]
    for chunk_bytes in (1, samples_module.CHUNK_BYTES):
        monkeypatch.setattr(samples_module, "CHUNK_BYTES", chunk_bytes)
        c = IidBaseline.from_samples(samples, num_strategies=ms, valid=valid).curves(K, n_boot=30, seed=1)
        for name in ("coverage", "novelty", "expected_new", "full_coverage", "valid_coverage", "valid_at_k"):
            want = np.mean([getattr(a, name) for a in alone], axis=0)
            np.testing.assert_allclose(getattr(c, name), want, rtol=0, atol=1e-12, err_msg=name)
        rarity = np.mean([a.coverage_by_rarity for a in alone], axis=0)
        np.testing.assert_allclose(c.coverage_by_rarity, rarity, rtol=0, atol=1e-12)
        np.testing.assert_allclose(c.input_auc, [a.auc for a in alone], rtol=0, atol=1e-12)
        np.testing.assert_allclose(c.input_valid_auc, [a.valid_auc for a in alone], rtol=0, atol=1e-12)
        assert [k for _, k in c.input_keys] == sorted(samples)
        assert c.extrapolated.tolist() == [k > 8 for k in range(1, K + 1)]
        assert c.samples == sum(len(v) for v in samples.values()) and c.n_inputs == len(samples)
        assert c.coverage_lo is not None and (c.coverage_lo <= c.coverage + 1e-12).all()
        assert c.full_coverage_lo is not None and c.auc_reps.shape == (30,)


def test_time_to_coverage_from_sample_orders_matches_every_subset() -> None:
    """Pr[T(tau) > k] at k <= n is the share of k-subsets of the samples covering fewer than
    ceil(tau M) strategies (brute force), within the Monte Carlo error of 256 orders per input over
    80 copies of the input (20,480 orders)."""
    ids = ["a", "b", "c", "d"]
    rows = [["a"], ["a", "b"], [], ["c"], ["a"], ["b", "d"], ["a"]]
    n, K = len(rows), 7
    c = IidBaseline.from_samples({f"x{u}": rows for u in range(80)}, strategies=ids).curves(K, n_boot=0)
    for tau, need in ((0.5, 2), (0.8, 4)):
        surv = c.time_to_coverage[f"{tau:g}"].survival
        for k in range(1, n + 1):
            subsets = list(itertools.combinations(rows, k))
            want = np.mean([len(set().union(*map(set, s))) < need for s in subsets])
            assert surv[k - 1] == pytest.approx(want, abs=4 * 0.5 / math.sqrt(20_480)), (tau, k)
