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
    assert resumed.skipped == 2 and resumed.assigner.open_runs()[0][3] == 5
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
    top = {p.name for p in state_io.STATE if "." not in p.name} | {"format", "inputs", "runs"}
    assert set(rec) == top
    assert set(rec["inputs"]) == {p.key for p in state_io.INPUT_FIELDS}
    # num_latents > 0: latent rows too; "beyond" is stored when a run has samples beyond the budget
    assert set(rec["runs"]) == {p.key for p in state_io.RUN_FIELDS} - {"beyond"}
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
