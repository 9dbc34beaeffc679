"""The iid baseline estimated from n samples at the edges: F intervals, beyond n, flags.

Fast versions of the iid rows of ``benchmarks/calibration.py`` (there: 1,000 datasets per case).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from seffi.coverage import IidBaseline, OracleBaseline
from seffi.coverage.samples import _beyond_n, full_trials, model_law, wilson_interval
from seffi.report import keys
from seffi.report.schema import Comparison, CurveSet, Report

UNIFORM4 = ("a", "b", "c", "d")
#: The set-valued M = 6 law of the calibration script: true T(1) median 16 (n = 12 samples).
SET6_SETS = [(0,), (0, 1), (1, 2), (2,), (3,), (3, 4), (4,), (5,), (0, 5)]
SET6_W = np.array([6.0, 4.0, 3.0, 3.0, 2.0, 1.6, 1.0, 0.9, 0.45])
SET6_COLS = [f"s{j}" for j in range(6)]


def _set6() -> dict[frozenset[str], float]:
    p = SET6_W / SET6_W.sum()
    return {frozenset(SET6_COLS[j] for j in s): float(q) for s, q in zip(SET6_SETS, p, strict=True)}


def _draw(law: dict[frozenset[str], float], rng: np.random.Generator, n: int) -> list[frozenset[str]]:
    keys_ = list(law)
    return [keys_[i] for i in rng.choice(len(keys_), size=n, p=list(law.values()))]


def test_full_coverage_interval_covers_and_is_never_zero_width_uniform_m4_n8() -> None:
    """Uniform M = 4, n = 8: the F(8) and F(4) intervals cover the truth >= 0.9 of the
    time and none is zero-width (+- z sd around the U-statistic covers F(8) 64 % of the time
    and 33 % of its intervals have zero width)."""
    law = {frozenset({s}): 0.25 for s in UNIFORM4}
    truth = IidBaseline.from_match_distribution(law).curves(8).full_coverage
    rng = np.random.default_rng(13)
    hits, widths = [], []
    for d in range(150):
        c = IidBaseline.from_samples(_draw(law, rng, 8), strategies=UNIFORM4).curves(8, n_boot=20, seed=d)
        for k in (4, 8):
            lo, hi = c.full_coverage_lo[k - 1], c.full_coverage_hi[k - 1]
            hits.append(lo - 1e-12 <= truth[k - 1] <= hi + 1e-12)
            widths.append(hi - lo)
    assert np.mean(hits) >= 0.9
    assert min(widths) > 0.1


def test_wilson_interval_with_hoeffding_trials() -> None:
    """The F(k) interval at k <= n is Wilson with floor(n / k) trials, exact (Clopper-
    Pearson) at 0 and 1, and no trials beyond n."""
    np.testing.assert_array_equal(full_trials(8, 10), [8, 4, 2, 2, 1, 1, 1, 1, 0, 0])
    np.testing.assert_array_equal(full_trials(np.array([8, 3]), 4), [11, 5, 3, 0])  # k = 4 > 3: none
    lo, hi = wilson_interval(np.array([0.0, 1.0, 0.5]), np.array([1.0, 1.0, 4.0]), 1.959963984540054)
    np.testing.assert_allclose(lo[:2], [0.0, 0.025])
    np.testing.assert_allclose(hi[:2], [0.975, 1.0])
    # Wilson at p = 1/2, t = 4: centre 1/2, half-width z / (1 + z^2/4) sqrt(1/16 + z^2/64)
    z = 1.959963984540054
    half = z / (1 + z * z / 4) * math.sqrt(1 / 16 + z * z / 64)
    np.testing.assert_allclose([lo[2], hi[2]], [0.5 - half, 0.5 + half])


def test_full_coverage_and_time_to_full_beyond_n_are_nearly_unbiased_set_valued() -> None:
    """Set-valued M = 6, n = 12, K = 30: F(k > n) is the law of finding the missing
    strategies, not a flat copy of F(n); its mean over datasets is within 0.06 of the truth, and the
    T(1) censored fraction within 0.06 of the true 0.173 (a flat copy biases F(22) by -0.34 and
    reports T(1) censored in 64-66 % of datasets)."""
    law = _set6()
    K, n = 30, 12
    truth = IidBaseline.from_match_distribution(law, strategies=SET6_COLS).curves(K)
    rng = np.random.default_rng(5)
    f, cens, grew = [], [], []
    for d in range(150):
        c = IidBaseline.from_samples(_draw(law, rng, n), strategies=SET6_COLS).curves(K, n_boot=0, seed=d)
        f.append(c.full_coverage)
        cens.append(c.time_to_coverage["1.0"].fraction_censored)
        if c.full_coverage[n - 1] == 0.0:
            grew.append(c.full_coverage[-1] > c.full_coverage[n])
        assert c.extrapolated[n:].all() and not c.extrapolated[:n].any()
    f = np.mean(f, axis=0)
    for k in (13, 22, 30):
        assert abs(f[k - 1] - truth.full_coverage[k - 1]) < 0.06, k
    assert abs(np.mean(cens) - truth.time_to_coverage["1.0"].fraction_censored) < 0.06
    assert all(grew) and grew  # never flat where the missing strategies can still be found


def test_beyond_n_closed_forms() -> None:
    """After n samples with u strategies missing, each at the model's per-draw
    probability r, F(n + j) is (1 - (1 - r)^j)^u (set-valued) or the single-label occupancy law, and
    T(tau) survival is Pr[S_obs + found < ceil(tau M)] (not the flat F(n + j) = F(n))."""
    Y = np.array([[5, 4, 0, 0], [5, 4, 3, 0], [3, 3, 2, 2]])
    n, m = 12, 4
    single = np.array([False, True, False])
    q = model_law(Y, n, m, single)
    full, surv = _beyond_n(Y, n, m, single, 3, [3, 4])
    r0 = q[0, 2]
    assert q[0, 3] == pytest.approx(r0) and r0 > 0
    j = np.arange(1, 4)
    np.testing.assert_allclose(full[0], (1 - (1 - r0) ** j) ** 2)
    np.testing.assert_allclose(surv[0, 0], (1 - r0) ** (2 * j))  # need 3: one of two missing found
    r1 = q[1, 3]
    np.testing.assert_allclose(full[1], 1 - (1 - r1) ** j)  # one missing: single-label, found w.p. r
    np.testing.assert_allclose(full[2], 1.0)
    np.testing.assert_allclose(surv[:, 2], 0.0)


def test_coverage_interval_does_not_collapse_without_singletons() -> None:
    """M = 6 declared, 3 strategies seen 4-8 times each and none once: the C(n)
    interval must reach well above S_obs / M (an assemblage without unseen mass would see exactly the
    3 strategies in every replicate: the interval [0.5, 0.5])."""
    samples = [{"s0"}] * 6 + [{"s1"}] * 4 + [{"s2"}] * 2 + [{"s0", "s1"}] * 2 + [{"s2"}] * 2
    c = IidBaseline.from_samples(samples, strategies=SET6_COLS).curves(16, n_boot=200, seed=1)
    assert c.coverage[-1] == pytest.approx(0.5)
    assert c.coverage_hi[-1] > 0.6
    assert c.full_coverage_hi[-1] > 0.5  # F(n) = 0 here, but the law is far from known


def test_extrapolation_reaches_gain_report_json_and_wandb_summary(tmp_path) -> None:
    """An iid baseline from n = 4 samples at K = 8 is extrapolated from k = 5: the gain
    against it says so, report.json's iid curve set carries ``extrapolated`` and the W&B summary the
    key ``seffi/iid_extrapolated_from_k`` = 5; an
    exact baseline adds neither."""
    inputs = [f"x{u}" for u in range(6)]
    rng = np.random.default_rng(3)
    law = {s: 0.25 for s in UNIFORM4}
    policy = IidBaseline.from_probabilities({x: law for x in inputs}).curves(8)
    iid = IidBaseline.from_samples(
        {x: [[UNIFORM4[j]] for j in rng.integers(0, 4, 4)] for x in inputs}, strategies=UNIFORM4
    ).curves(8, n_boot=20)
    oracle = OracleBaseline({x: {s: {s} for s in UNIFORM4} for x in inputs}).curves(8)
    g = policy.gain(iid, oracle, n_boot=50)
    assert g.value is not None and "extrapolated beyond its samples from k = 5" in g.reason
    exact = IidBaseline.from_probabilities({x: law for x in inputs}).curves(8)
    assert policy.gain(exact, oracle, n_boot=50).reason is None
    comp = Comparison.from_curves(task="t", policies={"p": policy}, iid=iid, oracle=oracle)
    report = Report(comparisons=[comp])
    assert report.comparisons[0].iid.extrapolated == [False] * 4 + [True] * 4
    summary = keys.report_scalars(report)
    assert summary[keys.iid_extrapolated_key()] == 5.0
    plain_comp = Comparison.from_curves(task="t", policies={"p": policy}, iid=exact, oracle=oracle)
    plain = Report(comparisons=[plain_comp])
    assert keys.iid_extrapolated_key() not in keys.report_scalars(plain)
    assert CurveSet.from_curves(exact, "iid").extrapolated is None


def test_set_valued_from_samples_flat_law_reaches_full_coverage_at_n() -> None:
    """A flat set-valued law where every strategy appears (n = 40, M = 15, K = 60, 200
    replicates): F(n) is 1 and its interval reaches below 0.1, the n samples being one trial."""
    M, n, K = 15, 40, 60
    cols = [f"s{j}" for j in range(M)]
    rng = np.random.default_rng(0)
    samples = [[cols[j] for j in np.flatnonzero(r)] for r in rng.random((n, M)) < 0.25]
    base = IidBaseline.from_samples(samples, strategies=cols)
    c = base.curves(K, n_boot=200, seed=1)
    assert c.full_coverage[n - 1] == 1.0 and c.full_coverage_lo[n - 1] < 0.1  # F(n): one trial


def _set6_novelty_intervals(
    D: int, n: int = 12, k: int = 6
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """N(k) estimates, lo, hi over D datasets of n samples from the set-valued M = 6 law; the truth."""
    law = _set6()
    truth = float(IidBaseline.from_match_distribution(law, strategies=SET6_COLS).curves(n).novelty[k - 1])
    atoms, p = list(law), np.array(list(law.values()))
    rng = np.random.default_rng(606)
    out = np.zeros((3, D))
    for d in range(D):
        draws = [sorted(atoms[i]) for i in rng.choice(len(atoms), size=n, p=p / p.sum())]
        c = IidBaseline.from_samples(draws, strategies=SET6_COLS).curves(n, n_boot=50, seed=d)
        out[:, d] = c.novelty[k - 1], c.novelty_lo[k - 1], c.novelty_hi[k - 1]
    return out[0], out[1], out[2], truth


def test_delete_one_novelty_equals_recomputing_without_each_sample() -> None:
    """The one-pass delete-one novelty U-statistics behind the jackknife sd equal
    ``novelty_samples_many`` on the n datasets without one sample each (empty and repeated match
    sets included), for three inputs using different columns in one call."""
    from seffi.coverage import estimators as est
    from seffi.coverage.samples import delete_one_novelty

    rng = np.random.default_rng(13)
    for n, m, dens in ((12, 6, 0.3), (30, 10, 0.2), (5, 3, 0.6), (8, 4, 0.05)):
        X = rng.random((3, n, m)) < dens
        X[:, 1] = X[:, 0]  # a repeated match set
        X[1, :, 0] = False  # the inputs use different columns
        keep = np.nonzero(~np.eye(n, dtype=bool))[1].reshape(n, n - 1)
        got = delete_one_novelty(X, n - 1)
        for d in range(3):
            want = est.novelty_samples_many(X[d][keep], n - 1)
            np.testing.assert_allclose(got[d], want, atol=1e-12)
        assert delete_one_novelty(X, 2).shape == (3, n, 2)


def test_set_valued_novelty_interval_has_the_jackknife_width() -> None:
    """Set-valued N(n/2) from samples (the M = 6 law, n = 12, N(6) = 0.265).

    The pooled bootstrap sd of the novelty U-statistic is too small there: over these 300 datasets
    its mean half-width is 0.85 of 1.96 x the estimates' own sd, and its interval covers N(6)
    0.927 (calibration, 1,000 datasets: 0.915-0.925). With the delete-one jackknife sd and a
    t_{n-1} quantile at i <= n/2 the ratio is 1.29 and the coverage 0.940 (calibration
    0.935-0.947). Bands: the sd of 300 estimates is known to ~4%, so the width ratio must lie in
    [1.0, 1.5]; the coverage (SE 0.014) must be >= 0.93, which the pooled bootstrap's 0.927 misses.
    """
    est_, lo, hi, truth = _set6_novelty_intervals(300)
    ratio = float(np.mean((hi - lo) / 2) / (1.959964 * est_.std()))
    cover = float(np.mean((lo <= truth + 1e-12) & (truth - 1e-12 <= hi)))
    assert 1.0 <= ratio <= 1.5, ratio
    assert cover >= 0.93, cover


def test_jackknife_sd_replaces_the_spread_at_low_degree_only() -> None:
    """``jackknife_novelty_sd`` sets the replicates' sd at i <= n/2 to the delete-one
    jackknife sd times t_{n-1}/z (random signs where the replicates did not move) and leaves i > n/2
    alone."""
    from seffi.coverage import estimators as est
    from seffi.coverage.resampling import normal_quantile, t_quantile
    from seffi.coverage.samples import delete_one_novelty, jackknife_novelty_sd

    rng = np.random.default_rng(3)
    n = 12
    X = rng.random((n, 6)) < 0.3
    jack = delete_one_novelty(X[None], n // 2)[0]
    want = np.sqrt((n - 1) / n * ((jack - jack.mean(0)) ** 2).sum(0))
    want *= t_quantile(0.95, n - 1) / normal_quantile(0.95)
    base = np.tile(est.novelty_samples_many(X[None], n)[0], (40, 1))
    base[:, 3:] += rng.normal(0.0, 0.01, size=(40, n - 3))  # columns 1-3 do not move at all
    out = jackknife_novelty_sd(X[None], base[None], 0.95, np.random.default_rng(0))[0]
    np.testing.assert_allclose(out[:, : n // 2].std(axis=0, ddof=1), want, rtol=1e-9)
    np.testing.assert_allclose(out.mean(axis=0), base.mean(axis=0), atol=1e-12)
    np.testing.assert_array_equal(out[:, n // 2 :], base[:, n // 2 :])


def test_covered_by_prefixes_is_a_fisher_yates_shuffle_of_the_same_uniforms() -> None:
    """Each run against a plain partial Fisher-Yates shuffle fed position t's uniforms, run by run.

    The uniforms are drawn as ``runs x inputs`` values per position, position after position: the
    stream every time-to-coverage estimate and its seed depend on.
    """
    from seffi.coverage.samples import _covered_by_prefixes

    rng = np.random.default_rng(2)
    for D, n, m, rate, kn in [(4, 9, 3, 0.3, 9), (3, 20, 70, 0.03, 12), (2, 6, 130, 0.05, 4)]:
        X = rng.random((D, n, m)) < rate
        runs = 5
        got = _covered_by_prefixes(X, X.any(axis=1), runs, kn, np.random.default_rng(9))
        draws = np.random.default_rng(9)
        u = np.stack([draws.random(D * runs) for _ in range(kn)])  # (kn, D * runs)
        want = np.zeros((D, runs, kn), dtype=np.int64)
        for r in range(D * runs):
            d, order, seen = r // runs, list(range(n)), np.zeros(m, dtype=bool)
            for t in range(kn):
                j = t + int(u[t, r] * (n - t))
                order[t], order[j] = order[j], order[t]
                seen |= X[d, order[t]]
                want[d, r % runs, t] = seen.sum()
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("n", [1, 2, 16, 64, 65])
def test_bootstrap_binomial_draws_follow_the_binomial_law(n):
    """The bootstrap's binomial counts have Binomial(n, p)'s pmf, p = 0 and 1 included (max error 4 SE)."""
    from seffi.coverage.samples import _binomial

    p = np.array([0.0, 1.0, 0.5, 0.03, 0.97, 1e-9, 0.3])
    draws = 100_000
    d = _binomial(n, np.tile(p, (2, 1)), np.random.default_rng(3), draws)
    assert d.shape == (draws, 2, p.size) and d.dtype == np.int64
    for i, pi in enumerate(p):
        pmf = np.array([math.comb(n, j) * pi**j * (1 - pi) ** (n - j) for j in range(n + 1)])
        freq = np.bincount(d[:, 1, i], minlength=n + 1) / draws
        se = np.sqrt(pmf * (1 - pmf) / draws) + 1e-6
        assert np.all(np.abs(freq - pmf) <= 4 * se + 1e-12), (pi, np.abs(freq - pmf).max())


def test_blocks_computed_in_any_order_give_the_same_curves(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each block draws from its own streams: computed in reverse order (as another process may) and
    summed in block order, the curves equal ``curves``' to the last bit; blocks draw different numbers."""
    from seffi.coverage import samples as samples_module

    monkeypatch.setattr(samples_module, "CHUNK_BYTES", 1)  # one input per chunk
    monkeypatch.setattr(samples_module, "BLOCK_CHUNKS", 2)
    rng = np.random.default_rng(4)
    ids = ["a", "b", "c"]
    samples = {f"x{u}": [[s for s in ids if rng.random() < 0.4] for _ in range(9)] for u in range(7)}
    iid = IidBaseline.from_samples(samples, strategies=ids)
    want = iid.curves(6, n_boot=40, seed=3)
    plan = iid._plan(6, n_boot=40, seed=3, rarity_bins=4, ci_level=0.95)
    assert plan.blocks == 4
    sums = {b: plan.block(b) for b in reversed(range(plan.blocks))}
    got = plan.curves(sums[b] for b in range(plan.blocks))
    for name in ("coverage_lo", "coverage_hi", "novelty_lo", "full_coverage_hi", "auc_reps", "input_auc"):
        np.testing.assert_array_equal(getattr(got, name), getattr(want, name), err_msg=name)
    # The same input in two blocks (one chunk each) gets other replicates: the blocks' streams differ.
    monkeypatch.setattr(samples_module, "BLOCK_CHUNKS", 1)
    same = IidBaseline.from_samples(
        {"x0": samples["x0"], "x1": samples["x0"], "x2": samples["x0"]}, strategies=ids
    )
    plan = same._plan(6, n_boot=40, seed=3, rarity_bins=4, ci_level=0.95)
    first, second = plan.block(0).reps["coverage"], plan.block(1).reps["coverage"]
    assert not np.allclose(first, second)
