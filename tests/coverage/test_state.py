"""The tracker's declared state: bounds checked before anything is allocated, format-2
states load with their numbers, and every part of the declaration is what ``state_dict`` holds.

References: format-2 states and the numbers computed from them (``tests/coverage/data/states_v2.json``,
written by ``data/make_states_v2.py`` with seffi at commit 5c8a181);
hand-edited copies of them for the corruptions.
"""

from __future__ import annotations

import copy
import json
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from seffi.coverage import CoverageTracker
from seffi.coverage import state as states
from seffi.episodes import EpisodeBatch
from seffi.errors import SeffiError

DATA = json.loads((Path(__file__).parent / "data" / "states_v2.json").read_text())
STRATS = ("a", "b", "c", "d", "e")


class _Null:
    def log(self, *a, **k): ...
    def log_snapshot(self, *a, **k): ...
    def finish(self, *a, **k): ...


def _one_line_refusal(state, match: str) -> str:
    """Load ``state``: a one-line "corrupted" ValueError matching ``match``, and under 16 MB allocated."""
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match="corrupted CoverageTracker state") as info:
            CoverageTracker.from_state_dict(state)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    text = str(info.value)
    assert "\n" not in text and match in text, text
    assert peak < 16 * 2**20, peak
    return text


def _edited(name: str, edit) -> dict:
    s = copy.deepcopy(DATA[name]["state"])
    edit(s)
    return s


def test_format_2_states_load_write_back_identically_and_give_their_curves() -> None:
    """Format-2 states load, write back identically and give the curves they were written with."""
    for name, K in (("recorded", 4), ("updated", 5)):
        old = DATA[name]
        t = CoverageTracker.from_state_dict(old["state"])
        assert t.state_dict() == old["state"], name
        c = t.curves(K, n_boot=0)
        assert c.coverage.tolist() == old["coverage"] and c.auc == old["auc"], name
        assert c.valid_coverage.tolist() == old["valid_coverage"], name
        assert c.full_coverage.tolist() == old["full_coverage"], name
        assert (c.n_runs, c.n_inputs) == (old["n_runs"], old["n_inputs"]), name
        assert json.loads(json.dumps(t.barcode(K))) == old["barcode"], name
    rec = CoverageTracker.from_state_dict(DATA["recorded"]["state"])
    assert rec.latent_coverage().tolist() == DATA["recorded"]["latent_coverage"]
    assert rec.point()["auc"] == pytest.approx(DATA["recorded"]["point_auc"], abs=1e-15)
    from seffi.callbacks import CoverageMonitor
    from tests.helpers import rows_batch

    mon = DATA["monitor"]
    m = CoverageMonitor(4, STRATS, sinks=_Null(), n_boot=0).load_state_dict(mon["state"])
    keys = ("input_id", "strategy_matches", "valid", "env_index")
    m.update(rows_batch(m.coder, [dict(zip(keys, row, strict=True)) for row in mon["rest"]]))
    c = m.curves()
    assert c.coverage.tolist() == mon["coverage"] and c.valid_coverage.tolist() == mon["valid_coverage"]
    assert (m.samples, m.episodes) == (mon["samples"], mon["episodes"])


@pytest.mark.parametrize(
    ("case", "edit", "match"),
    [
        (
            "M_x = 10^15",
            lambda s: s["inputs"]["m"].__setitem__(0, 10**15),
            "inputs.m must hold ints in [1, 6)",
        ),
        ("num_strategies=1 with 5 declared columns", lambda s: s.update(num_strategies=1), "5 strategies"),
        ("samples = 2**52", lambda s: s.update(samples=2**52), "must be the runs' 480 samples"),
        (
            "has_latent without a latent code in any run",
            lambda s: (s.update(has_latent=True), s["runs"].update(latent_first_hit=["---"] * 132)),
            "has_latent",
        ),
        ("budget = 10^12", lambda s: s.update(budget=10**12), "budget must be an int in [1, 65537)"),
        (
            "num_latents = 10^12 without latent rows",
            lambda s: (s.update(num_latents=10**12), s["runs"].pop("latent_first_hit")),
            "num_latents must be an int in [0, 65537)",
        ),
    ],
)
def test_hand_edited_state_refused_in_one_line_before_allocating(case, edit, match) -> None:
    """Each edit is refused in one "corrupted" line, within 16 MB (unchecked, M_x = 10^15 gives coverage
    3.4e-15 and budget or num_latents = 10^12 a MemoryError allocating PiB)."""
    _one_line_refusal(_edited("recorded", edit), match)


def test_free_form_input_above_the_declared_count_refused() -> None:
    """num_strategies=1 (free-form ids) with an input whose M_x is 4 (it matched 4 columns): refused,
    both from a stored state and through ``update``."""
    t = CoverageTracker(1)
    t.update("x", {"a"})
    s = t.state_dict()
    s["columns"], s["inputs"]["m"] = ["a", "b", "c", "d"], [4]
    s["runs"]["first_hit"], s["runs"]["first_valid_hit"] = ["0000"], ["0000"]
    _one_line_refusal(s, "inputs.m must hold ints in [1, 2)")
    with pytest.raises(ValueError, match=r"num_strategies must be in \[1, 1\]"):
        t.update("y", {"b"}, num_strategies=4)


def test_corrupted_monitor_state_is_one_seffi_error_line() -> None:
    """Through the monitor: the tracker's refusal becomes one SeffiError line, nothing allocated."""
    from seffi.callbacks import CoverageMonitor

    state = copy.deepcopy(DATA["monitor"]["state"])
    state["tracker"]["budget"] = 10**12
    m = CoverageMonitor(4, STRATS, sinks=_Null(), n_boot=0)
    with pytest.raises(SeffiError) as info:
        m.load_state_dict(state)
    assert "\n" not in str(info.value) and "corrupted" in str(info.value)
    state["tracker"]["budget"] = 4
    state["tracker"]["samples"] += 1
    with pytest.raises(SeffiError, match="must be the runs'"):
        m.load_state_dict(state)


def test_text_is_the_stored_state_read_a_few_cells_at_a_time(monkeypatch) -> None:
    """`state.text` of a tracker or a checked state, its tables read 5 cells at a time, is the stored
    JSON: the format-2 references as written, and packed, unpacked, beyond and non-ASCII parts."""
    monkeypatch.setattr(states, "_CELLS", 5)
    compact = lambda state: json.dumps(state, sort_keys=True, separators=(",", ":")) + "\n"  # noqa: E731
    for name in ("recorded", "updated"):
        stored = DATA[name]["state"]
        t = CoverageTracker.from_state_dict(stored)
        assert "".join(states.text(t)) == "".join(states.text(states.check(stored))) == compact(stored), name
    t = CoverageTracker(("a", "b"), budget=40)
    for i in range(42):  # a first hit at sample 36: no base-36 character, the rows stay ints
        t.update("\u00e9\u2603", ["a"] if i == 36 else [], valid=i > 0)
    t.update("z", ["b"])
    text = "".join(states.text(t))
    assert text == compact(t.state_dict())
    assert '"input_id":["z","\\u00e9\\u2603"]' in text and '"first_hit":[[-1,0],[36,-1]]' in text
    assert '"beyond":[0,2]' in text and '"first_valid_hit":[[-1,0],[36,-1]]' in text
    assert CoverageTracker.from_state_dict(json.loads(text)).state_dict() == t.state_dict()


def test_a_run_recorded_past_its_budget_still_resumes() -> None:
    """A run whose env kept its run index past K is open with more samples than it holds (the rest
    were skipped): such states load, and the resumed tracker goes on as the uninterrupted one."""
    K = 3

    def batch(t: CoverageTracker, ri: int, n: int, start: int) -> None:
        ids = np.array(["x"] * n, dtype=object)
        hits = np.zeros((n, 2), dtype=bool)
        hits[np.arange(n), (start + np.arange(n)) % 2] = True
        index = {"sample_index": np.arange(start, start + n), "run_index": [ri] * n}
        t.record(EpisodeBatch.of(("a", "b"), ids, hits, **index))

    whole, first = CoverageTracker(("a", "b"), budget=K), CoverageTracker(("a", "b"), budget=K)
    for t in (whole, first):
        batch(t, 0, 5, 0)  # two samples past K, skipped
    resumed = CoverageTracker.from_state_dict(json.loads(json.dumps(first.state_dict())))
    assert resumed.skipped == 2 and resumed.assigner.o_cnt[resumed.assigner.open_runs()[0]].tolist() == [5]
    for t in (whole, resumed):
        batch(t, 0, 1, 5)  # the same run: skipped too
        batch(t, 1, 3, 0)  # the next run
    assert resumed.state_dict() == whole.state_dict()
    assert resumed.skipped == 3 and resumed.complete_runs() == 2


def test_every_declared_part_is_what_the_state_holds() -> None:
    """The declaration is the state: its settings, tables, structured parts and counters are exactly
    the stored keys; a fresh tracker holds each part's declared empty value; each declared int bound
    refuses the first value past it, naming the part."""
    from seffi.coverage import state as state_io

    rec = DATA["recorded"]["state"]
    top = {p.name for p in state_io.STATE if "." not in p.name} | {
        "format",
        "inputs",
        "runs",
        "open_runs",
        "barcode",
    }
    assert set(rec) == top
    assert set(rec["inputs"]) == {p.key for p in state_io.INPUT_FIELDS}
    # num_latents > 0: latent rows too; "beyond" is stored when a run has samples beyond the budget
    assert set(rec["runs"]) == {p.key for p in state_io.RUN_FIELDS} - {"beyond"}
    assert set(rec["open_runs"][0]) == {p.key for p in state_io.OPEN_FIELDS}
    assert set(rec["barcode"][0]) == {p.key for p in state_io.BARCODE_FIELDS}
    t = CoverageTracker(STRATS, budget=4)
    for p in state_io.COUNTERS:
        assert getattr(t, p.name) == p.fill
    for p in state_io.SETTINGS:
        if p.kind != "int" or callable(p.hi) or p.hi >= 2**53:
            continue
        _one_line_refusal(_edited("recorded", lambda s, p=p: s.update({p.name: p.hi})), p.name)


def test_merge_keeps_the_barcode_bounds_of_the_tracker_merged_into() -> None:
    """Barcode bounds follow the merge rule "keep": a monitor keeping 2 rows can merge a state that
    kept a row per input (the previous monitor's 2**31): the 2 smallest inputs keep theirs."""
    big = CoverageTracker(STRATS, barcode_rows=2**31, barcode_cols=4)
    small = CoverageTracker(STRATS, barcode_rows=2, barcode_cols=2)
    for i, x in enumerate(("x3", "x1", "x2")):
        big.update(x, {STRATS[i]}, stream=0)
        big.update(x, {STRATS[i + 1]}, stream=0)
    small.merge(big)
    bc = small.barcode(4)
    assert bc["rows"] == ["x1/0", "x2/0"] and bc["first_strategy"] == [[1, 2], [2, 3]]
    loaded = CoverageTracker.from_state_dict(big.state_dict(), barcode_rows=1)
    assert loaded.barcode_rows == 1 and loaded.barcode(4)["rows"] == ["x1/0"]


def test_skipped_is_tied_to_the_runs_samples_beyond_the_budget() -> None:
    """``skipped`` is the sum of the runs' ``beyond`` counts (a closed run keeps its own): a state
    claiming more (2^52, which a monitor would log as 4.5e15 episodes) is refused, so is a beyond
    count on a run short of the budget or an open run whose count is not n + beyond."""
    K = 2

    def batch(t: CoverageTracker, ri: int, n: int) -> None:
        hits = np.eye(2, dtype=bool)[np.arange(n) % 2]
        t.record(EpisodeBatch.of(("a", "b"), ["x"] * n, hits, sample_index=np.arange(n), run_index=[ri] * n))

    t = CoverageTracker(("a", "b"), budget=K)
    batch(t, 0, 5)  # run 0: 3 samples past K
    batch(t, 1, 4)  # run 0 closes; run 1 (open): 2 past K
    state = json.loads(json.dumps(t.state_dict()))
    assert state["runs"]["beyond"] == [3, 2] and state["skipped"] == 5 == t.skipped
    assert state["open_runs"][0]["count"] == 4
    assert CoverageTracker.from_state_dict(state).state_dict() == state

    def forged(edit) -> dict:
        s = copy.deepcopy(state)
        edit(s)
        return s

    huge = forged(lambda s: s.update(skipped=2**52))
    _one_line_refusal(huge, "skipped=4503599627370496 must be the runs' 5")
    _one_line_refusal(forged(lambda s: s["runs"].update(beyond=[3, 3])), "skipped=5 must be the runs' 6")
    short = forged(lambda s: s.update(budget=3))  # both runs now short of the budget
    _one_line_refusal(short, "samples beyond the budget but fewer than budget samples")
    _one_line_refusal(forged(lambda s: s["open_runs"][0].update(count=5)), "count = n + beyond")
    # A state stored without the column (before it existed): the open runs' excess is known, a
    # closed run's is not, so a skipped count beyond the open runs' is refused.
    old = forged(lambda s: (s["runs"].pop("beyond"), s.update(skipped=2)))
    assert CoverageTracker.from_state_dict(old).state_dict()["runs"]["beyond"] == [0, 2]
    _one_line_refusal(forged(lambda s: s["runs"].pop("beyond")), "skipped=5 must be the runs' 2")


def test_a_monitor_states_episodes_are_its_samples_and_skipped_ones(tmp_path) -> None:
    """A monitor state's ``episodes`` is tied to its tracker: every episode is a sample or one past
    its run's budget, so a forged count (which the monitor would log as seffi/episodes) is refused."""
    from seffi.callbacks import CoverageMonitor

    def monitor(name: str) -> CoverageMonitor:
        return CoverageMonitor(2, ["a", "b"], out_dir=tmp_path / name, wandb="disabled", plots=False)

    m = monitor("one")
    for k in range(5):  # one run of 5 samples under K = 2: 3 beyond the budget
        m.update_infos({"input_id": "x", "strategy_matches": ("a",), "sample_index": k, "run_index": 0}, True)
    state = json.loads(json.dumps(m.state_dict()))
    assert state["episodes"] == 5 and state["tracker"]["skipped"] == 3
    assert monitor("two").load_state_dict(state).episodes == 5
    with pytest.raises(SeffiError, match="episodes=4503599627370496 must be the tracker's 2 samples and 3"):
        monitor("three").load_state_dict({**state, "episodes": 2**52})


LOADED = json.loads((Path(__file__).parent / "data" / "states_loaded.json").read_text())


@pytest.mark.parametrize("name", sorted(LOADED))
def test_older_stored_states_load_to_the_tracker_they_always_loaded_to(name) -> None:
    """Each older stored state (format-1 tracker and monitor, format 2 without ``runs.beyond``, format
    2 with a complete or a partial metric) loads to the state seffi at commit 0f92f2e loaded it to
    (``data/states_loaded.json``, by ``data/make_states_loaded.py``), which writes back identically."""
    from seffi.callbacks import CoverageMonitor

    entry = LOADED[name]
    if name == "monitor_v1":
        m = CoverageMonitor(5, ("a", "b", "c", "d"), sinks=_Null(), n_boot=0)
        assert m.load_state_dict(entry["state"]).state_dict() == entry["loaded"]
        assert m.load_state_dict(entry["loaded"]).state_dict() == entry["loaded"]
        return
    assert CoverageTracker.from_state_dict(entry["state"]).state_dict() == entry["loaded"]
    assert CoverageTracker.from_state_dict(entry["loaded"]).state_dict() == entry["loaded"]


def test_a_free_form_tracker_before_its_first_strategy_round_trips() -> None:
    """Free-form strategies, samples that matched none yet: the first-hit rows and the metric's
    per-strategy rows have no columns, and the state loads back to itself and its curves."""
    t = CoverageTracker(None, budget=2)
    for x in ("x", "x", "y"):
        t.update(x, set(), num_strategies=3)
    state = json.loads(json.dumps(t.state_dict()))
    assert state["runs"]["first_hit"] == ["", ""] and state["metrics"]["strategy_entropy"]["counts"] == [
        [],
        [],
    ]
    back = CoverageTracker.from_state_dict(state)
    assert back.state_dict() == state
    np.testing.assert_array_equal(back.curves(2, n_boot=0).coverage, [0.0, 0.0])


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        (lambda s: s.update(strategies=3), "strategies must be a list of str or null"),
        (lambda s: s.update(task=1), "task must be a str"),
        (lambda s: s.update(has_latent=1), "has_latent must be a bool"),
        (lambda s: s.update(barcode_rows=-1), "barcode_rows must be an int in [0, 2147483649), got -1"),
        (lambda s: s.update(budget=True), "budget must be an int in [1, 65537), got True"),
        (lambda s: s.update(num_strategies=None), "num_strategies=None but 5 strategies are declared"),
        (lambda s: s.update(columns=["a", "a", "c", "d", "e"]), "at most 1048576 unique strategy ids"),
        (lambda s: s.update(columns=["b", "a", "c", "d", "e"]), "columns must be the declared strategies"),
        (lambda s: s["inputs"]["task"].pop(), "inputs.task must be a list of 9 strings"),
        (lambda s: s["inputs"]["input_id"].__setitem__(0, 0), "inputs.input_id must be a list of 9 strings"),
        (lambda s: s["runs"]["n"].__setitem__(0, 4.0), "runs.n must hold ints"),
        (lambda s: s["runs"].update(stream="0"), "runs.stream must be"),
        (lambda s: s["runs"]["first_hit"].pop(), "runs.first_hit must be 132 rows of 5 cells"),
        (lambda s: s["runs"]["first_hit"].__setitem__(0, "0!000"), "runs.first_hit must hold ints in [-1, "),
        (lambda s: s["runs"]["first_hit"].__setitem__(0, "0é000"), "'ascii' codec can't encode"),
        (lambda s: s["runs"]["first_valid_hit"].__setitem__(0, [0, 1, True, 0, 0]), "must hold ints"),
        (lambda s: s.update(num_latents=0, has_latent=False), "latent_first_hit is present but its declar"),
        (lambda s: s.update(open_runs={}), "open_runs must be a list"),
        (lambda s: s["open_runs"][0].update(run=10**6), "open_runs.run must hold ints in [0, 132)"),
        (lambda s: s["barcode"][0].update(cells=[9]), "barcode.cells must hold ints in [-1, 5)"),
        (lambda s: s["barcode"][0].update(cells=5), "barcode.cells must be a list of ints in each of 3 rows"),
        (lambda s: s["barcode"][0].pop("new"), "KeyError: 'new'"),
        (lambda s: s.update(metrics=[]), "metrics must be an object"),
        (
            lambda s: s.update(metrics={"strategy_entropy": {"partial": 1}}),
            "strategy_entropy must be an object",
        ),
        (
            lambda s: s.update(metrics={"strategy_entropy": {"counts": [[-1] * 5] * 9}}),
            "metrics.strategy_entropy.counts must hold ints in [0, ",
        ),
        (lambda s: s["inputs"]["input_id"].reverse(), "inputs must be unique and sorted"),
        (lambda s: s["runs"]["stream"].__setitem__(1, s["runs"]["stream"][0]), "unique per (input, stream)"),
        (lambda s: s["runs"]["n_valid"].__setitem__(0, 5), "inconsistent n / n_valid / first_valid"),
        (lambda s: s["runs"]["first_hit"].__setitem__(14, "1----"), "first hits outside their samples"),
        (lambda s: s["inputs"]["m"].__setitem__(0, 1), "more distinct strategies than its input's M_x"),
        (lambda s: s["runs"]["latent_first_hit"].__setitem__(14, "1--"), "latent first hits outside"),
        (
            lambda s: s["open_runs"].append(dict(s["open_runs"][0])),
            "two open runs share an (input, env_index)",
        ),
        (lambda s: s.update(barcode_rows=1), "3 barcode rows but barcode_rows=1"),
        (lambda s: s["barcode"][0].update(new=[1]), "cells and new flags of one length"),
        (lambda s: s["barcode"][1].update(input=0), "barcode rows must be one per input"),
    ],
)
def test_each_refusal_class_is_one_line(edit, match) -> None:
    """Every kind of check (a setting, a table column, packed rows, a record field, a metric, each rule
    tying the parts together) refuses its own edit of a good state in one line naming the problem."""
    _one_line_refusal(_edited("recorded", edit), match)


def test_refusals_outside_the_part_checks() -> None:
    """Another format, a corrupted format-1 state, the cap on per-input sums, and a merge whose
    inputs disagree on M_x: each one ValueError line."""
    with pytest.raises(ValueError, match=r"^not a seffi CoverageTracker state"):
        CoverageTracker.from_state_dict({"format": "nope"})
    v1 = copy.deepcopy(LOADED["tracker_v1"]["state"])
    v1["runs"][0]["m"] = 3  # its input's other runs say 4
    with pytest.raises(ValueError, match=r"version 1.*inconsistent M_x"):
        CoverageTracker.from_state_dict(v1)
    v1 = copy.deepcopy(LOADED["tracker_v1"]["state"])
    del v1["runs"][0]["n"]
    with pytest.raises(ValueError, match=r"corrupted CoverageTracker state \(version 1\): KeyError: 'n'"):
        CoverageTracker.from_state_dict(v1)
    U, K = 2**28 // 2**16 + 1, 2**16  # one complete run per input: U * K per-input sums
    big = CoverageTracker(("a",), budget=K).state_dict()
    big["inputs"] = {"task": [""] * U, "input_id": [f"x{i:05d}" for i in range(U)], "m": [1] * U}
    big["inputs"]["next_stream"] = [1] * U
    big["runs"] = {"input": list(range(U)), "stream": [0] * U, "first_hit": ["0"] * U}
    big["runs"] |= {"first_valid_hit": ["0"] * U, "n": [K] * U, "n_valid": [K] * U, "first_valid": [0] * U}
    big.update(samples=U * K, valid=U * K)
    big.pop("metrics", None)
    _one_line_refusal(big, f"exceed the cap of {2**28} per-input sums")
    a, b = CoverageTracker(None), CoverageTracker(None)
    a.update("x", {"p"}, num_strategies=2)
    b.update("x", {"q"}, num_strategies=3, stream=1)
    with pytest.raises(ValueError, match=r"^cannot merge: input 'x' has M_x 2 vs 3$"):
        a.merge(b)


def _fed(calls: list, **kwargs) -> CoverageTracker:
    t = CoverageTracker(None, budget=3, **kwargs)
    for x, matched, valid, stream in calls:
        t.update(x, matched, valid=valid, stream=stream, num_strategies=6)
    return t


def test_merged_shards_are_one_tracker_fed_every_episode() -> None:
    """Shards with their own streams, free-form strategies first seen in different orders, runs past
    the budget and the per-input metric: merging them, in any order, gives the state of one tracker
    fed the same episodes in that order, and so the same curves."""
    rng = np.random.default_rng(7)
    ids = "pqrstu"
    calls = []
    for s in range(3):  # stream s: shard s
        for _ in range(40):
            matched = set(rng.choice(list(ids), rng.integers(0, 3), replace=False))
            calls.append((f"x{rng.integers(5)}", matched, bool(rng.random() < 0.6), s))
    shards = [[c for c in calls if c[3] == s] for s in range(3)]
    for order in ((0, 1, 2), (2, 0, 1), (1, 2, 0)):
        merged = _fed(shards[order[0]])
        merged.merge(_fed(shards[order[1]]).merge(_fed(shards[order[2]])))
        whole = _fed([c for s in order for c in shards[s]])
        assert merged.state_dict() == whole.state_dict()
        assert merged.skipped == whole.skipped > 0 and merged.columns == whole.columns
        np.testing.assert_array_equal(merged.curves(3, n_boot=0).coverage, whole.curves(3, n_boot=0).coverage)
        got, want = (
            merged.metric_estimates()["strategy_entropy"],
            whole.metric_estimates()["strategy_entropy"],
        )
        got_d, want_d = got.model_dump(), want.model_dump()
        assert got_d.keys() == want_d.keys()
        for key, value in want_d.items():  # None (an interval not computed) must match None
            assert got_d[key] == (value if value is None else pytest.approx(value, rel=1e-12)), key
