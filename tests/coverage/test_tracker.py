"""CoverageTracker: hand-computed curves, errors, merge/resume properties (hypothesis)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seffi.coverage import CoverageTracker, Curves, IidBaseline

IDS = ("a", "b", "c")


def test_hand_computed_curves() -> None:
    t = CoverageTracker(strategies=IDS)
    for ms, v in [({"a"}, False), ({"a"}, True), ({"b", "c"}, True)]:
        t.update("x", ms, valid=v)
    for ms, v in [(set(), False), ({"c"}, True), ({"c"}, False)]:
        t.update("y", ms, valid=v)
    c = t.curves(3, n_boot=0)
    np.testing.assert_allclose(c.coverage, [(1 / 3 + 0) / 2, (1 / 3 + 1 / 3) / 2, (1 + 1 / 3) / 2])
    np.testing.assert_allclose(c.novelty, [0.5, 0.5, 0.5])
    np.testing.assert_allclose(c.expected_new, [0.5, 0.5, 1.0])
    np.testing.assert_allclose(c.full_coverage, [0, 0, 0.5])
    np.testing.assert_allclose(c.valid_coverage, [0, (1 / 3 + 1 / 3) / 2, (1 + 1 / 3) / 2])
    np.testing.assert_allclose(c.valid_at_k, [0, 1, 1])
    ttc = c.time_to_coverage
    np.testing.assert_allclose(ttc["0.5"].survival, [1, 1, 0.5])  # x reaches 2/3 at k = 3
    assert ttc["0.5"].median == 3 and ttc["1.0"].fraction_censored == 0.5
    assert ttc["1.0"].restricted_mean == pytest.approx(1 + 1 + 1)
    assert c.auc == pytest.approx(c.coverage.mean())


def test_per_input_denominator_and_weighting() -> None:
    t = CoverageTracker(strategies=None)
    t.update("x", ["p"], num_strategies=4)
    t.update("x", ["q"], num_strategies=4, stream=1)  # two runs of x weigh as one input
    t.update("y", ["r"], num_strategies=2)
    c = t.curves(1, n_boot=0)
    assert c.coverage[0] == pytest.approx((0.25 + 0.5) / 2)
    with pytest.raises(ValueError, match="M_x"):
        t.update("x", ["p"], num_strategies=5)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda t: t.update("x", {"zz"}), "unknown strategy"),
        (lambda t: t.update("x", "a"), "iterable"),
        (lambda t: t.update("x", {"a"}, stream=-1), "stream"),
        (lambda t: t.curves(0), "budget K"),
        (lambda t: t.merge(CoverageTracker(strategies=("a", "b"))), "different strategy sets"),
        (lambda t: t.load_state_dict({"format": "other"}), "not a seffi"),
        (lambda t: t.load_state_dict("{broken"), "JSON"),
    ],
)
def test_bad_input_raises_one_clear_error(call, match: str) -> None:
    t = CoverageTracker(strategies=IDS)
    t.update("x", {"a"})
    with pytest.raises(ValueError, match=match):
        call(t)


def test_corrupted_state_rejected_and_tracker_unchanged() -> None:
    t = CoverageTracker(strategies=IDS)
    t.update("x", {"a"})
    t.update("x", {"b"})
    good = t.state_dict()
    bad = json.loads(json.dumps(good))
    bad["runs"]["first_hit"][0] = "07-"  # b first hit at sample 7: beyond the run length
    with pytest.raises(ValueError, match="corrupted"):
        t.load_state_dict(bad)
    bad2 = json.loads(json.dumps(good))
    del bad2["runs"]["n_valid"]
    with pytest.raises(ValueError, match="corrupted"):
        t.load_state_dict(bad2)
    assert t.state_dict() == good


def test_overlapping_runs_refuse_to_merge() -> None:
    a, b = CoverageTracker(strategies=IDS), CoverageTracker(strategies=IDS)
    a.update("x", {"a"})
    b.update("x", {"b"})
    with pytest.raises(ValueError, match="both trackers hold"):
        a.merge(b)


samples_st = st.lists(
    st.tuples(
        st.sampled_from(["x1", "x2", "x3"]),
        st.integers(0, 2),
        st.sets(st.sampled_from(IDS), max_size=3),
        st.booleans(),
    ),
    min_size=1,
    max_size=40,
)


def _fill(samples, barcode_rows=2) -> CoverageTracker:
    t = CoverageTracker(strategies=IDS, barcode_rows=barcode_rows, barcode_cols=4)
    for iid, stream, ms, v in samples:
        t.update(iid, ms, valid=v, stream=stream)
    return t


def _split(samples, parts: int):
    """Give each (input, stream) run to one part (runs are the unit of merging)."""
    out = [[] for _ in range(parts)]
    for s in samples:
        out[(hash(s[0]) * 0 + ord(s[0][-1]) + s[1]) % parts].append(s)
    return out


@settings(max_examples=40, deadline=None)
@given(samples_st)
def test_merge_associative_commutative_and_equal_to_single(samples) -> None:
    p1, p2, p3 = _split(samples, 3)
    whole = _fill(samples).state_dict()
    left = _fill(p1).merge(_fill(p2)).merge(_fill(p3)).state_dict()
    right = _fill(p3).merge(_fill(p2).merge(_fill(p1))).state_dict()
    assert left == right == whole


@settings(max_examples=40, deadline=None)
@given(samples_st, st.integers(0, 40))
def test_resume_identical(samples, cut) -> None:
    full = _fill(samples)
    first = _fill(samples[:cut])
    resumed = CoverageTracker().load_state_dict(json.loads(json.dumps(first.state_dict())))
    for iid, stream, ms, v in samples[cut:]:
        resumed.update(iid, ms, valid=v, stream=stream)
    assert resumed.state_dict() == full.state_dict()
    if not full.complete_runs(5):  # no run reached K: both refuse the same way
        with pytest.raises(ValueError, match="no run has reached K=5"):
            resumed.curves(5, n_boot=50, seed=1)
        return
    a, b = full.curves(5, n_boot=50, seed=1), resumed.curves(5, n_boot=50, seed=1)
    assert a.to_dict() == b.to_dict()


@settings(max_examples=40, deadline=None)
@given(samples_st)
def test_curves_in_unit_interval_and_monotone(samples) -> None:
    K = 4
    t = _fill([(i, 0, ms, v) for i, _, ms, v in samples])
    t2 = CoverageTracker(strategies=IDS)
    for iid in t.input_ids():  # equal-length runs: pad every run to K samples
        runs = [(ms, v) for i, _, ms, v in samples if i == iid][:K]
        runs += [(set(), False)] * (K - len(runs))
        for ms, v in runs:
            t2.update(iid, ms, valid=v)
    for tr in (t, t2) if t.complete_runs(K) else (t2,):  # t may have no run that reached K
        c = tr.curves(K, n_boot=20)
        for name in ("coverage", "novelty", "full_coverage", "valid_coverage", "valid_at_k"):
            arr = getattr(c, name)
            arr = arr[~np.isnan(arr)]
            assert ((arr >= 0) & (arr <= 1 + 1e-12)).all()
    c = t2.curves(K, n_boot=20)
    assert (np.diff(c.coverage) >= -1e-12).all() and (np.diff(c.full_coverage) >= -1e-12).all()
    if c.coverage_lo is not None:  # none with few inputs of one run each (nothing to resample)
        assert (c.coverage_lo <= c.coverage + 1e-6).all() and (c.coverage <= c.coverage_hi + 1e-6).all()
    rt = Curves.from_dict(json.loads(json.dumps(c.to_dict(), allow_nan=False)))
    assert rt.to_dict() == c.to_dict()


def test_barcode_bounded_and_order_independent() -> None:
    samples = [
        ("x3", 0, {"b"}, True),
        ("x1", 0, {"c", "a"}, True),
        ("x2", 0, set(), False),
        ("x1", 0, {"a"}, True),
    ]
    a = _fill(samples, barcode_rows=2)
    x1 = [s for s in samples if s[0] == "x1"]
    rest = [s for s in samples if s[0] != "x1"]
    b = _fill(rest, barcode_rows=2).merge(_fill(x1, barcode_rows=2))
    bc = a.barcode(3)
    assert bc["rows"] == ["x1/0", "x2/0"]
    assert bc["first_strategy"] == [[0, 0, -1], [-1, -1, -1]]
    assert bc["new"] == [[True, False, False], [False, False, False]]
    assert a.curves(2, n_boot=0).barcode == a.barcode(2)  # x1's run is complete at K = 2
    assert b.barcode(3) == bc  # the kept rows do not depend on update/merge order


def test_free_form_barcode_starts_on_samples_that_match_nothing() -> None:
    """A free-form tracker keeping barcode rows: samples before any strategy was seen are "no match"
    cells, and the first strategy seen later gets column 0 and its first-appearance dot."""
    t = CoverageTracker(None, budget=3, barcode_rows=2)
    for x, matched in (("x", set()), ("y", set()), ("x", {"a"}), ("x", {"a"}), ("y", {"b"})):
        t.update(x, matched, num_strategies=2)
    bc = t.barcode(3)
    assert bc["rows"] == ["x/0", "y/0"]
    assert bc["first_strategy"] == [[-1, 0, 0], [-1, 1, -1]]
    assert bc["new"] == [[False, True, False], [False, True, False]]


def test_rarity_split_sums_to_coverage() -> None:
    t = CoverageTracker(strategies=IDS)
    rng = np.random.default_rng(0)
    for x in range(10):
        for _ in range(6):
            t.update(f"x{x}", {IDS[rng.choice(3, p=[0.7, 0.2, 0.1])]})
    base = IidBaseline.from_probabilities({"a": 0.7, "b": 0.2, "c": 0.1})
    c = t.curves(6, n_boot=0, rarity=base, rarity_bins=3)
    np.testing.assert_allclose(c.coverage_by_rarity.sum(axis=0), c.coverage)
    assert c.rarity_bins[0].startswith("q1") and c.coverage_by_rarity[0, 0] > c.coverage_by_rarity[2, 0]


@settings(max_examples=40, deadline=None)
@given(samples_st, st.lists(st.integers(0, 40), max_size=4), st.booleans())
def test_update_many_equals_sequential_updates(samples, cuts, as_matrix) -> None:
    """Batched updates (split anywhere, matrix or sets) give the state of one update per sample."""
    want = _fill(samples, barcode_rows=3)
    got = CoverageTracker(strategies=IDS, barcode_rows=3, barcode_cols=4)
    bounds = [0, *sorted(c for c in cuts if c <= len(samples)), len(samples)]
    for a, b in itertools.pairwise(bounds):
        chunk = samples[a:b]
        ms = [s[2] for s in chunk]
        if as_matrix:
            ms = np.array([[x in m for x in IDS] for m in ms], dtype=bool).reshape(len(chunk), len(IDS))
        got.update_many(
            [s[0] for s in chunk],
            ms,
            valid=np.array([s[3] for s in chunk], dtype=bool),
            stream=np.array([s[1] for s in chunk], dtype=np.int64),
        )
    assert got.state_dict() == want.state_dict()


def test_update_many_checks_the_whole_batch_first() -> None:
    t = CoverageTracker(strategies=("a", "b"))
    t.update("x", {"a"})
    before = t.state_dict()
    with pytest.raises(ValueError, match="unknown strategy ids"):
        t.update_many(["x", "y"], [{"b"}, {"zz"}])
    with pytest.raises(ValueError, match="shape"):
        t.update_many(["x"], np.ones((1, 3), dtype=bool))
    with pytest.raises(ValueError, match="stream"):
        t.update_many(["x"], [{"a"}], stream=-1)
    with pytest.raises(ValueError, match="M_x is 1"):
        t.update_many(["y", "y"], [{"a"}, {"b"}], num_strategies=1)
    assert t.state_dict() == before
    free = CoverageTracker()
    free.update_many(["p", "p", "q"], [{"u"}, {"v", "u"}, set()], num_strategies=3)
    ref = CoverageTracker()
    for x, ms in (("p", {"u"}), ("p", {"v", "u"}), ("q", set())):
        ref.update(x, ms, num_strategies=3)
    assert free.state_dict() == ref.state_dict()


def test_update_many_long_runs_split_into_many_batches() -> None:
    """Runs continued across many batches keep their sample positions (seeded random data)."""
    rng = np.random.default_rng(3)
    n = 400
    ids = rng.choice(["x1", "x2"], n).tolist()
    streams = rng.integers(0, 2, n)
    mat = rng.random((n, len(IDS))) < 0.15
    valid = rng.random(n) < 0.6
    want = CoverageTracker(strategies=IDS, barcode_rows=2, barcode_cols=50)
    for i in range(n):
        want.update(
            ids[i],
            {s for s, hit in zip(IDS, mat[i], strict=True) if hit},
            valid=bool(valid[i]),
            stream=int(streams[i]),
        )
    got = CoverageTracker(strategies=IDS, barcode_rows=2, barcode_cols=50)
    cuts = np.r_[0, np.sort(rng.choice(np.arange(1, n), 40, replace=False)), n]
    for a, b in itertools.pairwise(cuts):
        got.update_many(ids[a:b], mat[a:b], valid=valid[a:b], stream=streams[a:b])
    assert got.state_dict() == want.state_dict()
    np.testing.assert_array_equal(got.curves(50, n_boot=0).coverage, want.curves(50, n_boot=0).coverage)


def test_update_is_atomic_when_m_x_is_exceeded() -> None:
    """A refused sample leaves no empty run behind (C(2) stays 0.75, not 0.667)."""
    t = CoverageTracker(None, barcode_rows=4)
    t.update("x", ["a"], num_strategies=2)
    t.update("x", ["b"])
    t.update("y", ["a"], num_strategies=2)
    t.update("y", ["a"])
    np.testing.assert_allclose(t.curves(2, n_boot=0).coverage, [0.5, 0.75])
    before = t.state_dict()
    with pytest.raises(ValueError, match="matched 3 distinct strategies but its M_x is 2"):
        t.update("x", ["a", "b", "c"], stream=1)  # a new run of x, refused on its first sample
    with pytest.raises(ValueError, match="matched 3 distinct strategies but its M_x is 2"):
        t.update("y", ["b", "c"])  # an existing run
    with pytest.raises(ValueError, match="matched 2 distinct strategies but its M_x is 1"):
        t.update("z", ["a", "b"], num_strategies=1)  # a new input: its M_x must not stick either
    assert t.state_dict() == before
    assert len(t) == 2 and t.input_ids() == ["x", "y"]
    np.testing.assert_allclose(t.curves(2, n_boot=0).coverage, [0.5, 0.75])
    # z's refused M_x was not recorded, so z can start with another one.
    t.update("z", ["a", "b"], num_strategies=2)
    with pytest.raises(ValueError, match="matched 4 distinct strategies but its M_x is 2"):
        t.update_many(["x", "x"], [["a"], ["b", "c", "d"]], stream=1)
    assert len(t) == 3


def test_version_1_states_load_with_their_curves() -> None:
    """Format-1 states (tests/coverage/data/states_v1.json, written in that format from random
    samples) load with the same curves, and a v1
    monitor state resumes its open runs and ends with the curves of the whole run."""
    from seffi.callbacks import CoverageMonitor
    from tests.helpers import rows_batch

    data = json.loads((Path(__file__).parent / "data" / "states_v1.json").read_text())
    old = data["tracker"]
    t = CoverageTracker.from_state_dict(old["state"])
    c = t.curves(5, n_boot=0)
    # By hand from the v1 run dicts (complete runs only, inputs weigh the same).
    per_input: dict[str, list[list[float]]] = {}
    for run in old["state"]["runs"]:
        if run["n"] >= 5:
            hits = list(run["first_hit"].values())
            per_input.setdefault(run["input_id"], []).append(
                [sum(h < k for h in hits) / 4 for k in range(1, 6)]
            )
    want = np.mean([np.mean(v, axis=0) for v in per_input.values()], axis=0)
    np.testing.assert_allclose(c.coverage, want, atol=1e-12)
    assert c.n_inputs == len(per_input) and t.samples == sum(r["n"] for r in old["state"]["runs"])
    assert t.state_dict()["format"] == "seffi.coverage.tracker/2"
    mon = data["monitor"]

    class Null:
        def log(self, *a, **k): ...
        def log_snapshot(self, *a, **k): ...
        def finish(self, *a, **k): ...

    m = CoverageMonitor(5, ("a", "b", "c", "d"), sinks=Null(), n_boot=0).load_state_dict(mon["state"])
    keys = ("input_id", "strategy_matches", "valid", "env_index", "sample_index", "run_index")
    m.update(rows_batch(m.coder, [dict(zip(keys, row, strict=True)) for row in mon["rest"]]))
    got = m.curves()
    np.testing.assert_allclose(got.coverage, mon["coverage"], atol=1e-12)
    np.testing.assert_allclose(got.valid_coverage, mon["valid_coverage"], atol=1e-12)
    assert (m.samples, m.episodes) == (mon["samples"], mon["episodes"])


def test_state_is_compact_and_round_trips() -> None:
    """tracker_state.json is compact: first-hit rows are packed one character per cell,
    the rows take under half their unpacked size, and the state loads back to the same curves."""
    rng = np.random.default_rng(3)
    ids = tuple("abcdefghij")  # ten strategies, like a router's latent codes
    t = CoverageTracker(strategies=ids, budget=8)
    for i in range(3000):
        t.update(f"x{i % 50}", {s for s in ids if rng.random() < 0.2}, stream=i // 400)
    state = t.state_dict()
    assert all(isinstance(r, str) and len(r) == len(ids) for r in state["runs"]["first_hit"])
    for name in ("first_hit", "first_valid_hit"):
        unpacked = getattr(t.runs, name)[: len(t)].tolist()
        assert len(json.dumps(state["runs"][name])) < 0.5 * len(json.dumps(unpacked))
    back = CoverageTracker.from_state_dict(json.loads(json.dumps(state)))
    assert back.state_dict() == state
    np.testing.assert_array_equal(back.curves(n_boot=0).coverage, t.curves(n_boot=0).coverage)


def test_metric_counts_widen_before_they_could_overflow() -> None:
    # One input matched by "a" 301 times, by "b" 40 times, and a second input once: the strategy
    # counts start in one byte and must hold 301 exactly, through batches that cross 127.
    t = CoverageTracker(strategies=IDS)
    (entropy,) = t.metrics
    t.update("x", {"a"})
    assert entropy.counts.dtype == np.int8
    for _ in range(2):
        t.update_many(["x"] * 170, [{"a"}] * 150 + [{"b"}] * 20, stream=0)
    t.update("y", {"c"})
    counts = entropy.rows("counts")
    assert counts.dtype == np.int16
    np.testing.assert_array_equal(counts, [[301, 40, 0], [0, 0, 1]])
    back = CoverageTracker.from_state_dict(json.loads(json.dumps(t.state_dict())))
    np.testing.assert_array_equal(back.metrics[0].rows("counts"), counts)  # loaded: fitted to 301
    assert back.metrics[0].counts.dtype == np.int16
    est, again = t.metric_estimates()["strategy_entropy"], back.metric_estimates()["strategy_entropy"]
    assert est == again
    p = np.array([301, 40]) / 341  # Miller-Madow: H + (2 - 1) / (2 * 341); input y: exp(0 + 0) = 1
    assert est.value == pytest.approx((np.exp(-(p * np.log(p)).sum() + 1 / 682) + 1.0) / 2)


def test_input_keys_with_equal_hashes_keep_their_codes(monkeypatch: pytest.MonkeyPatch) -> None:
    from seffi.coverage import assign

    monkeypatch.setattr(assign, "hash", lambda key: 7, raising=False)  # every key hashes alike
    keys = assign.InputKeys()
    keys.add([("t", "b"), ("t", "a"), ("u", "a")])
    keys.add([("t", "c")])
    np.testing.assert_array_equal(keys.codes("t", ["a", "c", "b", "z"]), [1, 3, 0, -1])
    np.testing.assert_array_equal(keys.codes("u", ["a", "b"]), [2, -1])
    assert keys.codes("v", ["a"]).tolist() == [-1]
    assert list(keys) == [("t", "b"), ("t", "a"), ("u", "a"), ("t", "c")]
    assert keys[3] == ("t", "c") and keys[1:3] == [("t", "a"), ("u", "a")]
    assert keys.order().tolist() == [1, 0, 3, 2]  # sorted (task, input_id)
