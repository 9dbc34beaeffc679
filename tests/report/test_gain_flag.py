"""Every place a gain is shown says whether it is fragile (room < 0.05 or held by < 25% of the inputs).

The user loop below feeds a monitor 16 inputs of which 3 hold all the room: on the other 13 a single
strategy is feasible and iid always finds it (their oracle and iid curves coincide). By hand, 3 equal
rooms of 16 are held by 3 inputs, under 25% of 16 = 4: the gain is fragile. With every input holding
the room, it is not.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from seffi.callbacks import CoverageMonitor
from seffi.coverage import Gain, IidBaseline, OracleBaseline
from seffi.coverage.summaries import gain_fragility
from seffi.report import Report, keys
from seffi.report.markdown import render_markdown
from tests.helpers import require
from tests.report import _fixtures as fx

K = 4
STRATEGIES = ("a", "b", "c")
ROOM_LAW = {frozenset({"a"}): 0.9, frozenset({"b"}): 0.08, frozenset({"c"}): 0.02}


def _monitor(tmp_path: Path, with_room: int) -> CoverageMonitor:
    """A monitor over 16 inputs, the first ``with_room`` of them with room, fed a user loop's runs."""
    ids = [f"x{i}" for i in range(16)]
    law = {x: ROOM_LAW if i < with_room else {frozenset({"a"}): 1.0} for i, x in enumerate(ids)}
    refs = {x: {s: {s} for s in STRATEGIES} if i < with_room else {"a": {"a"}} for i, x in enumerate(ids)}
    monitor = CoverageMonitor(
        K,
        STRATEGIES,
        iid=IidBaseline.from_match_distribution(law, strategies=STRATEGIES),
        oracle=OracleBaseline(refs, strategies=STRATEGIES),
        out_dir=tmp_path / "run",
        n_boot=0,
        log_every=1,
        wandb="disabled",
        plots=False,
    )
    for run in range(2):  # the user's loop: each env row runs one input for K samples
        for i, x in enumerate(ids):
            for s in ("a", "b", "c", "a") if i < with_room else ("a",) * K:
                monitor.update_infos(
                    {"input_id": x, "strategy_matches": (s,), "valid": True}, True, env_offset=run
                )
    return monitor


def test_streaming_logs_and_metrics_flag_a_gain_held_by_3_of_16_inputs(tmp_path: Path) -> None:
    """``seffi/gain_vs_iid_fragile`` is 1 next to every logged gain held by 3 of 16 inputs, 0 when all 16
    hold the room; metrics() and the final report's gain say the same."""
    for with_room, flag in ((3, 1.0), (16, 0.0)):
        monitor = _monitor(tmp_path / str(with_room), with_room)
        logged = monitor.log(1)
        assert logged is not None and keys.gain_key() in logged
        assert logged[keys.gain_fragile_key()] == flag
        assert monitor.metrics()[keys.gain_fragile_key()] == flag
        window = keys.gain_fragile_key("window")
        if keys.gain_key("window") in logged:  # the streaming window's gain carries its own flag
            assert logged[window] == flag
        comparison, scalars = monitor.snapshot()
        gain = comparison.policies[0].gain
        assert gain.fragile is bool(flag) and scalars[keys.gain_fragile_key()] == flag
        assert gain.n_inputs == 16 and gain.held_by == pytest.approx(with_room)
        assert keys.report_scalars(Report(comparisons=[comparison]))[keys.gain_fragile_key()] == flag


def _fragile_report() -> Report:
    """The fixture comparison with a fragile, unbounded gain (room 0.2 held by 2 of 16 inputs)."""
    comp = fx.comparison()
    note = gain_fragility(0.2, 2.0, 16)
    gain = Gain(value=0.4, room=0.2, held_by=2.0, n_inputs=16, reason=note)
    policies = [comp.policies[0].model_copy(update={"gain": gain})]
    return Report(comparisons=[comp.model_copy(update={"policies": policies})])


def test_report_md_marks_the_fragile_gain_and_says_why() -> None:
    md = render_markdown(_fragile_report())
    assert "0.400 (fragile)" in md
    assert "> **Warning:** fragile gain: the room is held by about 2.0 of 16 inputs" in md
    from seffi.coverage.summaries import UNBOUNDED_NOTE
    from seffi.report.markdown import _gain

    unbounded = Gain(value=0.4, room=0.2, held_by=2.0, n_inputs=16, reason=UNBOUNDED_NOTE).flagged()
    assert _gain(unbounded) == "0.400 [unbounded] (fragile)"
    assert unbounded.reason.startswith("fragile gain: ") and unbounded.reason.endswith(UNBOUNDED_NOTE)
    ok = Report(comparisons=[fx.comparison()])
    assert "(fragile)" not in render_markdown(ok)


def test_compare_table_marks_the_fragile_gain_and_lists_why(tmp_path: Path) -> None:
    from seffi.coverage.summaries import UNBOUNDED_NOTE
    from seffi.experiment.compare import compare_table, table_markdown

    rep = _fragile_report()
    rows = compare_table([rep, Report(comparisons=[fx.comparison()])], ["weak", "fine"])
    by_run = {r["run"]: r for r in rows}
    assert by_run["weak"]["fragile"] == gain_fragility(0.2, 2.0, 16) and by_run["fine"]["fragile"] is None
    md = table_markdown(rows)
    assert md.count("(fragile)") == 1 and "| weak |" in md
    assert f"weak / {by_run['weak']['policy']}: fragile gain: the room is held by about 2.0" in md
    comp = rep.comparisons[0]
    gain = Gain(value=0.4, room=0.2, held_by=16.0, n_inputs=16, reason=UNBOUNDED_NOTE)
    policies = [comp.policies[0].model_copy(update={"gain": gain})]
    wide = Report(comparisons=[comp.model_copy(update={"policies": policies})])
    assert "0.400 [unbounded] |" in table_markdown(compare_table([wide], ["w"]))


def test_bench_table_marks_fragile_pool_and_held_out_gains() -> None:
    require("transformers", "lm")  # the bench's result types live beside its language models
    from seffi.experiment.bench_plots import table_rows
    from seffi.experiment.bench_report import base_row, method_row
    from seffi.models.passk import EvalResult
    from seffi.models.surface import SURFACE_KEYS

    final = EvalResult(
        n=2, valid_at_k=np.array([0.9, 1.0]), coverage=np.array([0.5, 0.7]), valid_rate=0.9, solvable=1.0,
        per_prompt_coverage=np.array([[0.5, 0.7]]), prompt_ids=["a"],
    )  # fmt: skip
    surf = dict.fromkeys(SURFACE_KEYS, 0.5)
    pool = {"validator": {"value": -23.8, "lo": -292.8, "hi": 245.1, "fragile": True}}
    sc = {"seffi/eval/gain_vs_base": 0.2, "seffi/eval/gain_vs_base_lo": -0.1,
          "seffi/eval/gain_vs_base_hi": 0.4, "seffi/eval/gain_vs_base_fragile": 0.0,
          "seffi/eval/crossover_found": 0.0}  # fmt: skip
    row = method_row("m", "M", 1, 2, pool, final, sc, surf, base_valid_at_1=0.9, seconds=1.0)
    cells = table_rows({"rows": [row], "base": [base_row(1, 2, final, surf)]})[1]
    assert cells[2].endswith("(fragile)") and "23.8" in cells[2]
    assert not cells[7].endswith("(fragile)")
    sc["seffi/eval/gain_vs_base_fragile"] = 1.0
    row = method_row("m", "M", 1, 2, pool, final, sc, surf, base_valid_at_1=0.9, seconds=1.0)
    assert table_rows({"rows": [row], "base": [base_row(1, 2, final, surf)]})[1][7].endswith("(fragile)")


def test_plot_legend_and_run_summary_mark_the_fragile_gain() -> None:
    from seffi.experiment.summary import summary_rows
    from seffi.report.plots import _gain_text

    rep = _fragile_report()
    assert _gain_text(rep.comparisons[0].policies[0]) == ", gain 0.40 (fragile)"
    assert summary_rows(rep)[0][3] == "0.400 (fragile)"
    fine = Report(comparisons=[fx.comparison()])
    assert "fragile" not in _gain_text(fine.comparisons[0].policies[0])
    assert "fragile" not in summary_rows(fine)[0][3]
