"""The one estimator: streaming folds, sums derived from finished runs, and the curves of both.

References: ``CoverageTracker.curves`` fed sample by sample (which derives its sums from the runs,
``sums_from_runs``) for the streaming fold; ``np.add.at``; a hand computation of coverage.
"""

from __future__ import annotations

import numpy as np
import pytest

from seffi.coverage import CoverageTracker
from seffi.coverage.sums import InputSums, RunTable, _add_rows, fold
from seffi.coverage.sums_curves import curves_from_sums, point_from_sums

STRATS = ("a", "b", "c", "d")


def _random_runs(seed: int, n_inputs: int = 5, K: int = 6):
    """Runs of random length (some shorter than K) with random match sets, samples interleaved."""
    rng = np.random.default_rng(seed)
    runs = []
    for u in range(n_inputs):
        for _ in range(int(rng.integers(1, 4))):
            length = int(rng.integers(1, K + 1))
            hits = rng.random((length, len(STRATS))) < rng.uniform(0.05, 0.5)
            runs.append((u, hits, rng.random(length) < 0.7))
    samples = [(r, i) for r, (_, hits, _) in enumerate(runs) for i in range(len(hits))]
    rng.shuffle(samples)
    samples.sort(key=lambda s: s[1])  # keep each run in order, interleave across runs
    return runs, samples


def _fold_batches(parts, n_inputs: int, K: int, *, coverage_only: bool = False):
    """Fold batches of (input, run slot, k, hits, valid) samples into a run table and input sums."""
    table, sums = RunTable(len(STRATS)), InputSums(K)
    sums.grow(n_inputs)
    m = np.full(n_inputs, len(STRATS))
    for part in parts:
        u, slot, k, hits, valid = (np.array(c) for c in zip(*part, strict=True))
        table.grow(int(slot.max()) + 1)
        fold(table, sums, u, slot, k, hits.astype(bool), valid.astype(bool), m, coverage_only=coverage_only)
    sums.sums, sums.n_runs = sums.sums[:n_inputs], sums.n_runs[:n_inputs]
    return table, sums


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_run_sums_give_the_tracker_curves_and_intervals(seed: int) -> None:
    K = 6
    runs, samples = _random_runs(seed, K=K)
    ids = [f"x{u}" for u in range(5)]
    tracker = CoverageTracker(strategies=STRATS)
    batch = []
    for r, i in samples:
        u, hits, valid = runs[r]
        tracker.update(
            ids[u], {s for s, h in zip(STRATS, hits[i], strict=True) if h}, valid=bool(valid[i]), stream=r
        )
        batch.append((u, r, i + 1, hits[i], valid[i]))
    _, sums = _fold_batches((batch[:7], batch[7:20], batch[20:]), len(ids), K)  # open runs continue
    want = tracker.curves(K, n_boot=300, seed=4)
    keys = [("", x) for x in sorted(ids)]
    m = np.full(len(ids), len(STRATS))
    order = np.argsort(np.array(ids, dtype=object))
    got = curves_from_sums(sums, m, order=order, n_boot=300, seed=4, input_keys=keys, samples=len(samples))
    for name in ("coverage", "novelty", "expected_new", "full_coverage", "valid_coverage", "valid_at_k"):
        np.testing.assert_allclose(getattr(got, name), getattr(want, name), atol=1e-12, err_msg=name)
        for b in ("_lo", "_hi"):  # float32 replicate sums in both: equal up to rounding
            np.testing.assert_allclose(
                getattr(got, name + b), getattr(want, name + b), atol=1e-6, err_msg=name + b
            )
    np.testing.assert_array_equal(got.runs_at_k, want.runs_at_k)
    assert got.auc == pytest.approx(want.auc, abs=1e-12)
    assert (got.auc_lo, got.auc_hi) == pytest.approx((want.auc_lo, want.auc_hi), abs=1e-6)
    np.testing.assert_allclose(got.auc_reps, want.auc_reps, atol=1e-6)
    for key, t in want.time_to_coverage.items():
        g = got.time_to_coverage[key]
        np.testing.assert_allclose(g.survival, t.survival, atol=1e-12)
        assert (g.median, g.median_lo, g.median_hi) == (t.median, t.median_lo, t.median_hi)
        assert g.restricted_mean == pytest.approx(t.restricted_mean, abs=1e-12)
    assert (got.n_inputs, got.n_runs, got.samples) == (want.n_inputs, want.n_runs, want.samples)
    assert got.notes == want.notes
    np.testing.assert_allclose(got.input_auc, want.input_auc, atol=1e-12)
    np.testing.assert_allclose(got.input_valid_auc, want.input_valid_auc, atol=1e-12)
    assert got.input_keys == want.input_keys
    from seffi.coverage import IidBaseline, OracleBaseline

    law = {x: {frozenset({"a"}): 0.7, frozenset({"b", "c"}): 0.2, frozenset({"d"}): 0.1} for x in ids}
    iid = IidBaseline.from_match_distribution(law, strategies=STRATS).curves(K)
    oracle = OracleBaseline({x: {s: frozenset({s}) for s in STRATS} for x in ids}, strategies=STRATS).curves(
        K
    )
    g_got, g_want = got.gain(iid, oracle), want.gain(iid, oracle)  # the paired bootstrap sees the same data
    assert g_got.value == pytest.approx(g_want.value, abs=1e-12)
    assert (g_got.lo, g_got.hi) == pytest.approx((g_want.lo, g_want.hi), abs=1e-6)
    point = point_from_sums(sums, m)
    np.testing.assert_allclose(point["coverage"], want.coverage, atol=1e-12)
    assert point["auc"] == pytest.approx(want.auc, abs=1e-12)


def test_add_rows_equals_numpy_add_at() -> None:
    rng = np.random.default_rng(3)
    for n in (0, 1, 50, 400):
        index = rng.integers(0, 12, size=n)
        values = rng.integers(-5, 6, size=(n, 3))
        want = rng.integers(0, 9, size=(12, 3))
        got = want.copy()
        np.add.at(want, index, values)
        _add_rows(got, index, values)
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("seed", [0, 5])
def test_coverage_only_sums_keep_the_coverage_curve_and_first_hits(seed: int) -> None:
    K = 6
    runs, samples = _random_runs(seed, K=K)
    batch = [(runs[r][0], r, i + 1, runs[r][1][i], runs[r][2][i]) for r, i in samples]
    parts = (batch[:5], batch[5:23], batch[23:])  # several batches: open runs continue
    U = 1 + max(u for u, _, _ in runs)
    full_runs, full = _fold_batches(parts, U, K)
    lean_runs, lean = _fold_batches(parts, U, K, coverage_only=True)
    np.testing.assert_array_equal(lean.sums[:, :, :2], full.sums[:, :, :2])  # runs, covered
    assert not lean.sums[:, :, 2:].any()  # the rest is never computed
    np.testing.assert_array_equal(lean.n_runs, full.n_runs)
    np.testing.assert_array_equal(lean_runs.first_hit, full_runs.first_hit)
    assert lean.sums[:, :, 0].sum() == full.sums[:, :, 0].sum() == len(samples)
    # The coverage curve, by hand: over the runs reaching k, each weighted 1 / (runs of its input),
    # the weighted mean of |union of the first k match sets| / M.
    n_runs = np.bincount([u for u, _, _ in runs])
    want = []
    for k in range(1, K + 1):
        reach = [
            (1 / n_runs[u], hits[:k].any(axis=0).sum() / len(STRATS)) for u, hits, _ in runs if len(hits) >= k
        ]
        want.append(sum(w * c for w, c in reach) / sum(w for w, _ in reach) if reach else np.nan)
    np.testing.assert_allclose(point_from_sums(lean, np.full(U, len(STRATS)))["coverage"], want, atol=1e-12)
