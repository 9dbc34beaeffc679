"""The paired gain bootstrap: per-input AUCs, input matching, fallbacks and CI calibration.

Calibration design. A pool of P = 2,000 inputs with heterogeneous laws: M_x in 3..8 strategies,
base law p_x ~ Dirichlet(alpha_x) with alpha_x in {0.3, 0.7, 2}, and a policy that samples iid from
the tilted law q_x ~ p_x^(1 - lambda_x) with lambda_x ~ U(0, 1) (no advantage at 0, uniform at 1:
its per-input advantage varies). Per-input truth is exact: AUC = (1/K) sum_k (1/M_x) sum_s
1 - (1 - r_s)^k for r = p_x (iid) and q_x (policy), min(k, M_x)/M_x for the oracle. The target is
the pool's gain from those exact values. Each simulated dataset draws U = 60 inputs without
replacement, runs the policy twice per input for K = 8 samples, and asks ``Curves.gain`` for the
95 % interval against baselines built over the whole pool (so the subset restriction is exercised
too). The policy's per-input AUCs of all datasets come from one ``curves_from_runs`` call (inputs of
every dataset stacked), so 2,000 datasets cost a few seconds.

Expected values. Measured with this design (5 independent seeds, 600-1,000 datasets each, U = 40,
80, 160): the paired percentile interval covered 0.927-0.945 (the small shortfall from 0.95 is the
percentile bootstrap's with a few dozen inputs: its variance lacks the (U - 1)/U factor and the
t-quantile), median width 0.13 at U = 80; the studentized ratio interval
covers 0.950 here (U = 60, 2,000 datasets); an unpaired interval (policy replicates only, baselines
held fixed) covers 0.996-1.000 with 1.65x the width. With D = 2,000 datasets a rate has a binomial
standard error of 0.005, so the paired rate must lie in [0.93, 0.97] (2 SE below the measured
mean, 5 SE above) and the unpaired one must over-cover (>= 0.98) with intervals at least 1.4x
wider (the measured ratio is 1.7 with a per-dataset spread far smaller than 0.3).
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from seffi.coverage import CoverageTracker, Curves, IidBaseline, OracleBaseline
from seffi.coverage.curves import gain_value
from seffi.coverage.resampling import bootstrap_counts
from seffi.coverage.sums_curves import _auc_shares, curves_from_runs

K = 8


def _exact_auc(r: np.ndarray, m: np.ndarray) -> np.ndarray:
    """Exact iid AUC per input: r float (P, M) single-label laws, m int (P,) -> float (P,)."""
    ks = np.arange(1, K + 1)
    return ((1.0 - (1.0 - r[:, None, :]) ** ks[None, :, None]).sum(-1) / m[:, None]).mean(1)


def _pool(rng: np.random.Generator, P: int, mmax: int = 8) -> dict[str, np.ndarray]:
    m = rng.integers(3, mmax + 1, size=P)
    alpha = rng.choice([0.3, 0.7, 2.0], size=P)
    g = rng.gamma(alpha[:, None], size=(P, mmax)) * (np.arange(mmax)[None, :] < m[:, None])
    p = g / g.sum(1, keepdims=True)
    lam = rng.uniform(size=P)
    w = np.where(p > 0, p ** (1.0 - lam[:, None]), 0.0)
    q = w / w.sum(1, keepdims=True)
    ks = np.arange(1, K + 1)
    oracle = (np.minimum(ks[None, :], m[:, None]) / m[:, None]).mean(1)
    return {"m": m, "p": p, "q": q, "A": _exact_auc(q, m), "I": _exact_auc(p, m), "O": oracle}


def _baseline(kind: str, ids: list[str], values: np.ndarray) -> Curves:
    """Exact per-input baseline curves carrying only what the gain reads (see the linking test)."""
    z = np.zeros(K)
    return Curves(
        kind=kind, K=K, coverage=z, novelty=z, expected_new=z, full_coverage=z, auc=float(values.mean()),
        time_to_coverage={}, n_inputs=len(ids), input_keys=[(None, i) for i in ids], input_auc=values,
    )  # fmt: skip


def _runs_first_hits(q: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """First-hit indices (R, M) of K iid single-label draws per run from the laws q (R, M)."""
    cdf = q.cumsum(1)
    draws = (rng.random((q.shape[0], K))[:, :, None] > cdf[:, None, :]).sum(-1)
    hit = draws[:, :, None] == np.arange(q.shape[1])
    return np.where(hit.any(1), hit.argmax(1), -1)


def test_paired_gain_interval_is_calibrated_and_narrower_than_unpaired() -> None:
    rng = np.random.default_rng(2024)
    P, U, R, D, B = 2000, 60, 2, 2000, 400
    pool = _pool(rng, P)
    true = float(gain_value(pool["A"].mean(), pool["I"].mean(), pool["O"].mean()))
    ids = [f"x{x}" for x in range(P)]
    iid, oracle = _baseline("iid", ids, pool["I"]), _baseline("oracle", ids, pool["O"])
    subs = np.sort(np.argsort(rng.random((D, P)), axis=1)[:, :U], axis=1)  # (D, U), no repeats
    x = np.repeat(subs.ravel(), R)
    fh = _runs_first_hits(pool["q"][x], rng)
    stacked = curves_from_runs(fh, np.full(x.size, K), pool["m"][x], K, unit=np.repeat(np.arange(D * U), R),
                               n_boot=0)  # fmt: skip
    a = stacked.input_auc.reshape(D, U)
    hits, widths = {"paired": 0, "unpaired": 0}, {"paired": [], "unpaired": []}
    for d in range(D):
        sub = subs[d]
        policy = dataclasses.replace(
            stacked, auc=float(a[d].mean()), input_auc=a[d], input_valid_auc=None, n_inputs=U,
            input_keys=[("task", ids[i]) for i in sub], n_boot=B, seed=d,
        )  # fmt: skip
        paired = policy.gain(iid, oracle)
        # The unpaired interval on the same data: the policy's own replicates (the same input draws),
        # baselines over the same inputs held fixed.
        old = dataclasses.replace(
            policy, input_keys=None, input_auc=None, auc_reps=bootstrap_counts(np.zeros(U), B, d) @ a[d] / U
        )
        fixed = [dataclasses.replace(c, auc=float(v[sub].mean()), input_keys=None, input_auc=None, n_inputs=U)
                 for c, v in ((iid, pool["I"]), (oracle, pool["O"]))]  # fmt: skip
        unpaired = old.gain(*fixed)
        assert paired.value == pytest.approx(unpaired.value, abs=1e-12)
        assert "not paired" in unpaired.reason and paired.reason is None
        for name, g in (("paired", paired), ("unpaired", unpaired)):
            hits[name] += g.lo <= true <= g.hi
            widths[name].append(g.hi - g.lo)
    rate = {k: v / D for k, v in hits.items()}
    ratio = np.median(np.array(widths["unpaired"]) / np.array(widths["paired"]))
    assert 0.93 <= rate["paired"] <= 0.97, rate
    assert rate["unpaired"] >= 0.98, rate
    assert ratio >= 1.4, ratio


def test_input_auc_is_exact_per_input_auc_for_full_runs_and_mean_is_auc() -> None:
    rng = np.random.default_rng(3)
    R, M = 12, 5
    fh = np.where(rng.random((R, M)) < 0.7, rng.integers(0, K, (R, M)), -1)
    m = np.full(R, M)
    unit = np.repeat(np.arange(4), 3)
    c = curves_from_runs(fh, np.full(R, K), m, K, unit=unit, n_boot=0)
    per_run = np.array([[(fh[r][fh[r] >= 0] < k).sum() / M for k in range(1, K + 1)] for r in range(R)])
    np.testing.assert_allclose(c.input_auc, per_run.mean(1).reshape(4, 3).mean(1))
    assert c.input_auc.mean() == pytest.approx(c.auc)
    # Short runs (left out: only complete ones count): the contributions still average to the AUC.
    lengths = rng.integers(2, K + 1, size=R)
    lengths[::3] = K
    fh_short = np.where(fh < lengths[:, None], fh, -1)
    cs = curves_from_runs(fh_short, lengths, m, K, unit=unit, n_boot=0)
    assert cs.input_auc.mean() == pytest.approx(cs.auc)


def test_input_auc_shares_are_the_derivative_of_the_weighted_auc() -> None:
    """With short runs, a_u - AUC = U x d AUC(w) / d w_u at w = 1 (the definition of the linearisation)."""
    rng = np.random.default_rng(4)
    U = 6
    den = rng.integers(0, 3, size=(U, K)).astype(float) / 2  # fraction of runs still going at k
    den[:, -1] = 0.0  # nobody reaches K: that budget is undefined and skipped
    num = den * rng.random((U, K))

    def weighted_auc(w: np.ndarray) -> float:
        d = w @ den
        ok = d > 0
        return float(((w @ num)[ok] / d[ok]).mean())

    D = den.sum(axis=0)
    ok = D > 0
    a = _auc_shares(num, den, num[:, ok].sum(axis=0) / D[ok], D, ok, U)
    base = weighted_auc(np.ones(U))
    assert a.mean() == pytest.approx(base)
    eps = 1e-6
    for u in range(U):
        w = np.ones(U)
        w[u] += eps
        assert (weighted_auc(w) - base) / eps * U == pytest.approx(a[u] - base, abs=1e-4)


def test_policy_replicates_in_the_gain_are_the_policy_own_bootstrap() -> None:
    t = CoverageTracker(strategies=("a", "b", "c", "d"), task="t")
    rng = np.random.default_rng(5)
    for x in range(25):
        for stream in range(2):
            for _ in range(K):
                t.update(f"x{x}", {str(rng.choice(list("abcd")))}, stream=stream)
    c = t.curves(K, n_boot=300, seed=11)
    assert c.input_keys == [("t", f"x{x}") for x in sorted(range(25), key=str)]
    W = bootstrap_counts(np.zeros(25, dtype=np.int64), 300, 11)
    np.testing.assert_allclose(W @ c.input_auc / 25, c.auc_reps, atol=1e-5)  # float32 products there


def _tracker_and_baselines(n: int = 30, task: str = "t") -> tuple[CoverageTracker, dict, dict]:
    rng = np.random.default_rng(6)
    laws, refs = {}, {}
    t = CoverageTracker(strategies=("a", "b", "c"), task=task)
    for x in range(n):
        p = rng.dirichlet([0.5, 0.5, 0.5])
        laws[f"x{x}"] = dict(zip("abc", p.tolist(), strict=True))
        refs[f"x{x}"] = {s: {s} for s in "abc"}
        for _ in range(K):
            t.update(f"x{x}", {str(rng.choice(list("abc"), p=np.sqrt(p) / np.sqrt(p).sum()))}, valid=True)
    return t, laws, refs


def test_baselines_carry_exact_per_input_aucs() -> None:
    _, laws, refs = _tracker_and_baselines(5)
    iid = IidBaseline.from_probabilities(laws).curves(K)
    orc = OracleBaseline(refs).curves(K)
    assert iid.input_keys == [(None, f"x{x}") for x in range(5)] == orc.input_keys
    p = np.array([[laws[f"x{x}"][s] for s in "abc"] for x in range(5)])
    np.testing.assert_allclose(iid.input_auc, _exact_auc(p, np.full(5, 3)))
    np.testing.assert_allclose(orc.input_auc, np.minimum(np.arange(1, K + 1), 3).mean() / 3)
    assert iid.input_auc.mean() == pytest.approx(iid.auc)
    single = IidBaseline.from_probabilities(laws["x0"]).curves(K)
    assert single.input_keys is None and single.input_auc is None


def test_gain_point_value_unchanged_and_subset_restricts_baselines() -> None:
    t, laws, refs = _tracker_and_baselines(30)
    c = t.curves(K, n_boot=200)
    iid, orc = IidBaseline.from_probabilities(laws).curves(K), OracleBaseline(refs).curves(K)
    g = c.gain(iid, orc)
    assert g.value == pytest.approx(float(gain_value(c.auc, iid.auc, orc.auc)), abs=1e-15)
    assert g.lo < g.value < g.hi and g.reason is None
    assert c.gain(iid, orc) == g
    # Per-input and exact curves get the studentized ratio interval: no bootstrap draws, no seed.
    assert c.gain(iid, orc, seed=1) == g
    # A policy over a subset: baselines restricted to its inputs (point value included).
    sub, _, _ = _tracker_and_baselines(12)
    cs = sub.curves(K, n_boot=200)
    keep = [f"x{x}" for x in range(12)]
    iid_sub = IidBaseline.from_probabilities({k: laws[k] for k in keep}).curves(K)
    gs = cs.gain(iid, orc)
    assert gs.value == pytest.approx(float(gain_value(cs.auc, iid_sub.auc, orc.auc)))
    assert gs == cs.gain(iid_sub, OracleBaseline({k: refs[k] for k in keep}).curves(K))


def test_gain_refuses_inputs_the_baseline_lacks_and_ambiguous_ids() -> None:
    t, laws, refs = _tracker_and_baselines(10)
    c = t.curves(K, n_boot=50)
    few = IidBaseline.from_probabilities({f"x{x}": laws[f"x{x}"] for x in range(6)}).curves(K)
    orc = OracleBaseline(refs).curves(K)
    with pytest.raises(ValueError, match=r"4 input.*iid baseline does not cover"):
        c.gain(few, orc)
    other, _, _ = _tracker_and_baselines(10, task="u")
    both = t.merge(other).curves(K, n_boot=50)
    with pytest.raises(ValueError, match="appears in tasks"):
        both.gain(IidBaseline.from_probabilities(laws).curves(K), orc)


def test_gain_with_a_single_law_and_curves_without_per_input_aucs() -> None:
    t, laws, refs = _tracker_and_baselines(20)
    c = t.curves(K, n_boot=200)
    orc = OracleBaseline(refs).curves(K)
    flat = IidBaseline.from_probabilities({"a": 0.6, "b": 0.3, "c": 0.1}).curves(K)
    g = c.gain(flat, orc)  # one law for every input: a constant column, nothing to pair
    assert g.reason is None and g.lo < g.value < g.hi
    iid = IidBaseline.from_probabilities(laws).curves(K)
    old = iid.to_dict()
    for name in ("input_keys", "input_auc", "input_valid_auc"):
        del old[name]
    legacy = Curves.from_dict(json.loads(json.dumps(old)))
    gl = c.gain(legacy, orc)
    assert gl.value == pytest.approx(c.gain(iid, orc).value) and "partly paired" in gl.reason
    pol = c.to_dict()
    for name in ("input_keys", "input_auc", "input_valid_auc"):
        del pol[name]
    gp = Curves.from_dict(pol).gain(iid, orc)
    assert "not paired" in gp.reason and gp.value == pytest.approx(gl.value)


def test_valid_gain_is_paired_on_valid_aucs() -> None:
    rng = np.random.default_rng(8)
    laws, valid, refs = {}, {}, {}
    t = CoverageTracker(strategies=("a", "b"), task="t")
    for x in range(20):
        pa = float(rng.uniform(0.5, 0.95))
        laws[f"x{x}"] = {frozenset({"a"}): pa, frozenset({"b"}): 1 - pa}
        valid[f"x{x}"] = {frozenset({"a"}): pa / 2, frozenset({"b"}): (1 - pa) / 2, frozenset(): 0.5}
        refs[f"x{x}"] = {"a": {"a"}, "b": {"b"}}
        for _ in range(K):
            t.update(f"x{x}", {"a"} if rng.random() < 0.5 else {"b"}, valid=bool(rng.random() < 0.5))
    c = t.curves(K, n_boot=300, seed=2)
    iid = IidBaseline.from_match_distribution(laws, valid_distribution=valid).curves(K)
    orc = OracleBaseline(refs).curves(K)
    g = c.gain(iid, orc, valid=True)
    assert g.value == pytest.approx(float(gain_value(c.valid_auc, iid.valid_auc, orc.valid_auc)))
    # Fieller's interval, by its definition: at each bound the residual mean d - g e over the 20
    # inputs (matched by id) is exactly t19 standard errors from 0, and within it fewer.
    pos = {k: i for i, (_, k) in enumerate(iid.input_keys)}
    opos = {k: i for i, (_, k) in enumerate(orc.input_keys)}
    ids = [k for _, k in c.input_keys]
    i_u = iid.input_valid_auc[[pos[k] for k in ids]]
    d = c.input_valid_auc - i_u
    e = orc.input_valid_auc[[opos[k] for k in ids]] - i_u

    def studentized(g: float) -> float:
        r = d - g * e
        return float(r.mean() / (r.std(ddof=1) / np.sqrt(20)))

    t19 = 2.093024054  # Student t, 19 df, 97.5 %
    assert abs(studentized(g.lo)) == pytest.approx(t19, rel=1e-4)
    assert abs(studentized(g.hi)) == pytest.approx(t19, rel=1e-4)
    assert all(abs(studentized(x)) < t19 for x in np.linspace(g.lo, g.hi, 9)[1:-1])
    assert g.room == pytest.approx(float(orc.valid_auc - iid.valid_auc)) and g.n_inputs == 20


def test_round_trip_keeps_per_input_fields_and_rejects_corrupted_keys() -> None:
    t, _, _ = _tracker_and_baselines(6)
    c = t.curves(K, n_boot=20)
    rt = Curves.from_dict(json.loads(json.dumps(c.to_dict(), allow_nan=False)))
    assert rt.to_dict() == c.to_dict() and rt.input_keys == c.input_keys
    np.testing.assert_array_equal(rt.input_auc, c.input_auc)
    bad = c.to_dict()
    bad["input_keys"] = bad["input_keys"][:-1]
    with pytest.raises(ValueError, match="one value per input key"):
        Curves.from_dict(bad)
    bad["input_keys"] = [["t", 3]] * 6
    with pytest.raises(ValueError, match="bad input key"):
        Curves.from_dict(bad)


def test_gain_refuses_when_runs_stop_before_k() -> None:
    """An iid policy whose runs all stop at 4 samples, K = 8, has no gain at K.

    Mixing budgets would report a gain from the policy's AUC@4 against the baselines'
    AUC@8 (here -0.167 [-0.273, -0.055]) with ``reason=None``.
    """
    law = {"a": 0.7, "b": 0.2, "c": 0.07, "d": 0.03}
    ids, p = list(law), list(law.values())
    rng = np.random.default_rng(0)
    t = CoverageTracker(ids)
    for x in range(8):
        for s in range(4):
            for _ in range(4):
                t.update(f"x{x}", {ids[rng.choice(4, p=p)]}, stream=s)
    K = 8
    iid = IidBaseline.from_probabilities(law).curves(K)
    oracle = OracleBaseline(num_strategies=4).curves(K)
    # No curves from runs that stop short (they would mix budgets); the error says why.
    with pytest.raises(ValueError, match=r"no run has reached K=8 yet \(32 incomplete runs\)"):
        t.curves(K, n_boot=200)
    # A curve that stops short (here a baseline cut at k = 4 by hand) is refused by Curves.gain.
    cut = dataclasses.replace(iid, coverage=np.r_[iid.coverage[:4], [np.nan] * 4])
    g = cut.gain(iid, oracle)
    assert (g.value, g.lo, g.hi) == (None, None, None)
    assert "policy reaches k=4, iid reaches k=8, oracle reaches k=8" in g.reason
    g = iid.gain(cut, oracle)
    assert g.value is None and "iid reaches k=4" in g.reason
    # Once one run per input reaches K the gain is defined again.
    for x in range(8):
        for _ in range(K):
            t.update(f"x{x}", {ids[rng.choice(4, p=p)]}, stream=9)
    g = t.curves(K, n_boot=50).gain(iid, oracle)
    assert g.value is not None and g.reason is None


def test_one_gain_and_one_time_to_coverage_model() -> None:
    """The report stores ``Curves.gain``'s ``Gain`` and the curves' ``TimeToCoverage``
    as they are (one model each, no alias table); report.json keeps its schema-1 keys."""
    import seffi.report.schema as schema
    from seffi.coverage import Gain, TimeToCoverage
    from seffi.coverage import gain as gain_module

    assert schema.Gain is Gain and schema.TimeToCoverage is TimeToCoverage
    assert gain_value is gain_module.gain_value
    t = CoverageTracker(strategies=("a", "b"))
    for x in range(8):  # enough inputs for the bootstrap over inputs (and its survival band)
        for matches in ({"a"}, {"a"}, {"b"}):
            t.update(f"x{x}", matches)
    c = t.curves(3, n_boot=10, seed=0)
    ttc = c.time_to_coverage["1.0"]
    assert ttc.median == 3.0 and ttc.fraction_censored == 0.0 and ttc.survival == [1.0, 1.0, 0.0]
    assert ttc.survival_lo is not None  # the bootstrap band stays on the coverage side ...
    dumped = schema.CurveSet.from_curves(c, "p").model_dump(mode="json")["time_to_coverage"][-1]
    # ... and report.json holds the point summary under its v1 names.
    assert sorted(dumped) == ["fraction_censored", "median", "restricted_mean", "survival", "tau", "values"]
    iid = IidBaseline.from_probabilities({f"x{x}": {"a": 0.9, "b": 0.1} for x in range(8)}).curves(3)
    g = c.gain(iid, OracleBaseline(strategies=("a", "b")).curves(3))
    result = schema.PolicyResult(curves=schema.CurveSet.from_curves(c, "p"), gain=g)
    assert isinstance(g, Gain) and result.gain is g
    # A Curves dict may spell the censored share "censored"; it loads.
    assert TimeToCoverage.from_dict({"tau": 1.0, "censored": 0.25}).fraction_censored == 0.25


def _harder_mix_gain_coverage(gain_fn, D: int = 2000, U: int = 16, R: int = 4, seed: int = 616) -> float:
    """Share of D datasets whose 95 % gain interval covers 0 for an iid policy (see the test below)."""
    rng = np.random.default_rng(seed)
    P, m = 1000, 6
    p = rng.dirichlet(np.full(m, 0.5), size=P)
    ms = np.full(P, m)
    I_exact = _exact_auc(p, ms)
    o_exact = np.full(P, (np.minimum(np.arange(1, K + 1), m) / m).mean())
    ids = [f"x{x}" for x in range(P)]
    iid, oracle = _baseline("iid", ids, I_exact), _baseline("oracle", ids, o_exact)
    subs = np.sort(np.argsort(rng.random((D, P)), axis=1)[:, :U], axis=1)
    x = np.repeat(subs.ravel(), R)
    fh = _runs_first_hits(p[x], rng)
    stacked = curves_from_runs(fh, np.full(x.size, K), ms[x], K, unit=np.repeat(np.arange(D * U), R),
                               n_boot=0)  # fmt: skip
    a = stacked.input_auc.reshape(D, U)
    hits = 0
    for d in range(D):
        policy = dataclasses.replace(
            stacked, auc=float(a[d].mean()), input_auc=a[d], input_valid_auc=None, n_inputs=U,
            input_keys=[("task", ids[i]) for i in subs[d]], n_boot=200, seed=d,
        )  # fmt: skip
        g = gain_fn(policy, iid, oracle)
        hits += g.lo <= 0.0 <= g.hi
    return hits / D


def test_gain_interval_covers_on_the_harder_input_mix() -> None:
    """The gain interval on the calibration's harder input mix (Dirichlet(0.5) laws
    over 6 strategies, 16 inputs x 4 runs, K = 8, an iid policy: true gain 0).

    The expanded percentile bootstrap covered 0 in 0.907 of the 1,000 calibration datasets; on these
    2 x 2,000 datasets (seeds 616 and 1) it covers 0.9385 and 0.9445 (mean 0.9415), and in 2,000
    datasets of seeds 2 and 3 0.940 and 0.937: its replicates of a mean of heteroscedastic per-input
    differences have lighter tails than the t statistic. The studentized ratio interval covers
    0.9515 / 0.955 (seeds 2, 3: 0.9525, 0.953), and 0.935 in the calibration. With 4,000 datasets
    the rate's binomial SE is 0.0035, and the paired difference is +0.010 to +0.016 on every seed:
    >= 0.947 sits about 1.5 SE above the percentile bootstrap and 2 SE below the studentized interval.
    """
    from seffi.coverage.gain import paired_gain

    rates = [_harder_mix_gain_coverage(paired_gain, seed=seed) for seed in (616, 1)]
    assert 0.947 <= float(np.mean(rates)) <= 0.97, rates
