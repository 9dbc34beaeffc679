"""Baselines against Monte Carlo, per-input aggregation, oracle DP, gain and bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest

from seffi.coverage import CoverageTracker, IidBaseline, OracleBaseline
from seffi.coverage import estimators as est
from tests.coverage import references
from tests.coverage.references import full_coverage_by_loops, novelty_by_loops

LAW = {frozenset({"a", "b"}): 0.35, frozenset({"c"}): 0.25, frozenset({"b", "d"}): 0.2, frozenset(): 0.2}
IDS = ("a", "b", "c", "d")


def test_exact_set_valued_iid_matches_tracker_monte_carlo() -> None:
    K, R = 12, 3000
    rng = np.random.default_rng(5)
    keys = list(LAW)
    t = CoverageTracker(strategies=IDS)
    for r in range(R):
        for j in rng.choice(len(keys), size=K, p=list(LAW.values())):
            t.update(f"x{r}", keys[j])
    mc = t.curves(K, n_boot=0)
    ex = IidBaseline.from_match_distribution(LAW, strategies=IDS).curves(K)
    tol = 4 * 0.5 / math.sqrt(R)
    for name in ("coverage", "novelty", "full_coverage"):
        np.testing.assert_allclose(getattr(ex, name), getattr(mc, name), atol=tol)
    for key in ("0.5", "0.8", "1.0"):
        np.testing.assert_allclose(
            ex.time_to_coverage[key].survival, mc.time_to_coverage[key].survival, atol=tol + 0.02
        )
    assert ex.kind == "iid" and ex.coverage_lo is None


def test_per_input_aggregation_is_mean_over_inputs() -> None:
    laws = {
        "x": {frozenset({"a"}): 0.9, frozenset({"b"}): 0.1},
        "y": {frozenset({"a"}): 0.5, frozenset({"b"}): 0.5},
    }
    both = IidBaseline.from_match_distribution(laws).curves(6)
    parts = [IidBaseline.from_match_distribution(v).curves(6) for v in laws.values()]
    np.testing.assert_allclose(both.coverage, (parts[0].coverage + parts[1].coverage) / 2)
    np.testing.assert_allclose(both.full_coverage, (parts[0].full_coverage + parts[1].full_coverage) / 2)
    assert both.n_inputs == 2


def test_from_probabilities_closed_forms() -> None:
    p = {"a": 0.7, "b": 0.2, "c": 0.1}
    c = IidBaseline.from_probabilities(p, valid_probability=0.6).curves(5)
    ks = np.arange(1, 6)
    pv = np.array(list(p.values()))
    np.testing.assert_allclose(c.coverage, (1 - (1 - pv[None]) ** ks[:, None]).sum(1) / 3)
    np.testing.assert_allclose(c.novelty, (pv[None] * (1 - pv[None]) ** (ks[:, None] - 1)).sum(1))
    np.testing.assert_allclose(c.valid_at_k, 1 - 0.4**ks)
    assert c.time_to_coverage["1.0"].mean == pytest.approx(
        est.time_to_full_mean(np.eye(3, dtype=bool), pv, 3), rel=1e-9
    )


def test_from_samples_is_rarefaction_then_flagged_extrapolation() -> None:
    rng = np.random.default_rng(2)
    samples = [{IDS[i]} for i in rng.choice(4, size=40, p=[0.6, 0.25, 0.1, 0.05])]
    c = IidBaseline.from_samples(samples, strategies=IDS).curves(60, n_boot=30)
    X = np.array([[s in ms for s in IDS] for ms in samples])
    np.testing.assert_allclose(c.coverage[:40], est.rarefaction(X, 40) / 4)
    assert not c.extrapolated[:40].any() and c.extrapolated[40:].all()
    assert (c.coverage <= 1).all() and (np.diff(c.coverage) >= -1e-12).all()
    assert (c.coverage_lo <= c.coverage + 1e-12).all() and c.auc_lo <= c.auc <= c.auc_hi


def test_oracle_unambiguous_and_dp_vs_monte_carlo() -> None:
    c = OracleBaseline({"a": {"a"}, "b": {"b"}}, strategies=("a", "b", "c")).curves(4)
    np.testing.assert_allclose(c.coverage, [1 / 3, 2 / 3, 2 / 3, 2 / 3])  # c is infeasible
    refs = {"a": {"a", "b"}, "b": {"b"}, "c": {"c", "d"}, "d": {"d"}}
    dp = OracleBaseline(refs).curves(5)
    rng = np.random.default_rng(0)
    R = 20000
    cov = np.zeros(5)
    for _ in range(R):
        S: set[str] = set()
        for k in range(5):
            opts = [s for s in refs if s not in S and not set(refs[s]) <= S]
            if opts:
                S |= set(refs[opts[rng.integers(len(opts))]])
            cov[k] += len(S) / 4
    np.testing.assert_allclose(dp.coverage, cov / R, atol=0.01)
    assert dp.coverage[0] == pytest.approx(1.5 / 4)  # a or c cover two strategies, b or d one
    mc = OracleBaseline(refs, max_states=1).curves(5)  # forced Monte Carlo path
    np.testing.assert_allclose(mc.coverage, dp.coverage, atol=0.02)
    assert any("Monte Carlo" in n for n in mc.notes)


def test_gain_value_interval_and_undefined_reason() -> None:
    K = 8
    iid = IidBaseline.from_probabilities({"a": 0.7, "b": 0.2, "c": 0.1}).curves(K)
    orc = OracleBaseline({"a": {"a"}, "b": {"b"}, "c": {"c"}}).curves(K)
    t = CoverageTracker(strategies=("a", "b", "c"))
    for x in range(30):
        for i in range(K):
            t.update(f"x{x}", {"abc"[(i + x) % 3]})  # a perfect no-repeat policy
    g = t.curves(K, n_boot=200).gain(iid, orc)
    assert g.value == pytest.approx(1.0) and g.reason is None
    flat = IidBaseline.from_probabilities({"a": 1.0}).curves(K)
    und = t.curves(K, n_boot=0).gain(flat, flat)
    assert und.value is None and "undefined" in und.reason


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"probabilities": {"a": 0.5, "b": -0.1, "c": 0.6}}, "non-negative"),
        ({"probabilities": {"a": float("nan"), "b": 1.0}}, "NaN"),
        ({"probabilities": {"a": 0.5, "b": 0.3}}, "sum to 1"),
        ({"probabilities": {"a": 0.5, "z": 0.5}, "strategies": ("a", "b")}, "unknown strategy"),
    ],
)
def test_bad_probabilities(kwargs, match) -> None:
    with pytest.raises(ValueError, match=match):
        IidBaseline.from_probabilities(**kwargs)


def test_bad_budget_and_samples() -> None:
    with pytest.raises(ValueError, match="budget K"):
        IidBaseline.from_probabilities({"a": 1.0}).curves(-1)
    with pytest.raises(ValueError, match="not the string"):
        IidBaseline.from_samples(["ab"])
    with pytest.raises(ValueError, match="unknown strategy"):
        OracleBaseline({"a": {"q"}}, strategies=("a",))


def test_oracle_monte_carlo_matches_exact_dp_within_its_stated_error() -> None:
    """The vectorised Monte Carlo fallback against the exact DP on an input where both apply.

    Traces overlap, one trace (g's) does not match its own strategy, and i is infeasible. Every
    curve must agree within 4 x the standard error the Monte Carlo states in its note.
    """
    refs = {
        "a": {"a", "b"}, "b": {"b"}, "c": {"c", "d", "e"}, "d": {"d"}, "e": {"a", "e"},
        "f": {"f", "g"}, "g": {"h"}, "h": {"h"},
    }  # fmt: skip
    ids = tuple("abcdefghi")
    K = 12
    dp = OracleBaseline(refs, strategies=ids).curves(K)
    mc = OracleBaseline(refs, strategies=ids, seed=5, max_states=1).curves(K)
    assert not any("Monte Carlo" in n for n in dp.notes)
    (note,) = [n for n in mc.notes if "Monte Carlo" in n]
    se, se_new = (float(part.split(",")[0].split(" ")[0]) for part in note.split("<= ")[1:])
    assert se == pytest.approx(0.5 / math.sqrt(4096), abs=1e-4)
    assert se_new == pytest.approx(3 * se, abs=1e-4)  # c's trace matches 3 strategies
    for name in ("coverage", "novelty", "full_coverage"):
        np.testing.assert_allclose(getattr(mc, name), getattr(dp, name), atol=4 * se, err_msg=name)
    np.testing.assert_allclose(mc.expected_new, dp.expected_new, atol=4 * se_new)
    for key in ("0.5", "0.8", "1.0"):
        np.testing.assert_allclose(
            mc.time_to_coverage[key].survival, dp.time_to_coverage[key].survival, atol=4 * se
        )
    assert dp.full_coverage[-1] == 0.0 and mc.full_coverage[-1] == 0.0  # i is never covered
    # Every feasible run ends with a..h covered (g only through f's trace): 8 of the 9 strategies.
    assert dp.coverage[-1] == pytest.approx(8 / 9) and mc.coverage[-1] == pytest.approx(8 / 9)
    # Seeded through SeedSequence: same seed, same curves; another seed, other draws.
    again = OracleBaseline(refs, strategies=ids, seed=5, max_states=1).curves(K)
    np.testing.assert_array_equal(again.coverage, mc.coverage)
    other = OracleBaseline(refs, strategies=ids, seed=6, max_states=1).curves(K)
    assert not np.array_equal(other.coverage, mc.coverage)


def test_rarity_split_of_a_tracker_with_per_input_laws_matches_the_exact_iid_split() -> None:
    # Input ids and strategy ids are both strings: a {input_id: law} table is per-input laws, never
    # one shared law (that would bin strategies by column order instead of base probability).
    laws = {
        "x0": {"a": 0.6, "b": 0.25, "c": 0.1, "d": 0.05},
        "x1": {"a": 0.05, "b": 0.1, "c": 0.25, "d": 0.6},
    }
    K, R = 3, 4000
    rng = np.random.default_rng(11)
    t = CoverageTracker(strategies=IDS)
    for r in range(R):
        for x, law in laws.items():
            for j in rng.choice(4, size=K, p=list(law.values())):
                t.update(x, {IDS[j]}, stream=r)
    base = IidBaseline.from_probabilities(laws, strategies=IDS)
    mc = t.curves(K, n_boot=0, rarity=base, rarity_bins=4)
    ex = base.curves(K, rarity_bins=4)
    np.testing.assert_allclose(mc.coverage_by_rarity, ex.coverage_by_rarity, atol=4 * 0.5 / math.sqrt(2 * R))
    assert mc.coverage_by_rarity[0, 0] > 0.1 > mc.coverage_by_rarity[3, 0]  # q1 = each input's common one


@pytest.mark.parametrize(
    "refs",
    [
        {"x1": [["a"], ["b"]]},  # per input, a list of samples' match sets (from_samples' format)
        {"x1": {"a": [["a"]], "b": [["b"]]}},  # per input, nested lists as match sets
        {"a": [["a"]], "b": [["b"]]},  # one input, nested lists as match sets
        {"x1": {"a": ["a"], "b": ["b"]}, "x2": [["a"]]},  # per-input dicts mixed with a list
        {"a": 3, "b": ["b"]},  # a match set that is not iterable
    ],
    ids=["per-input-sample-list", "per-input-nested", "nested", "mixed", "not-iterable"],
)
def test_oracle_wrong_input_format_is_one_line_seffi_error(refs) -> None:
    """A wrong guess at the oracle's input format names the expected format.

    Never ``TypeError: unhashable type: 'list'`` from deep inside the constructor.
    """
    from seffi.errors import SeffiError

    with pytest.raises(SeffiError) as exc:
        OracleBaseline(refs, strategies=["a", "b"])
    message = str(exc.value)
    assert "\n" not in message
    assert "{strategy: match set of its reference trace}" in message
    assert "task.reference_match_sets(x)" in message
    # The right format, per input, still works: one exact strategy each, so C(k) = min(k, 2) / 2.
    ok = OracleBaseline({"x1": {"a": ["a"], "b": frozenset({"b"})}}, strategies=["a", "b"]).curves(3)
    assert np.allclose(ok.coverage, [0.5, 1.0, 1.0])


# -- the batched set-valued estimators against the per-replicate reference -------


def test_batched_set_valued_estimators_equal_the_reference() -> None:
    """Novelty and F of many random set-valued datasets equal the reference loops (1e-12)."""
    rng = np.random.default_rng(13)
    for _ in range(60):
        D, n, m = int(rng.integers(1, 5)), int(rng.integers(1, 25)), int(rng.integers(1, 8))
        K = int(rng.integers(1, 2 * n + 2))
        X = rng.random((D, n, m + int(rng.integers(0, 2)))) < rng.uniform(0.05, 0.9)
        nov = est.novelty_samples_many(X, K)
        full = est.full_coverage_samples_many(X, m, K)
        for d in range(D):
            np.testing.assert_allclose(nov[d], novelty_by_loops(X[d], K), rtol=0, atol=1e-12)
            np.testing.assert_allclose(est.novelty_samples_many(X[d][None], K)[0], nov[d], rtol=0, atol=1e-12)
            np.testing.assert_allclose(full[d], full_coverage_by_loops(X[d], m, K), rtol=0, atol=1e-12)
            np.testing.assert_allclose(
                est.full_coverage_samples_many(X[d][None], m, K)[0], full[d], rtol=0, atol=1e-12
            )


def _reference_loops(monkeypatch) -> None:
    """Route the batched estimators through the per-replicate reference (one Python loop per replicate)."""
    monkeypatch.setattr(est, "novelty_samples_many", references.novelty_many_by_loops)
    monkeypatch.setattr(est, "full_coverage_samples_many", references.full_coverage_many_by_loops)


def test_set_valued_from_samples_equals_the_per_replicate_reference(monkeypatch) -> None:
    """Set-valued from_samples curves at n = 40, M = 15 equal the per-replicate reference (1e-12).

    The same seed gives the same curves and intervals; ``benchmarks/coverage.py`` times both.
    """
    rng = np.random.default_rng(5)
    M, n, K = 15, 40, 60
    # The benchmark's skewed law (F mostly 0) and a flat one where most datasets see all M (F > 0).
    laws = [0.6 / np.arange(1, M + 1) ** 1.3, np.full(M, 0.25)]
    cols = [f"s{j}" for j in range(M)]
    samples = {
        f"x{u}": [[cols[j] for j in np.flatnonzero(r)] for r in rng.random((n, M)) < pi]
        for u, pi in enumerate(laws)
    }
    base = IidBaseline.from_samples(samples, strategies=cols)
    new = base.curves(K, n_boot=40, seed=3)  # fewer replicates: the reference is slow
    _reference_loops(monkeypatch)
    ref = base.curves(K, n_boot=40, seed=3)
    assert new.full_coverage[-1] > 0.1 and new.full_coverage_hi[-1] > new.full_coverage_lo[-1]
    names = ("coverage", "novelty", "full_coverage", "coverage_lo", "coverage_hi", "novelty_lo")
    for name in (*names, "novelty_hi", "full_coverage_lo", "full_coverage_hi"):
        np.testing.assert_allclose(getattr(new, name), getattr(ref, name), rtol=0, atol=1e-12, err_msg=name)
    assert new.auc == pytest.approx(ref.auc, abs=1e-12)
