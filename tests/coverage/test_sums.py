"""The one estimator: streaming folds, sums derived from finished runs, and the curves of both.

References: ``CoverageTracker.curves`` fed sample by sample (which derives its sums from the runs,
``sums_from_runs``) for the streaming fold; ``np.add.at``; a hand computation of coverage.
"""

from __future__ import annotations

import numpy as np
import pytest

from seffi.coverage import CoverageTracker
from seffi.coverage.resampling import mean_score_interval
from seffi.coverage.sums import GroupTotals, InputSums, RunTable, fold, run_sums
from seffi.coverage.sums_curves import curves_from_sums, point_from_totals

STRATS = ("a", "b", "c", "d")


def _random_runs(seed: int, n_inputs: int = 5, K: int = 6):
    """2-4 runs per input, most complete (some shorter than K), random match sets, samples interleaved."""
    rng = np.random.default_rng(seed)
    runs = []
    for u in range(n_inputs):
        for r in range(int(rng.integers(2, 5))):
            length = K if r < 2 or rng.random() < 0.5 else int(rng.integers(1, K))
            hits = rng.random((length, len(STRATS))) < rng.uniform(0.05, 0.5)
            runs.append((u, hits, rng.random(length) < 0.7))
    samples = [(r, i) for r, (_, hits, _) in enumerate(runs) for i in range(len(hits))]
    rng.shuffle(samples)
    samples.sort(key=lambda s: s[1])  # keep each run in order, interleave across runs
    return runs, samples


def _fold_batches(parts, n_inputs: int, K: int):
    """Fold batches of (input, run slot, k, hits, valid) samples into a run table, adding each run to
    its input's sums the moment it completes (the streaming path)."""
    table, sums = RunTable(len(STRATS)), InputSums(K, squares=False)
    sums.grow(n_inputs)
    m = np.full(n_inputs, len(STRATS))
    for part in parts:
        u, slot, k, hits, valid = (np.array(c) for c in zip(*part, strict=True))
        table.grow(int(slot.max()) + 1)
        fold(table, slot, k, hits.astype(bool), valid.astype(bool))
        done = k == K
        if done.any():
            rows, unit = np.unique(u[done], return_inverse=True)
            sums.add_at(rows, run_sums(table, slot[done], unit, m[rows], K))
    return table, sums.take(np.arange(n_inputs))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_run_sums_give_the_tracker_curves_and_intervals(seed: int) -> None:
    K = 6
    runs, samples = _random_runs(seed, n_inputs=10, K=K)  # >= MIN_INPUTS: the bootstrap over inputs
    ids = [f"x{u}" for u in range(10)]
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
    short = sum(len(hits) < K for _, hits, _ in runs)
    got = curves_from_sums(
        sums, m, order=order, n_boot=300, seed=4, input_keys=keys, samples=len(samples), incomplete=short
    )
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
    point = point_from_totals(GroupTotals.of(sums, m))
    np.testing.assert_allclose(point["coverage"], want.coverage, atol=1e-12)
    assert point["auc"] == pytest.approx(want.auc, abs=1e-12)


@pytest.mark.parametrize("seed", [0, 5])
def test_streamed_sums_give_the_coverage_curve_by_hand(seed: int) -> None:
    K = 6
    runs, samples = _random_runs(seed, K=K)
    batch = [(runs[r][0], r, i + 1, runs[r][1][i], runs[r][2][i]) for r, i in samples]
    parts = (batch[:5], batch[5:23], batch[23:])  # several batches: open runs continue
    U = 1 + max(u for u, _, _ in runs)
    _, lean = _fold_batches(parts, U, K)
    complete = [(u, hits) for u, hits, _ in runs if len(hits) == K]
    assert lean.full()[:, :, 0].sum() == len(complete) * K
    # By hand: only complete runs, each input's runs averaged, inputs equal.
    want = []
    for k in range(1, K + 1):
        per_input = {}
        for u, hits in complete:
            per_input.setdefault(u, []).append(hits[:k].any(axis=0).sum() / len(STRATS))
        want.append(np.mean([np.mean(v) for v in per_input.values()]))
    point = point_from_totals(GroupTotals.of(lean, np.full(U, len(STRATS))))
    np.testing.assert_allclose(point["coverage"], want, atol=1e-12)


def test_short_runs_are_left_out_and_inputs_weigh_the_same() -> None:
    """An iid policy whose easy input's runs stop at 4 (K = 8) does not drag C(k) down
    (pooling the short runs gives C(4) 0.446 instead of 0.572 and C(8) 0.16 too low); the short runs are
    counted in a note, C is monotone, and an input without a complete run is left out."""
    K = 8
    t = CoverageTracker(strategies=STRATS, budget=K)
    rng = np.random.default_rng(0)
    for r in range(40):  # x_easy: one strategy only (covers 1/4 at once); half its runs stop at 4
        for _ in range(K if r % 2 else 4):
            t.update("x_easy", {"a"}, stream=r)
    for r in range(40):  # x_hard: uniform over the four strategies, every run complete
        for _ in range(K):
            t.update("x_hard", {STRATS[int(rng.integers(4))]}, stream=r)
    for _ in range(3):  # x_short: never complete
        t.update("x_short", {"b"}, stream=0)
    c = t.curves(n_boot=0)
    hard = 1 - (3 / 4) ** np.arange(1, K + 1)  # expected coverage of a uniform law over 4
    want = (0.25 + hard) / 2  # each complete input weighs 1/2 at every k
    np.testing.assert_allclose(c.coverage, want, atol=0.04)
    assert (np.diff(c.coverage) >= 0).all()
    assert c.n_inputs == 2 and c.n_runs == 60
    note = "21 run(s) have fewer than K=8"
    assert any(note in n and "1 input(s) have no complete run" in n for n in c.notes), c.notes


def test_within_input_intervals_below_the_minimum_number_of_inputs() -> None:
    """One input with 50 runs gets a normal interval (not a zero-width one) from
    the run-to-run variance (checked by hand) with a note saying what it covers, and the gain's too."""
    K = 4
    t = CoverageTracker(strategies=STRATS, budget=K)
    rng = np.random.default_rng(1)
    per_run = []
    for r in range(50):
        seen = set()
        cov = []
        for _ in range(K):
            s = STRATS[int(rng.integers(4))]
            t.update("x", {s}, stream=r)
            seen.add(s)
            cov.append(len(seen) / 4)
        per_run.append(cov)
    per_run = np.array(per_run)
    c = t.curves(n_boot=100)
    se = per_run.std(axis=0, ddof=1) / np.sqrt(50)
    t49 = 2.009575  # Student t, 97.5% quantile, 49 degrees of freedom (one input, 50 runs)
    half = np.minimum(t49 * se, 1 - c.coverage)
    np.testing.assert_allclose(c.coverage_hi - c.coverage, half, atol=1e-6)
    auc_se = per_run.mean(axis=1).std(ddof=1) / np.sqrt(50)
    assert c.auc_se == pytest.approx(auc_se, rel=1e-9) and c.auc_hi - c.auc_lo > 0
    assert any("run-to-run noise for these inputs only" in n for n in c.notes)
    from seffi.coverage import IidBaseline, OracleBaseline

    iid = IidBaseline.from_probabilities({"x": dict.fromkeys(STRATS, 0.25)}, strategies=STRATS).curves(K)
    oracle = OracleBaseline({"x": {s: frozenset({s}) for s in STRATS}}, strategies=STRATS).curves(K)
    g = c.gain(iid, oracle)
    assert g.lo < g.value < g.hi and "run-to-run noise" in g.reason
    assert g.hi - g.value == pytest.approx(t49 * auc_se / (oracle.auc - iid.auc), rel=1e-4)


@pytest.mark.parametrize(("K", "dtype"), [(127, np.int8), (128, np.int16), (300, np.int16)])
def test_run_fields_hold_the_extremes_of_their_budget(K: int, dtype: type) -> None:
    """Per-run fields are stored in the narrowest type of K, and its largest values come back exact."""
    t = CoverageTracker(strategies=("a", "b"), budget=K)
    hits = np.zeros((K, 2), dtype=bool)
    hits[K - 1, 0] = True  # the last sample of the budget matches "a"
    valid = np.zeros(K, dtype=bool)
    valid[K - 1] = True
    t.update_many(["x"] * K, hits, valid=valid, stream=0)
    longer = np.zeros((K + 5, 2), dtype=bool)
    longer[K - 2, 1] = longer[K, 0] = True  # "a" only beyond the budget: not recorded
    t.update_many(["x"] * (K + 5), longer, valid=np.ones(K + 5, dtype=bool), stream=1)
    assert t.runs.first_hit.dtype == dtype and t.runs.n.dtype == dtype
    runs = t.state_dict()["runs"]
    assert runs["n"] == [K, K] and runs["n_valid"] == [1, K] and runs["first_valid"] == [K - 1, 0]
    assert runs["first_hit"] == [[K - 1, -1], [-1, K - 2]]  # lists of ints: K > 36
    assert runs["first_valid_hit"] == [[K - 1, -1], [-1, K - 2]]
    assert (t.skipped, t.samples, t.valid) == (5, 2 * K, K + 1)
    back = CoverageTracker.from_state_dict(t.state_dict())  # a loaded state keeps the narrow type
    assert back.runs.first_hit.dtype == dtype and back.state_dict() == t.state_dict()
    c = t.curves(n_boot=0)
    assert c.coverage[K - 2] == 0.25 and c.coverage[K - 1] == 0.5  # (0 + 1/2) / 2, then (1/2 + 1/2) / 2


def test_sums_read_in_blocks_equal_one_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    """Sums over a subset of a narrow run table, read in small blocks, equal one int64 pass."""
    import seffi.coverage.sums as sums_mod

    rng = np.random.default_rng(3)
    S, C, K, U = 500, 5, 6, 37
    fh = np.where(rng.random((S, C)) < 0.4, rng.integers(0, K, (S, C)), -1)
    fvh = np.where((fh >= 0) & (rng.random((S, C)) < 0.5), fh, -1)
    fv = np.where(rng.random(S) < 0.6, rng.integers(0, K, S), -1)
    n = np.where(rng.random(S) < 0.8, K, rng.integers(1, K, S))
    inputs = rng.integers(0, U, S)
    m = rng.integers(C, 9, U)
    pick = rng.permutation(S)[:400]

    def sums(table_dtype: type, chunk: int) -> InputSums:
        monkeypatch.setattr(sums_mod, "_CHUNK", chunk)
        h, length, vh, v = (a.astype(table_dtype) for a in (fh, n, fvh, fv))
        got, _ = sums_mod.sums_from_runs(
            h, length, inputs[pick], m, K, first_valid_hit=vh, first_valid=v, runs=pick
        )
        return got

    want, _ = sums_mod.sums_from_runs(
        fh[pick], n[pick], inputs[pick], m, K, first_valid_hit=fvh[pick], first_valid=fv[pick]
    )
    for dtype, chunk in ((np.int8, 7), (np.int16, 64), (np.int64, 1)):
        got = sums(dtype, chunk)
        for name in ("inc", "n_runs", "sq", "auc_sq"):
            np.testing.assert_array_equal(getattr(got, name), getattr(want, name), err_msg=name)
    # and by hand for one input: complete runs and their first-sample "new" counts
    u = int(inputs[pick][0])
    mine = pick[(inputs[pick] == u) & (n[pick] >= K)]
    assert want.n_runs[u] == mine.size
    new = np.zeros(K, dtype=np.int64)
    for r in mine:
        np.add.at(new, fh[r][fh[r] >= 0], 1)
    np.testing.assert_array_equal(want.inc[u, :, 0], new)


def test_runs_keyed_by_input_and_any_stream_continue_across_batches() -> None:
    """Runs are found by (input, stream) for streams up to 2^53 - 1, in a batch or sample by sample."""
    big = 2**53 - 1
    rows = [("x", big), ("y", 3), ("x", 0), ("x", big), ("y", 3), ("y", big), ("x", 0), ("x", big)]
    rng = np.random.default_rng(1)
    hits = rng.random((len(rows), 4)) < 0.4
    valid = rng.random(len(rows)) < 0.5
    one = CoverageTracker(strategies=STRATS, budget=3)
    for (x, s), h, v in zip(rows, hits, valid, strict=True):
        one.update(x, {STRATS[j] for j in np.flatnonzero(h)}, valid=bool(v), stream=s)
    both = CoverageTracker(strategies=STRATS, budget=3)
    for part in (slice(0, 3), slice(3, None)):  # the second batch continues the first's runs
        ids, streams = zip(*rows[part], strict=True)
        both.update_many(list(ids), hits[part], valid=valid[part], stream=np.array(streams))
    state = one.state_dict()
    assert state == both.state_dict()
    runs = state["runs"]  # sorted by (input, stream): x/0, x/big, y/3, y/big
    assert runs["stream"] == [0, big, 3, big] and runs["n"] == [2, 3, 2, 1] and one.skipped == 0


def test_input_sums_widen_their_type_before_a_count_leaves_it() -> None:
    """Per-input sums start in int8 and widen as counts grow: always equal to int64 sums."""
    from seffi.coverage.sums import N_INC

    K, rng = 3, np.random.default_rng(2)
    narrow, wide = InputSums(K, dtype=np.int8, squares=False), InputSums(K, squares=False)
    for s in (narrow, wide):
        s.grow(4)
    seen = []
    for scale in (100, 100, 30_000, 30_000, 3_000_000_000):
        part = InputSums(K, squares=False, rows=2)
        part.inc[:] = rng.integers(scale // 2, scale + 1, (2, K, N_INC))
        part.n_runs[:] = 1
        rows = rng.choice(4, 2, replace=False)
        narrow.add_at(rows, part)
        wide.add_at(rows, part)
        np.testing.assert_array_equal(narrow.inc, wide.inc)
        seen.append(narrow.inc.dtype)
    assert seen[0] == np.int8 and np.int16 in seen and np.int32 in seen and seen[-1] == np.int64


@pytest.mark.parametrize(("K", "tasks"), [(5, 2), (5, 1), (1, 3)])
def test_curves_from_blocks_of_any_size_are_the_same_and_match_per_input_values_by_hand(
    monkeypatch: pytest.MonkeyPatch, K: int, tasks: int
) -> None:
    """Inputs fed 7 at a time and rebuilt for the second pass (score sums 3 units at a time) give the
    digits of one kept block; the intervals are `mean_score_interval`s of per-input curves counted
    by hand, and each input's AUC share is its own AUC (every run reaches K)."""
    import seffi.coverage.resampling as rs
    import seffi.coverage.sums_curves as sc

    rng = np.random.default_rng(11)
    S, C, U = 900, 6, 120
    fh = np.where(rng.random((S, C)) < 0.35, rng.integers(0, K, (S, C)), -1)
    fvh = np.where((fh >= 0) & (rng.random((S, C)) < 0.5), fh, -1)
    fv = np.where(rng.random(S) < 0.6, rng.integers(0, K, S), -1)
    inputs = np.r_[np.arange(U), rng.integers(0, U, S - U)]  # every input has a run
    m = rng.integers(C, 9, U)
    sums, _ = sc.sums_from_runs(fh, np.full(S, K), inputs, m, K, first_valid_hit=fvh, first_valid=fv)
    strata = (np.arange(U) % (tasks + 1)).clip(max=tasks - 1)  # tasks of unequal sizes, or one

    def curves():
        return sc.curves_from_sums(sums, m, strata=strata, n_boot=64, seed=5)

    one = curves()
    monkeypatch.setattr(sc, "INPUT_BLOCK", 7)
    monkeypatch.setattr(sc, "KEEP_CELLS", 0)  # blocks rebuilt for the second pass
    monkeypatch.setattr(rs, "_CHUNK_CELLS", 3)
    many = curves()
    for name in ("coverage", "valid_coverage", "novelty", "full_coverage", "valid_at_k"):
        for suffix in ("", "_lo", "_hi"):
            np.testing.assert_array_equal(
                getattr(many, name + suffix), getattr(one, name + suffix), name + suffix
            )
    for name in ("auc", "auc_lo", "auc_hi", "valid_auc", "valid_auc_lo", "valid_auc_hi"):
        assert getattr(many, name) == getattr(one, name), name
    for name in ("input_auc", "input_valid_auc"):
        np.testing.assert_array_equal(getattr(many, name), getattr(one, name), name)
    # by hand: each input's coverage curve (its runs averaged) and its full-coverage share
    cov = np.zeros((U, K))
    full = np.zeros((U, K))
    for u in range(U):
        mine = fh[inputs == u]
        hit = np.array([[(r[r >= 0] <= k).sum() for k in range(K)] for r in mine])
        cov[u] = (hit / m[u]).mean(axis=0)
        full[u] = (hit == m[u]).mean(axis=0)
    runs = np.bincount(inputs, minlength=U)
    np.testing.assert_allclose(one.coverage, cov.mean(axis=0), rtol=0, atol=1e-12)
    for got, want in (
        ((one.coverage_lo, one.coverage_hi), mean_score_interval(cov, 0.95, strata=strata)),
        (
            (one.full_coverage_lo, one.full_coverage_hi),
            mean_score_interval(full, 0.95, strata=strata, runs=runs),
        ),
        ((one.auc_lo, one.auc_hi), mean_score_interval(cov.mean(axis=1), 0.95, strata=strata)),
    ):
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    np.testing.assert_allclose(one.input_auc, cov.mean(axis=1), rtol=0, atol=1e-12)
    assert one.input_auc.mean() == pytest.approx(one.auc, abs=1e-12)


def test_tracker_curves_input_keys_read_as_the_sorted_key_list():
    """A tracker's curves name their inputs in sorted key order; the JSON form is the same list."""
    import json

    from seffi.coverage.curves import Curves

    rng = np.random.default_rng(7)
    K = 3
    keys = [(task, f"x{u}") for task in ("t2", "t1") for u in (3, 1, 2, 0)]
    trackers = {task: CoverageTracker(strategies=STRATS, task=task, budget=K) for task in ("t2", "t1")}
    for task, x in keys:
        for _ in range(K):
            trackers[task].update(x, {s for s in STRATS if rng.random() < 0.4})
    c = trackers["t2"].merge(trackers["t1"]).curves(n_boot=0)
    want = sorted(keys)
    assert len(c.input_keys) == len(want)
    assert list(c.input_keys) == want
    assert c.input_keys == want and c.input_keys != want[::-1]
    assert c.input_keys[2] == want[2] and c.input_keys[-1] == want[-1]
    assert c.input_keys[1:4] == want[1:4]
    d = json.loads(json.dumps(c.to_dict()))
    assert d["input_keys"] == [list(k) for k in want]
    assert Curves.from_dict(d).input_keys == want


def test_run_table_growth_keeps_runs_and_gives_new_slots_and_columns_their_fill() -> None:
    table = RunTable(2, budget=8)
    table.grow(3)
    table.first_hit[:3] = [[0, -1], [2, 1], [-1, 5]]
    table.n[:3] = [4, 8, 6]
    table.grow(3, n_columns=4)  # a new strategy: its column is -1 for every run so far
    table.grow(200)  # past the room: a new allocation, the runs copied
    np.testing.assert_array_equal(table.first_hit[:3], [[0, -1, -1, -1], [2, 1, -1, -1], [-1, 5, -1, -1]])
    np.testing.assert_array_equal(table.n[:3], [4, 8, 6])
    assert (table.first_hit[3:200] == -1).all() and (table.first_valid_hit[:200] == -1).all()
    assert not table.n[3:200].any() and not table.beyond[:200].any() and (table.first_valid[:200] == -1).all()
    assert table.first_hit.shape[0] >= 200 and table.filled == 200
