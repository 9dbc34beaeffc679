"""The tracker at many inputs: the fast paths equal plain references, and memory stays bounded.

References: the run rules and the barcode rule written out sample by sample in plain Python (here,
not the library's); the curves' own point estimates; the exact multinomial bootstrap for its normal
limit; traced memory caps. The CPU cost as the number of inputs grows is measured by
``benchmarks/scale.py``.
"""

from __future__ import annotations

import itertools
import math
import tracemalloc

import numpy as np
import pytest

from seffi.coverage import CoverageTracker
from seffi.coverage.assign import RunAssigner
from seffi.episodes import EpisodeBatch

M, K = 8, 4
STRATS = tuple(f"s{j}" for j in range(M))


def _reference_runs(K: int, batches):
    """(stream, k) of every episode by the run rules, one episode at a time (dicts, no numpy)."""
    open_: dict = {}  # (input, env) -> [stream, count, last sample_index, last run_index]
    nxt: dict = {}
    out = []
    for u, env, si, ri in itertools.chain.from_iterable(zip(*b, strict=True) for b in batches):
        run = open_.get((u, env))
        new = run is None
        if not new:
            if ri >= 0 and run[3] >= 0:
                new = ri != run[3]
            elif si >= 0 and run[2] >= 0:
                new = si <= run[2]
            else:
                new = run[1] >= K
        if new:
            run = open_[(u, env)] = [nxt.get(u, 0), 0, -1, -1]
            nxt[u] = run[0] + 1
        run[1] += 1
        run[2], run[3] = si, ri
        out.append((run[0], run[1]))
    return out


@pytest.mark.parametrize("kind", ["none", "mixed_rows", "mixed_samples", "run_index"])
def test_run_assignment_equals_the_rules_one_episode_at_a_time(kind: str) -> None:
    """Every episode's stream and position: the vectorised assigner (count rule included,
    without a Python loop over the episodes) equals the rules applied
    one episode at a time, over many batches, with env rows that switch rules between batches."""
    rng = np.random.default_rng({"none": 1, "mixed_rows": 2, "mixed_samples": 3, "run_index": 4}[kind])
    batches = []
    count: dict = {}
    for b in range(40):
        n = int(rng.integers(1, 60))
        u, env = rng.integers(0, 5, n), rng.integers(0, 4, n) * 3
        si, ri = np.empty(n, np.int64), np.empty(n, np.int64)
        for i in range(n):
            c = count.get((u[i], env[i]), 0)
            count[(u[i], env[i])] = c + 1
            si[i], ri[i] = c % (K + 1), c // (K + 1)  # some runs go one past K
        if kind == "none" or (kind == "mixed_rows" and b % 3):
            si[:], ri[:] = -1, -1
        elif kind == "mixed_rows":
            ri[:] = -1
        elif kind == "mixed_samples":
            ri[rng.random(n) < 0.4] = -1
            si[rng.random(n) < 0.3] = -1
        batches.append((u, env, si, ri))
    a = RunAssigner(K)
    got = []
    for u, env, si, ri in batches:
        slot, k = a.assign(u, env, si, ri)
        got += list(zip(a.slot_stream[slot].tolist(), k.tolist(), strict=True))
    assert got == _reference_runs(K, batches)


def _reference_barcode(samples, rows: int, cols: int):
    """The barcode rule sample by sample: per input its lowest-stream run, the ``rows`` smallest ids."""
    runs: dict = {}
    for x, stream, ms in samples:
        runs.setdefault((x, stream), []).append(ms)
    lowest = {}
    for x, stream in sorted(runs):
        lowest.setdefault(x, stream)
    out = {}
    for x in sorted(lowest)[:rows]:
        seen: set = set()
        cells = []
        for ms in runs[(x, lowest[x])][:cols]:
            fresh = [s for s in STRATS if s in ms and s not in seen]
            first = [s for s in STRATS if s in ms]
            cells.append(STRATS.index(fresh[0]) if fresh else (STRATS.index(first[0]) if first else -1))
            seen |= set(ms)
        out[f"{x}/{lowest[x]}"] = cells
    return out


def test_barcode_cells_equal_the_rule_sample_by_sample() -> None:
    """Rows restart on a lower stream, evict larger ids when full and hold cols cells, in batches."""
    rng = np.random.default_rng(6)
    samples = []
    for _ in range(600):
        x = f"x{int(rng.integers(0, 30)):02d}"
        samples.append((x, int(rng.integers(0, 4)), {s for s in STRATS if rng.random() < 0.2}))
    t = CoverageTracker(STRATS, barcode_rows=5, barcode_cols=3)
    for a, b in itertools.pairwise([0, 7, 50, 51, 300, 600]):
        chunk = samples[a:b]
        t.update_many([s[0] for s in chunk], [s[2] for s in chunk], stream=[s[1] for s in chunk])
    bc = t.barcode()
    rows = zip(bc["rows"], bc["first_strategy"], bc["lengths"], strict=True)
    got = {row: cells[:n] for row, cells, n in rows}
    assert got == _reference_barcode(samples, 5, 3)


def _stream(U: int, episodes: int, seed: int = 0, batch: int = 1024):
    """Batches of a vector env: 64 rows, runs of K samples of inputs drawn from U ids."""
    rng = np.random.default_rng(seed)
    envs, per = 64, batch // 64
    steps = episodes // envs
    run_input = rng.integers(0, U, size=(envs, steps // K + per // K + 2))
    ids = np.array([f"x{i:06d}" for i in range(U)], dtype=object)
    for t0 in range(0, steps, per):
        g = np.arange(t0, t0 + per)[:, None] + (np.arange(envs) % K)[None, :]
        run, k = g // K, g % K
        row = np.broadcast_to(np.arange(envs), g.shape)
        u = run_input[row, run].ravel()
        n = u.size
        hits = np.zeros((n, M), dtype=bool)
        hits[np.arange(n), rng.integers(0, M, n)] = True
        si, ri = k.ravel().astype(np.int64), run.ravel().astype(np.int64)
        yield EpisodeBatch.of(
            STRATS,
            ids[u],
            hits,
            valid=rng.random(n) < 0.5,
            env_index=row.ravel(),
            sample_index=si,
            run_index=ri,
        )


def test_point_estimates_are_the_curves_and_do_not_depend_on_arrival_order() -> None:
    """point() from the group totals equals the curves' point estimates (to 1e-12), and feeding the
    same runs in another order (other input codes, other batches) gives the same digits."""
    rng = np.random.default_rng(12)
    runs = [
        (f"x{int(rng.integers(0, 300))}", r, rng.random((K, M)) < 0.2, rng.random(K) < 0.5)
        for r in range(2000)
    ]
    trackers = []
    for seed in (0, 1):
        t = CoverageTracker(STRATS, budget=K)
        order = np.random.default_rng(seed).permutation(len(runs))
        rows = [(runs[i][0], runs[i][1], runs[i][2][k], runs[i][3][k]) for i in order for k in range(K)]
        cuts = np.r_[0, np.sort(np.random.default_rng(seed).choice(len(rows), 30, replace=False)), len(rows)]
        for a, b in itertools.pairwise(cuts):
            part = rows[a:b]
            t.update_many(
                [p[0] for p in part], np.array([p[2] for p in part]).reshape(-1, M),
                valid=np.array([p[3] for p in part], dtype=bool), stream=[p[1] for p in part],
            )  # fmt: skip
        trackers.append(t)
    pa, pb, c = trackers[0].point(), trackers[1].point(), trackers[0].curves(n_boot=0)
    for name in ("coverage", "novelty", "expected_new", "full_coverage", "valid_coverage", "valid_at_k"):
        np.testing.assert_allclose(pa[name], getattr(c, name), rtol=0, atol=1e-12, err_msg=name)
        assert np.array_equal(pa[name], pb[name]), name
    assert pa["auc"] == pytest.approx(c.auc, abs=1e-12) and pa["auc"] == pb["auc"]
    assert repr(pa["time_to_coverage"]) == repr(pb["time_to_coverage"])  # NaN medians compare by text


def test_curves_memory_bounded_at_many_inputs() -> None:
    """1,000 replicates over 25,000 inputs: under 100 MB traced during curves() (inputs x
    replicates counts would take ~400 MB); over 3,000 inputs (the exact bootstrap, in blocks) under
    60 MB."""
    for U, episodes, cap in ((25_000, 100_000, 100), (5_000, 20_000, 60)):
        t = CoverageTracker(STRATS, budget=K)
        for b in _stream(U, episodes):
            t.record(b)
        tracemalloc.start()
        try:
            c = t.curves(n_boot=1000, seed=0)
            peak = tracemalloc.get_traced_memory()[1] / 2**20
        finally:
            tracemalloc.stop()
        assert peak < cap, (U, peak)
        assert c.expected_new_hi is not None and c.time_to_coverage["0.5"].survival_hi is not None


def test_bootstrap_blocks_are_the_counts_of_one_draw() -> None:
    """Any block size draws the same counts as the whole at once (so blocks change no replicate)."""
    from seffi.coverage.resampling import bootstrap_blocks, bootstrap_counts

    strata = np.array([0] * 7 + [1] * 3 + [2] * 12)
    want = bootstrap_counts(strata, 150, seed=9)
    for block in (1, 7, 64, 150):
        got = np.zeros_like(want)
        for _, idx, rows, W in bootstrap_blocks(strata, 150, seed=9, block=block):
            got[rows, idx] = W
        np.testing.assert_array_equal(got, want)


def test_normal_limit_replicates_agree_with_the_exact_bootstrap(monkeypatch: pytest.MonkeyPatch) -> None:
    """Over 4,000 inputs (the normal limit moved down to them): the expected-new and time-to-coverage
    intervals and the AUC replicates' spread agree with the exact bootstrap's within 10% of the
    interval width (the percentiles of 1,000 replicates move by ~8%), and the point estimates are the
    same to the last digit."""
    from seffi.coverage import sums_curves as boot

    t = CoverageTracker(STRATS, budget=K)
    for b in _stream(4_000, 40_000, seed=5):
        t.record(b)
    exact = t.curves(n_boot=1000, seed=1)
    monkeypatch.setattr(boot, "NORMAL_INPUTS", 1000)
    normal = t.curves(n_boot=1000, seed=1)
    assert normal.auc == exact.auc and np.array_equal(normal.coverage, exact.coverage)
    width = exact.expected_new_hi - exact.expected_new_lo
    assert np.all(np.abs(normal.expected_new_lo - exact.expected_new_lo) <= 0.1 * width + 1e-9)
    assert np.all(np.abs(normal.expected_new_hi - exact.expected_new_hi) <= 0.1 * width + 1e-9)
    for key, e in exact.time_to_coverage.items():
        n = normal.time_to_coverage[key]
        w = np.asarray(e.survival_hi) - np.asarray(e.survival_lo)
        assert np.all(np.abs(np.asarray(n.survival_lo) - e.survival_lo) <= 0.1 * w + 1e-6), key
        assert np.all(np.abs(np.asarray(n.survival_hi) - e.survival_hi) <= 0.1 * w + 1e-6), key
    assert normal.auc_reps.std() == pytest.approx(exact.auc_reps.std(), rel=0.1)
    assert math.isclose(normal.auc_reps.mean(), exact.auc, abs_tol=3 * exact.auc_reps.std() / 30)


def test_window_estimates_equal_a_tracker_holding_only_those_runs() -> None:
    """point(slots=...) (a streaming log's window, O(its runs)) equals the point estimates of a
    tracker fed only those runs, to 1e-12."""
    rng = np.random.default_rng(21)
    runs = [
        (f"x{int(rng.integers(0, 40))}", r, rng.random((K, M)) < 0.25, rng.random(K) < 0.5)
        for r in range(300)
    ]
    t = CoverageTracker(STRATS, budget=K)
    for x, r, hits, valid in runs:
        t.update_many([x] * K, hits, valid=valid, stream=r)
    window = np.sort(rng.choice(len(runs), 120, replace=False))
    alone = CoverageTracker(STRATS, budget=K)
    for i in window:
        x, r, hits, valid = runs[i]
        alone.update_many([x] * K, hits, valid=valid, stream=r)
    codes = np.array([t.keys.get(("", runs[i][0])) for i in window])
    slots = t._slots_of(codes, np.array([runs[i][1] for i in window]))
    p, q = t.point(slots=slots), alone.point()
    np.testing.assert_allclose(p["coverage"], q["coverage"], rtol=0, atol=1e-12)
    assert p["auc"] == pytest.approx(q["auc"], abs=1e-12)


def test_key_index_finds_what_a_dict_holds() -> None:
    """`KeyIndex` (two sorted arrays) answers as a dict over batches of new and known keys."""
    from seffi.coverage.assign import KeyIndex

    rng = np.random.default_rng(0)
    index, ref = KeyIndex(), {}
    for _ in range(60):  # ~30k keys: the small array is merged into the large one several times
        want = np.unique(rng.integers(-(2**62), 2**62, int(rng.integers(1, 1000))))
        if ref and rng.random() < 0.5:
            want = np.union1d(want, rng.choice(np.fromiter(ref, np.int64), 50))
        got = index.get(want)
        np.testing.assert_array_equal(got, [ref.get(k, -1) for k in want.tolist()])
        new = want[got < 0]
        rows = np.arange(len(ref), len(ref) + new.size)
        index.add(new[::-1].copy(), rows[::-1].copy())  # any order
        ref.update(zip(new.tolist(), rows.tolist(), strict=True))
        assert len(index) == len(ref)
    keys = np.fromiter(ref, np.int64)
    np.testing.assert_array_equal(index.get(keys), [ref[k] for k in keys.tolist()])
