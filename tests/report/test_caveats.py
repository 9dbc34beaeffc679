"""Meaningless numbers are flagged where they are shown."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from seffi.report import Report
from seffi.report import caveats as C
from seffi.report.markdown import render_markdown
from seffi.report.sinks import closing_lines
from tests.report import _fixtures as fx


def _hanoi_like() -> Report:
    """iid AUC 0.993 vs oracle 1.000, like the README's RLlib snippet on Hanoi."""
    comp = fx.comparison()
    iid = comp.iid.model_copy(update={"auc": 0.993})
    oracle = comp.oracle.model_copy(update={"auc": 1.0})
    return Report(comparisons=[comp.model_copy(update={"iid": iid, "oracle": oracle})])


def test_gain_fragility_rule() -> None:
    """The rule is one pure function of the coverage layer: room < 0.05 or held by < 25% of inputs."""
    from seffi.coverage.summaries import (
        GAIN_HELD_SHARE,
        GAIN_ROOM_THRESHOLD,
        Gain,
        gain_fragility,
        inputs_holding,
    )

    assert (GAIN_ROOM_THRESHOLD, GAIN_HELD_SHARE) == (0.05, 0.25)
    note = gain_fragility(0.007, None, None)
    assert note is not None and "0.007 is below 0.05" in note
    assert gain_fragility(0.124, 16.0, 16) is None  # seffi run's sort_swaps: room 0.124
    assert gain_fragility(None, None, 16) is None
    # Room held by 3 of 16 inputs equally: 3 inputs hold it, under 25% of 16 = 4.
    held = inputs_holding([0.2, 0.2, 0.2] + [0.0] * 13)
    assert held == pytest.approx(3.0)
    assert "held by about 3.0 of 16 inputs" in gain_fragility(0.2, held, 16)
    assert gain_fragility(0.2, 4.0, 16) is None  # exactly 25%: not flagged
    assert inputs_holding([0.0, -0.1]) is None  # no input has room
    # A gain carries the flag; an undefined one is never fragile; report.json keeps the fields.
    g = Gain(value=0.5, lo=0.1, hi=0.9, room=0.2, held_by=held, n_inputs=16)
    assert g.fragile and g.fragility == gain_fragility(0.2, held, 16)
    assert not Gain(reason="no room", room=0.0).fragile
    assert Gain.model_validate(g.to_dict()) == g
    # A gain of an earlier report.json (no room) is judged by the comparison's AUCs.
    assert C.gain_caveat(Gain(value=0.5), 0.993, 1.0) == gain_fragility(0.007, None, None)
    assert C.gain_caveat(Gain(value=0.5), 0.783, 0.907) is None


def test_gain_warning_in_report_md_console_and_wandb_summary(tmp_path: Path) -> None:
    """The warning appears in report.md, the closing console lines and run.summary."""
    rep = _hanoi_like()
    md = render_markdown(rep)
    assert md.count("> **Warning:** fragile gain: the room") == 1
    lines = closing_lines(None, report=rep)
    assert lines and lines[0].startswith("warning (hanoi): fragile gain: the room")
    assert list(C.summary_notes(rep)) == ["seffi/caveats"]
    # Nothing when the room is fine (the fixture's own AUCs differ by > 0.05).
    ok = Report(comparisons=[fx.comparison()])
    assert "Warning" not in render_markdown(ok) and closing_lines(None, report=ok) == []
    # The closing lines read report.json from the run folder when the caller passes no report.
    from seffi.report import write_report

    write_report(tmp_path, rep, plots=False)
    assert closing_lines(tmp_path)[0].startswith("warning (hanoi)")


def test_infeasible_strategies_are_named() -> None:
    """coin_sum-like oracle C(16) = 0.9625 < 1 names 3.85 feasible of 4 and F(16)."""
    note = C.infeasible_caveat(0.9625, 4, 16, 0.938)
    assert note == (
        "4 strategies are declared per input but only 3.85 are feasible on average: the oracle reaches "
        "C(16) = 0.963, F(16) = 0.938; coverage counts shares of all 4 declared strategies"
    )
    assert C.infeasible_caveat(1.0, 4, 16, 1.0) is None
    assert C.infeasible_caveat(0.5, 4, 2) is None  # K < M: the oracle cannot reach 1 anyway
    comp = fx.comparison()
    short = np.array(fx.ORACLE) * 0.96
    oracle = comp.oracle.model_copy(update={"coverage": short.tolist()})
    notes = C.comparison_caveats(comp.model_copy(update={"oracle": oracle}))
    assert len(notes) == 1 and "only 4.80 are feasible" in notes[0]


def test_wandb_summary_carries_the_caveat() -> None:
    """WandbSink.finish puts ``seffi/caveats`` next to the gain in run.summary."""
    from seffi.report import SafeWandbRun
    from seffi.report.sinks import WandbSink
    from tests.report.test_wandb_run import FakeRun

    run = FakeRun()
    sink = WandbSink(SafeWandbRun(run=run), log_images=False)
    sink.run.log_artifact = lambda *a, **k: None  # no artifact store behind the fake run
    sink.finish(_hanoi_like())
    assert run.summary["seffi/caveats"].startswith("fragile gain: the room")
    assert any("gain" in k for k in run.summary if k != "seffi/caveats")  # next to the final numbers
