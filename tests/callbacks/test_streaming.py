"""Streaming statistics and the monitor's state API, against independent references.

References: the per-episode loop for the vectorised run assignment; a tracker fed by hand for the
monitor's; one monitor fed with every episode for merged and resumed monitors.
"""

from __future__ import annotations

import itertools
import json
import warnings

import gymnasium as gym
import numpy as np
import pytest

from seffi.callbacks.core import CoverageMonitor
from seffi.coverage import CoverageTracker
from seffi.coverage.assign import RunAssigner
from seffi.errors import SeffiError
from tests.helpers import rows_batch

STRATS = ("a", "b", "c", "d")


class _Null:
    def __init__(self):
        self.logged = []
        self.snapshots = []

    def log(self, data, step):
        self.logged.append((step, dict(data)))

    def log_snapshot(self, comparison, step, scope=None):
        self.snapshots.append(step)

    def finish(self, report=None, tracker_state=None):
        pass


def _loop_only(assigner: RunAssigner, u, env, si, ri):
    """The rules of `RunAssigner.assign`, one episode at a time."""
    e = assigner.env_columns(env)
    assigner.ensure_inputs(int(u.max()) + 1)
    slots, ks = np.empty(u.size, dtype=np.int64), np.empty(u.size, dtype=np.int64)
    rows = zip(u.tolist(), e.tolist(), si.tolist(), ri.tolist(), strict=True)
    for i, (ui, ei, sii, rii) in enumerate(rows):
        r = int(assigner._rows(np.array([(ui << 32) | ei], dtype=np.int64))[0])
        slot = int(assigner.o_slot[r])
        new = slot < 0
        if not new:
            last_si, last_ri = assigner.o_si[r], assigner.o_ri[r]
            if rii >= 0 and last_ri >= 0:
                new = rii != last_ri
            elif sii >= 0 and last_si >= 0:
                new = sii <= last_si
            else:
                new = assigner.o_cnt[r] >= assigner.budget
        if new:
            slot = int(assigner._new_slots(np.array([ui], dtype=np.int64))[0])
            assigner.o_slot[r], assigner.o_cnt[r] = slot, 0
        assigner.o_cnt[r] += 1
        assigner.o_si[r], assigner.o_ri[r] = sii, rii
        slots[i], ks[i] = slot, assigner.o_cnt[r]
    return slots, ks


@pytest.mark.parametrize("kind", ["run_index", "sample_index", "mixed", "none"])
def test_vectorised_run_assignment_equals_the_per_episode_loop(kind: str) -> None:
    rng = np.random.default_rng(5)
    K, n = 4, 600
    u = rng.integers(0, 3, n)
    env = rng.integers(0, 4, n) * 7  # sparse env indices
    # env-like indices: per (input, env) counters that restart after K samples
    si, ri = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
    count: dict = {}
    for i in range(n):
        c = count.get((u[i], env[i]), 0)
        count[(u[i], env[i])] = c + 1
        si[i], ri[i] = c % (K + 1) + 1, c // (K + 1)  # some runs go one past K
    if kind == "sample_index":
        ri[:] = -1
    elif kind == "mixed":
        ri[rng.random(n) < 0.3] = -1
    elif kind == "none":
        ri[:], si[:] = -1, -1
    fast, slow = RunAssigner(K, stream_offset=3), RunAssigner(K, stream_offset=3)
    cuts = np.r_[0, np.sort(rng.choice(np.arange(1, n), 30, replace=False)), n]
    for a, b in itertools.pairwise(cuts):
        s1, k1 = fast.assign(u[a:b], env[a:b], si[a:b], ri[a:b])
        s2, k2 = _loop_only(slow, u[a:b], env[a:b], si[a:b], ri[a:b])
        np.testing.assert_array_equal(k1, k2)
        np.testing.assert_array_equal(fast.slot_stream[s1], slow.slot_stream[s2])
    np.testing.assert_array_equal(fast.next_stream, slow.next_stream)
    if kind == "run_index":
        assert (k1 <= K + 1).all() and fast.n_slots == len(
            {(a, b, c) for a, b, c in zip(u, env, ri, strict=True)}
        )


def _ends(seed: int, n: int, inputs=("p", "q", "r"), K: int = 5, envs: int = 3):
    rng = np.random.default_rng(seed)
    out, count = [], {}
    for _ in range(n):
        x, e = inputs[int(rng.integers(len(inputs)))], int(rng.integers(envs))
        c = count.get((x, e), 0)
        count[(x, e)] = c + 1
        ms = tuple(s for s in STRATS if rng.random() < 0.25)
        row = {"input_id": x, "strategy_matches": ms, "valid": bool(rng.random() < 0.8), "env_index": e}
        out.append(dict(row, sample_index=c % K + 1, run_index=c // K))
    return out


def _feed(m: CoverageMonitor, rows) -> int:
    return m.update(rows_batch(m.coder, rows))


def _monitor(**kw) -> CoverageMonitor:
    return CoverageMonitor(5, STRATS, sinks=_Null(), n_boot=50, **kw)


def _without_open(state):
    return {k: v for k, v in state.items() if k != "open_runs"}


def test_merge_is_exact_and_order_independent() -> None:
    ends = _ends(0, 300)
    whole = _monitor()
    _feed(whole, ends)
    parts = [ends[:100], ends[100:220], ends[220:]]
    # Each worker sees its own env rows (offset), so runs do not straddle workers.
    monitors = []
    for w, part in enumerate(parts):
        m = _monitor(stream_offset=100 * w)
        _feed(m, [dict(e, env_index=e["env_index"] + 10 * w) for e in part])
        monitors.append(m)
    ab = _monitor().merge(monitors[0]).merge(monitors[1]).merge(monitors[2])
    ba = _monitor().merge(monitors[2].state_dict()).merge(monitors[1]).merge(monitors[0])
    assert _without_open(ab.state_dict()) == _without_open(ba.state_dict())
    ref = _monitor()  # one monitor fed with all episodes, env rows kept apart like the workers'
    for w, part in enumerate(parts):
        _feed(ref, [dict(e, env_index=e["env_index"] + 10 * w) for e in part])
    a, b = ab.curves(), ref.curves()
    np.testing.assert_allclose(a.coverage, b.coverage, atol=1e-12)
    assert (ab.episodes, ab.samples) == (ref.episodes, ref.samples) == (300, ref.tracker.n_samples)
    # A merged monitor logs over every run (merged runs carry no completion dates: no window keys).
    windowless = {k: v for k, v in ref.point_scalars().items() if not k.startswith("seffi/window/")}
    assert ab.point_scalars() == windowless and ab.recent is None
    with pytest.raises(SeffiError, match="both monitors hold run"):
        ab.merge(monitors[0])  # the same runs twice
    assert ab.samples == 300  # unchanged by the refused merge


def test_merge_into_a_worker_whose_streams_start_past_a_small_int() -> None:
    """A worker with ``stream_offset`` 128 or 5000 takes in one with offset 0 (its streams held in the
    narrowest int type) in either direction, and equals one monitor fed both workers' episodes."""
    ends = _ends(2, 160)
    for offset in (128, 5000):
        low, high, ref = _monitor(), _monitor(stream_offset=offset), _monitor()
        for m, part, rows in ((low, ends[:80], 0), (high, ends[80:], 10)):
            moved = [dict(e, env_index=e["env_index"] + rows) for e in part]
            _feed(m, moved)
            _feed(ref, moved)
        for merged in (_monitor(stream_offset=offset).merge(low).merge(high), high.merge(low)):
            np.testing.assert_allclose(merged.curves().coverage, ref.curves().coverage, atol=1e-12)
            assert (merged.episodes, merged.samples) == (ref.episodes, ref.samples) == (160, 160)


def test_load_states_puts_each_worker_in_its_own_streams() -> None:
    ends = _ends(1, 200)
    states = []
    for part in (ends[:90], ends[90:]):
        m = _monitor()  # both workers use stream_offset 0 and env rows 0..2
        _feed(m, part)
        states.append(json.loads(json.dumps(m.state_dict())))
    driver = _monitor().load_states(states)
    ref = CoverageTracker(strategies=STRATS, task="unknown", budget=5)
    for w, st in enumerate(states):  # each worker's runs moved to its own block of streams by hand
        worker = CoverageTracker.from_state_dict(st["tracker"])
        moved = CoverageTracker(strategies=STRATS, task="unknown", budget=5)
        for slot in range(len(worker)):
            x = worker.keys[int(worker.assigner.slot_input[slot])][1]
            stream = int(worker.assigner.slot_stream[slot]) + 1000 * w
            for i in range(int(worker.runs.n[slot])):
                hit = [s for j, s in enumerate(STRATS) if worker.runs.first_hit[slot, j] == i]
                moved.update(x, hit, valid=bool(worker.runs.first_valid[slot] <= i), stream=stream)
        ref.merge(moved)
    np.testing.assert_allclose(driver.curves().coverage, ref.curves(5, n_boot=0).coverage, atol=1e-12)
    assert driver.episodes == 200 and driver.tracker.n_samples == ref.n_samples


def test_resume_continues_open_runs_exactly() -> None:
    ends = _ends(2, 240)
    whole = _monitor()
    _feed(whole, ends)
    first = _monitor()
    _feed(first, ends[:111])
    resumed = _monitor().load_state_dict(json.loads(json.dumps(first.state_dict())))
    _feed(resumed, ends[111:])
    assert resumed.state_dict() == whole.state_dict()
    before = resumed.state_dict()
    with pytest.raises(SeffiError, match="not a CoverageMonitor state"):
        resumed.load_state_dict({"format": "nope"})
    with pytest.raises(SeffiError, match=r"does not mix with this monitor: it has budget=7 \(this"):
        resumed.load_state_dict({**before, "tracker": {**before["tracker"], "budget": 7}})
    with pytest.raises(SeffiError, match="corrupted"):
        bad = {**before["tracker"], "inputs": {"p": {"sums": [[1]]}}}
        resumed.load_state_dict({**before, "tracker": bad})
    assert resumed.state_dict() == before


def test_cheap_logs_agree_with_snapshots_and_no_runtime_warnings() -> None:
    sink = _Null()
    m = CoverageMonitor(8, STRATS, sinks=sink, n_boot=30, log_every=10, log_curves_every=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # runs shorter than K (NaN columns) must not warn anywhere
        for step, end in enumerate(_ends(3, 60, K=8)):
            _feed(m, [end])
            m.maybe_log(step)
        report = m.report()
    # Nothing is logged before the first run reaches K (8 samples).
    first_complete = next(i for i, e in enumerate(_ends(3, 60, K=8)) if e["sample_index"] == 8)
    assert m.n_logs == 3 and sink.logged[0][0] >= first_complete
    assert sink.snapshots == [sink.logged[0][0]]  # logs 0, 3, 6, ... are snapshots
    point = m.point_scalars()
    _, snap = m.snapshot()
    assert set(snap) - set(point) <= set()  # no gain without baselines: same keys
    for key, v in point.items():
        assert snap[key] == pytest.approx(v, abs=1e-12), key
    assert report.comparisons[0].policies[0].curves.n_runs == m.tracker.complete_runs() == 4 < len(m.tracker)


def test_unknown_strategy_and_bad_matches_raise_at_ingestion() -> None:
    m = _monitor()
    with pytest.raises(SeffiError, match=r"strategy ids \['zz'\]"):
        _feed(m, [{"input_id": "p", "strategy_matches": ("zz",)}])
    with pytest.raises(SeffiError, match="must be a tuple of strategy ids"):
        _feed(m, [{"input_id": "p", "strategy_matches": "ab"}])
    assert m.episodes == 0


def test_tracker_built_from_run_arrays_equals_a_hand_fed_tracker() -> None:
    from tests.callbacks.helpers import hand_tracker

    ends = _ends(4, 400)
    m = _monitor()
    for a in range(0, 400, 37):  # uneven batches
        _feed(m, ends[a : a + 37])
        _ = m.tracker  # built mid-way too: later episodes must invalidate it
    finals = [
        (
            e["env_index"],
            {k: v for k, v in e.items() if k != "env_index"},
        )
        for e in ends
    ]

    def runs(state):  # the monitor's tracker carries the task name ("unknown" here), the hand one ""
        return state["inputs"]["input_id"], state["runs"]

    assert runs(m.tracker.state_dict()) == runs(hand_tracker(finals, STRATS, 5).state_dict())


def test_log_gain_from_cached_baseline_aucs_equals_the_snapshot_gain() -> None:
    from tests.envs.common import make_vec

    key = "seffi/gain_vs_iid"
    # K = 1: every run reaches K at once, so the first check has a gain while some inputs are still
    # unseen (the pool baseline is restricted to the seen ones). K = 4: after 1 and 31 steps no run
    # has reached K yet, so neither path reports a gain; after 201 steps both do.
    for K, schedule, has_gain in ((1, (1, 30), (True, True)), (4, (1, 30, 170), (False, False, True))):
        envs = make_vec("sort_swaps", "router", 4, n_inputs=6, budget=4)
        m = CoverageMonitor.for_env(envs, budget=K, sinks=_Null(), n_boot=0)
        envs.reset(seed=0)
        rng = np.random.default_rng(0)
        for steps, expect in zip(schedule, has_gain, strict=True):
            for _ in range(steps):
                _, _, term, trunc, infos = envs.step(rng.integers(0, envs.single_action_space.n, 4))
                m.update_infos(infos, term | trunc)
            assert (len(m.inputs) < 6) == (steps == 1)
            if not expect:  # no run has reached K: no gain, and no curves to snapshot
                assert key not in m.point_scalars()
                with pytest.raises(ValueError, match=f"no run has reached K={K}"):
                    m.snapshot()
                continue
            cheap, (_, snap), (_, exact) = m.point_scalars(), m.snapshot(), m.snapshot(exact=True)
            assert (key in cheap) == (key in snap) == (key in exact) == expect
            if expect:
                assert cheap[key] == pytest.approx(snap[key], abs=1e-9)
                assert snap[key] == pytest.approx(exact[key], abs=1e-9)


def test_sb3_list_rows_equal_the_column_path_and_check_matches() -> None:
    ends = _ends(6, 120, envs=4)
    by_rows, by_cols = _monitor(), _monitor()
    for i in range(0, 120, 4):  # SB3: one list of 4 env dicts per step, all done here
        step = ends[i : i + 4]
        infos = [
            {
                "input_id": e["input_id"],
                "strategy_matches": list(e["strategy_matches"]) if j % 2 else e["strategy_matches"],
                "valid": e["valid"],
                "sample_index": e["sample_index"],
                "run_index": e["run_index"],
                "y_text": "t",
            }
            for j, e in enumerate(step)
        ]  # lists (unhashable) and tuples both
        by_rows.update_infos(infos, np.ones(4, dtype=bool))
        _feed(by_cols, [dict(e, env_index=j) for j, e in enumerate(step)])
    assert by_rows.state_dict() == by_cols.state_dict()
    with pytest.raises(SeffiError, match=r"strategy ids \['zz'\]"):
        by_rows.update_infos([{"input_id": "p", "strategy_matches": ("zz",)}], np.ones(1, dtype=bool))
    with pytest.raises(SeffiError, match="has no 'strategy_matches'"):
        by_rows.update_infos([{"input_id": "p"}], np.ones(1, dtype=bool))
    for matches in (("a",), ("b", "d", "c")):  # a known match set and a new one: the same clear error
        with pytest.raises(SeffiError, match="has no 'input_id'"):
            by_rows.update_infos([{"strategy_matches": matches}], np.ones(1, dtype=bool))
    assert by_rows.episodes == 120


def test_snapshots_convert_cached_baselines_once() -> None:
    from seffi.coverage import IidBaseline, OracleBaseline
    from seffi.report.schema import CurveSet

    law = {x: {frozenset({"a"}): 0.7, frozenset({"b", "c"}): 0.3} for x in ("p", "q", "r")}
    iid = IidBaseline.from_match_distribution(law, strategies=STRATS)
    oracle = OracleBaseline({x: {s: frozenset({s}) for s in STRATS} for x in law}, strategies=STRATS)
    mon = _monitor(iid=iid, oracle=oracle)
    _feed(mon, _ends(0, 30))
    first, _ = mon.snapshot()
    _feed(mon, _ends(1, 30))
    second, _ = mon.snapshot()
    assert second.iid is first.iid and second.oracle is first.oracle  # converted once
    b_iid, b_oracle = mon.baselines(pool=True)
    assert first.iid == CurveSet.from_curves(b_iid, "iid", "iid")
    assert first.oracle == CurveSet.from_curves(b_oracle, "oracle", "oracle")
    mon.env_baselines._curves.clear()  # a recomputed baseline (a new object) is converted again
    mon.env_baselines._users.clear()
    third, _ = mon.snapshot()
    assert third.iid is not first.iid and third.iid == first.iid


# -- the streaming window --------------------------------------------------------------------------------

WIN_K = 4
WIN_STRATS = ("a", "b", "c")
#: Each input's base law over single strategies (exact iid baseline) and the oracle's references.
WIN_LAWS = {"x0": (0.6, 0.3, 0.1), "x1": (0.2, 0.2, 0.6), "x2": (0.5, 0.45, 0.05)}


def _window_stream(n_episodes: int, seed: int = 3) -> list[tuple[int, str, str]]:
    """(env row, input, strategy) per episode: 3 env rows, each running K-sample runs on one input
    at a time (the next input in turn); strategies drawn so that the policy changes half way."""
    rng = np.random.default_rng(seed)
    out, pos, row_input = [], [0, 0, 0], [0, 1, 2]
    for e in range(n_episodes):
        row = e % 3
        x = f"x{row_input[row] % 3}"
        late = e >= n_episodes // 2  # the "trained" half explores: it avoids repeats
        if late:
            s = WIN_STRATS[pos[row] % 3]
        else:
            s = WIN_STRATS[int(rng.choice(3, p=WIN_LAWS[x]))]
        out.append((row, x, s))
        pos[row] += 1
        if pos[row] == WIN_K:
            pos[row], row_input[row] = 0, row_input[row] + 1
    return out


def _window_monitor(window: int | None, log_every: int, sinks: _Null) -> CoverageMonitor:
    from seffi.coverage.env_baselines import EnvBaselines

    laws = {x: {frozenset([s]): p for s, p in zip(WIN_STRATS, ps, strict=True)} for x, ps in WIN_LAWS.items()}
    baselines = EnvBaselines(
        WIN_STRATS,
        WIN_K,
        base_law=lambda x, valid_only=False: laws[x],
        references=lambda x: {s: frozenset([s]) for s in WIN_STRATS},
    )
    return CoverageMonitor(
        WIN_K, WIN_STRATS, baselines=baselines, sinks=sinks, window=window, log_every=log_every,
        log_curves_every=1000, n_boot=0,
    )  # fmt: skip


def _fed_window_monitor(
    window: int | None, log_every: int, stream: list[tuple[int, str, str]]
) -> tuple[CoverageMonitor, _Null]:
    """A window monitor fed every episode of ``stream``, checking for a log after each; and its sink."""
    sinks = _Null()
    monitor = _window_monitor(window, log_every, sinks)
    for row, x, s in stream:
        monitor.update_infos({"input_id": x, "strategy_matches": (s,), "valid": True}, True, env_offset=row)
        monitor.maybe_log(monitor.episodes)
    return monitor, sinks


def _hand_window(stream: list[tuple[int, str, str]], first: int, last: int) -> dict[str, float]:
    """C(k), AUC and gain over the runs whose first sample is episode ``first`` or later and whose
    K-th sample is episode ``last`` or earlier (1-based), by hand."""
    runs: dict[tuple[int, int], list[tuple[str, str]]] = {}
    open_run: dict[int, tuple[int, int]] = {}  # row -> (run, its first episode)
    done: list[tuple[int, int, list[tuple[str, str]]]] = []
    for e, (row, x, s) in enumerate(stream, start=1):
        r, began = open_run.setdefault(row, (len(runs), e))
        runs.setdefault((row, r), []).append((x, s))
        if len(runs[(row, r)]) == WIN_K:
            done.append((began, e, runs[(row, r)]))
            del open_run[row]
    per_input: dict[str, list[list[float]]] = {}
    for began, e, samples in done:
        if first <= began and e <= last:
            seen: set[str] = set()
            cov = []
            for _, s in samples:
                seen.add(s)
                cov.append(len(seen) / 3)
            per_input.setdefault(samples[0][0], []).append(cov)
    curve = np.mean([np.mean(c, axis=0) for c in per_input.values()], axis=0)
    auc = float(curve.mean())
    iid = np.mean(
        [np.mean([np.mean([1 - (1 - p) ** k for p in WIN_LAWS[x]]) for k in range(1, 5)]) for x in per_input]
    )
    oracle = np.mean([min(k, 3) / 3 for k in range(1, 5)])
    runs = sum(map(len, per_input.values()))
    return {"coverage": curve, "auc": auc, "gain": (auc - iid) / (oracle - iid), "runs": runs}


def test_streaming_logs_name_the_window_and_every_run_apart() -> None:
    L, W, n = 48, 96, 480
    stream = _window_stream(n)
    monitor, sinks = _fed_window_monitor(W, L, stream)
    steps = [step for step, _ in sinks.logged]
    assert steps == list(range(L, n + 1, L))
    for step, scalars in sinks.logged:
        # Logs at multiples of L and W = 2L: the window is exactly the runs that started and
        # completed in episodes (step - W, step]; the plain keys are every run completed so far.
        window, everything = _hand_window(stream, max(1, step - W + 1), step), _hand_window(stream, 1, step)
        for prefix, hand in (("seffi/window/", window), ("seffi/", everything)):
            for k in (1, 2, 4):
                assert scalars[f"{prefix}coverage/k={k}"] == pytest.approx(hand["coverage"][k - 1], abs=1e-12)
            assert scalars[f"{prefix}auc"] == pytest.approx(hand["auc"], abs=1e-12)
            assert scalars[f"{prefix}gain_vs_iid"] == pytest.approx(hand["gain"], abs=1e-12)
        assert scalars["seffi/window/episodes"] == min(step, W)
        assert scalars["seffi/window/runs"] == window["runs"]
        assert scalars["seffi/episodes"] == step  # counts stay lifetime
    # The window follows the policy: the last log sees only the exploring half; the plain keys
    # average both halves, as the final report and metrics() do.
    last = sinks.logged[-1][1]
    everything = _hand_window(stream, 1, n)
    assert last["seffi/window/gain_vs_iid"] > everything["gain"] + 0.2
    assert monitor.metrics() == last
    report = monitor.report()
    assert report.comparisons[0].policies[0].curves.auc == pytest.approx(last["seffi/auc"], abs=1e-12)
    assert report.comparisons[0].policies[0].gain.value == pytest.approx(last["seffi/gain_vs_iid"], abs=1e-9)


def test_window_none_logs_every_run_since_the_start() -> None:
    L, n = 48, 480
    stream = _window_stream(n)
    _, sinks = _fed_window_monitor(None, L, stream)
    for step, scalars in sinks.logged:
        hand = _hand_window(stream, 1, step)
        assert scalars["seffi/auc"] == pytest.approx(hand["auc"], abs=1e-12)
        assert not any(k.startswith("seffi/window/") for k in scalars)


def test_window_keys_equal_the_plain_keys_to_the_bit_while_the_window_holds_everything() -> None:
    L, W, n = 48, 96, 240
    stream = _window_stream(n)
    a, windowed = _fed_window_monitor(W, L, stream)
    for _, scalars in windowed.logged[:2]:
        for key, value in scalars.items():
            if key.startswith("seffi/window/") and key.split("/")[-1] not in ("runs", "episodes", "age"):
                assert value == scalars[key.replace("seffi/window/", "seffi/")], key
    comparison, scalars = a.snapshot()  # every run, with intervals; the window's point beside it
    np.testing.assert_allclose(comparison.policies[0].curves.coverage, _hand_window(stream, 1, n)["coverage"])
    hand = _hand_window(stream, n - W + 1, n)
    assert scalars["seffi/window/runs"] == hand["runs"]
    assert scalars["seffi/window/auc"] == pytest.approx(hand["auc"], abs=1e-12)


@pytest.mark.parametrize("log_every, flush_every", [(64, 97), (300, 41)])
def test_window_sums_kept_as_batches_come_and_go_equal_the_window_recomputed_from_its_runs(
    log_every: int, flush_every: int
) -> None:
    """A streaming log's point estimates, run, sample and valid counts equal those of its runs recomputed.

    Folds that do not line up with the logs: some batches hold several parts, and (300, 41) folds
    several batches between two reads of the window, each batch's runs judged at its own end.
    """
    ends = _ends(11, 3000, inputs=tuple(f"x{i}" for i in range(40)), envs=4)
    m = CoverageMonitor(5, STRATS, sinks=_Null(), n_boot=0, log_every=log_every, window=1024)
    m.flush_every = flush_every
    checked = 0
    for i in range(0, len(ends), 37):
        _feed(m, ends[i : i + 37])
        if m.maybe_log(i + 37) and _window_checked(m) is not None:
            checked += 1
    assert checked > 20 * 64 // log_every and m.recent.dropped


def _window_checked(m: CoverageMonitor) -> int | None:
    """Assert the monitor's window equals its runs recomputed; the inputs it holds (None: no window)."""
    win, *_ = m.recent.at(m.episodes, m.tracker)
    slots = m.recent.slots()
    if win is None or slots.size == 0:
        return None
    t = m.tracker
    _same(win.point(), t.point(slots=slots))
    assert (win.runs, win.samples) == (slots.size, int(t.runs.n[slots].sum()))
    assert win.valid == int(t.runs.n_valid[slots].sum())
    assert sorted(win.input_codes().tolist()) == np.unique(t.assigner.slot_input[slots]).tolist()
    return int(win.input_codes().size)


def test_window_of_inputs_passing_through_holds_rows_for_its_runs_only() -> None:
    """Inputs that come, complete runs and leave: each log's window equals its runs recomputed, and
    the window's sums hold rows for the inputs of its runs, not for every input it ever held."""
    ends, K, envs = [], 5, 4
    rng = np.random.default_rng(5)
    for run in range(600):  # env row run % envs runs input x<run // 8> (two runs per input and row)
        x = f"x{run // 8:03d}"
        for k in range(1, K + 1):
            ms = tuple(s for s in STRATS if rng.random() < 0.3)
            ends.append({"input_id": x, "strategy_matches": ms, "valid": bool(rng.random() < 0.7),
                         "env_index": run % envs, "sample_index": k, "run_index": run // envs})  # fmt: skip
    m = CoverageMonitor(K, STRATS, sinks=_Null(), n_boot=0, log_every=40, window=200)
    checked, most = 0, 0
    for i in range(0, len(ends), 20):
        _feed(m, ends[i : i + 20])
        if m.maybe_log(i + 20) and (held := _window_checked(m)) is not None:
            most = max(most, held)
            checked += 1
    assert checked > 50 and len(m.tracker.keys) == 75
    # 200 episodes hold at most 40 runs of 5 inputs each pass: rows for those, reused as inputs leave.
    assert m.recent.runs.n_rows <= most + 8 < 75


@pytest.mark.parametrize(
    ("n_inputs", "expected"), [(3, [10, 30, 50, 70, 90, 110, 130, 150]), (None, [10, 30, 70, 150])]
)
def test_snapshots_wait_for_k_episodes_per_input_of_the_last_one(n_inputs, expected) -> None:
    """A loop where every input gets one run of K = 2: with new inputs all the time, a snapshot over U
    inputs is followed by the next only K x U episodes later (hand: 10 -> 5 inputs, next at 30 -> 15,
    70 -> 35, 150); with 3 inputs every other log is one."""
    sinks = _Null()
    m = CoverageMonitor(2, STRATS, sinks=sinks, n_boot=0, log_every=10, log_curves_every=2, window=None)
    for e in range(160):
        run = e // 2
        x = f"x{run if n_inputs is None else run % n_inputs}"
        m.update_infos({"input_id": x, "strategy_matches": ("a",), "sample_index": e % 2 + 1}, True)
        m.maybe_log(e + 1)
    assert [step for step, _ in sinks.logged] == list(range(10, 161, 10))
    assert sinks.snapshots == expected


def test_logs_without_baselines_keep_nothing_per_input() -> None:
    """A loop over many inputs and no baselines: the logs' gain is absent and no per-input baseline
    AUC is asked for or kept beyond the first (the gain is undefined from that input on)."""
    m = CoverageMonitor(2, STRATS, sinks=_Null(), n_boot=0, log_every=10, window=None)
    for e in range(400):
        m.update_infos(
            {"input_id": f"x{e // 2}", "strategy_matches": ("a",), "sample_index": e % 2 + 1}, True
        )
        m.maybe_log(e + 1)
    assert m.n_logs == 40 and "seffi/gain_vs_iid" not in m.metrics()
    assert len(m.env_baselines._aucs) <= 1


def _same(a: dict, b: dict) -> None:
    """Two point-estimate dicts equal to the last digit (NaN equal to NaN)."""
    assert a.keys() == b.keys()
    for k in a:
        x, y = a[k], b[k]
        if isinstance(x, list) and x and isinstance(x[0], dict):
            assert json.dumps(x) == json.dumps(y), k
        else:
            np.testing.assert_array_equal(np.asarray(x, dtype=float), np.asarray(y, dtype=float), err_msg=k)


def test_runs_completed_one_by_one_sum_each_input_once_and_leave_exactly() -> None:
    """Runs completed over many updates (one input completing several) add up per input in the
    window's sums, equal those recomputed from the runs, and removing them leaves nothing."""
    from seffi.coverage.tracker import CompleteRuns

    rng = np.random.default_rng(3)
    t = CoverageTracker(STRATS, task="t", budget=2)
    for i in range(60):  # each update completes at most one run
        hits = {s for s in STRATS if rng.random() < 0.3}
        t.update(f"x{i % 5}", hits, valid=bool(rng.random() < 0.7), stream=i // 10)
    done = np.flatnonzero(t.runs.n[: t.assigner.n_slots] >= 2)
    assert t.n_done > 5 and np.array_equal(np.sort(t.done), done)
    win = CompleteRuns(2)
    for a in range(0, t.n_done, 4):  # in parts: one input's runs in several
        part = t.done[a : a + 4]
        win.add(t.runs, part, t.assigner.slot_input[part], t.m)
    _same(win.point(), t.point(slots=done))
    _same(win.point(), t.point())
    win.add(t.runs, t.done, t.assigner.slot_input[t.done], t.m, -1)
    assert (win.runs, win.samples, win.valid) == (0, 0, 0) and win.totals.keys.size == 0


# -- a window shorter than a run -------------------------------------------------------------------

DRIFT_STRATS = ("a", "b", "c", "d")
#: Each input's base law over single strategies (the env's exact iid baseline).
DRIFT_LAWS = {f"x{i}": np.roll([0.55, 0.25, 0.15, 0.05], i) for i in range(16)}
DRIFT_K = 4


class _DriftEnv(gym.Env):
    """A user env: one step is one sample of the input chosen at reset; the action is its strategy."""

    strategies = DRIFT_STRATS
    input_ids = tuple(DRIFT_LAWS)

    def __init__(self) -> None:
        self.observation_space = gym.spaces.Discrete(1)
        self.action_space = gym.spaces.Discrete(len(DRIFT_STRATS))
        self.x = "x0"

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.x = (options or {})["input_id"]
        return 0, {}

    def step(self, action: int):
        return 0, 0.0, True, False, {"input_id": self.x, "strategy_matches": (DRIFT_STRATS[action],)}

    def base_match_distribution(self, x: str, valid_only: bool = False) -> dict[frozenset[str], float]:
        return {frozenset([s]): float(p) for s, p in zip(DRIFT_STRATS, DRIFT_LAWS[x], strict=True)}

    def reference_match_sets(self, x: str) -> dict[str, frozenset[str]]:
        return {s: frozenset([s]) for s in DRIFT_STRATS}


def _hand_recent(runs: list[tuple[int, int, str, list[str]]], step: int, W: int, L: int) -> dict | None:
    """The window at ``step`` by hand: runs whose first sample came after episode ``step - W`` and
    whose last came by ``step``; C(k), AUC and gain over them, and the age of the oldest (its run's
    first sample, dated by the logging interval it came in). None: no such run."""
    held = [r for r in runs if r[0] > step - W and r[1] <= step]
    if not held:
        return None
    per_input: dict[str, list[list[float]]] = {}
    for _, _, x, strategies in held:
        per_input.setdefault(x, []).append([len(set(strategies[:k])) / 4 for k in range(1, DRIFT_K + 1)])
    curve = np.mean([np.mean(c, axis=0) for c in per_input.values()], axis=0)
    auc = float(curve.mean())
    ks = range(1, DRIFT_K + 1)
    iid = np.mean(
        [np.mean([np.mean([1 - (1 - p) ** k for p in DRIFT_LAWS[x]]) for k in ks]) for x in per_input]
    )
    oracle = np.mean([min(k, 4) / 4 for k in ks])
    age = step - min(L * ((first - 1) // L) for first, *_ in held)
    return {"auc": auc, "gain": (auc - iid) / (oracle - iid), "runs": len(held), "age": age}


@pytest.mark.parametrize("user", [False, True])
def test_a_run_longer_than_the_window_is_not_reported_as_recent(user: bool) -> None:
    """Two env rows draw one of 16 inputs per episode, so a run (an input's K samples in one row)
    spans about 128 episodes; the window is 64. The policy repeats "a" for the first half, then
    explores. The window holds only runs whose every sample is recent, and says how old its oldest
    sample is: a run dated by its last sample would carry the first half's samples into the second.
    The gain averages the baselines over the window's inputs, the env's or the user's."""
    from seffi.coverage import IidBaseline, OracleBaseline

    L, W, n = 32, 64, 1024
    envs = [_DriftEnv(), _DriftEnv()]
    given = {}
    if user:  # the env's laws and references again, as the user's own baselines
        laws = {x: envs[0].base_match_distribution(x) for x in DRIFT_LAWS}
        refs = {x: envs[0].reference_match_sets(x) for x in DRIFT_LAWS}
        given = {"iid": IidBaseline.from_match_distribution(laws), "oracle": OracleBaseline(refs)}
    monitor = CoverageMonitor.for_env(
        envs[0], DRIFT_K, sinks=_Null(), window=W, log_every=L, n_boot=0, **given
    )
    rng = np.random.default_rng(4)
    open_runs: dict[tuple[str, int], tuple[int, list[str]]] = {}
    runs: list[tuple[int, int, str, list[str]]] = []  # (first episode, last episode, input, strategies)
    checked = stale = 0
    for e in range(1, n + 1):
        row = e % 2
        x = f"x{rng.integers(16)}"
        envs[row].reset(options={"input_id": x})
        action = 0 if e <= n // 2 else int(rng.integers(4))
        *_, info = envs[row].step(action)
        monitor.update_infos(info, True, env_offset=row)
        first, strategies = open_runs.setdefault((x, row), (e, []))
        strategies.append(DRIFT_STRATS[action])
        if len(strategies) == DRIFT_K:
            runs.append((first, e, x, open_runs.pop((x, row))[1]))
        if not monitor.maybe_log(e):
            continue
        scalars, hand = monitor.metrics(), _hand_recent(runs, e, W, L)
        assert scalars["seffi/window/episodes"] == min(e, W)
        # Dated by the last sample, some logs' windows would hold runs begun before it.
        stale += any(last > e - W and first <= e - W for first, last, *_ in runs)
        if hand is None:
            assert scalars["seffi/window/runs"] == 0 and "seffi/window/age" not in scalars
            continue
        assert scalars["seffi/window/runs"] == hand["runs"]
        assert scalars["seffi/window/age"] == hand["age"] <= W
        assert scalars["seffi/window/auc"] == pytest.approx(hand["auc"], abs=1e-12)
        assert scalars["seffi/window/gain_vs_iid"] == pytest.approx(hand["gain"], abs=1e-12)
        checked += 1
    assert checked >= 20 and stale >= 20


def test_a_rollout_in_one_call_dates_its_runs_as_calls_of_one_log_interval_would() -> None:
    """An SB3-style call with a whole rollout (8,192 episodes, twice the window) gives the window the
    runs of its last 4,096 episodes, exactly as the same episodes fed 1,024 at a time: 512 runs of
    16 env rows x K = 8 one-step episodes, every run complete within one quarter of the window."""
    rows, K = 16, 8
    rng = np.random.default_rng(3)
    steps = [
        [{"input_id": f"x{(r + 16 * (s // K)) % 64}", "strategy_matches": (STRATS[rng.integers(4)],)}
         for r in range(rows)]
        for s in range(3 * 8192 // rows)
    ]  # fmt: skip
    logged = []
    for per_call in (8192, 1024):
        m = CoverageMonitor(K, STRATS, sinks=_Null(), n_boot=0, window=4096, log_every=1024)
        for at in range(0, len(steps), per_call // rows):
            m.update_infos(steps[at : at + per_call // rows], np.ones((per_call // rows, rows), bool))
            if (at + per_call // rows) % (8192 // rows) == 0:  # a log at each rollout's end
                m.log(m.episodes)
        logged.append({k: v for k, v in m.last_scalars.items() if k.startswith("seffi/window/")})
    assert logged[0] == logged[1] and logged[0]["seffi/window/runs"] == 512


def test_a_window_shorter_than_the_logging_interval_holds_its_runs() -> None:
    """``window=8`` with ``log_every=20``, one env row of K = 4 one-step runs: folds of 8 episodes date
    the runs, so the log at episode 20 holds the one run that started (16) and ended (20) in its last
    8 episodes, instead of an empty window."""
    m = CoverageMonitor(4, STRATS, sinks=_Null(), n_boot=0, window=8, log_every=20)
    for i in range(20):
        m.update_infos({"input_id": f"x{i // 4}", "strategy_matches": (STRATS[i % 3],)}, True)
        m.maybe_log(i + 1)
    assert m.last_scalars["seffi/window/runs"] == 1 and m.last_scalars["seffi/window/episodes"] == 8
    assert m.last_scalars["seffi/window/coverage/k=4"] == 3 / 4  # b, c, a, b: three of four strategies
