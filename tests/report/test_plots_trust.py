"""Plots that cannot mislead: each test inspects the drawn matplotlib artists."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from matplotlib.collections import PolyCollection
from matplotlib.colors import to_rgba
from matplotlib.text import Text

from seffi.errors import SeffiError
from seffi.report import Comparison, CurveSet, Gain, PolicyResult, Report
from seffi.report import plots as P
from tests.report import _fixtures as fx


def _texts(fig) -> list[str]:
    out = [t.get_text() for t in fig.texts]
    for ax in fig.axes:
        out += [t.get_text() for t in ax.texts] + [ax.get_title()]
    if fig._suptitle is not None:
        out.append(fig._suptitle.get_text())
    return out


def _bands(ax) -> list[PolyCollection]:
    return [c for c in ax.collections if isinstance(c, PolyCollection)]


def _with_policy(comp: Comparison, cov: np.ndarray, label: str = "learned") -> Comparison:
    pol = PolicyResult(curves=fx.curve_set(label, "policy", cov), gain=Gain(value=0.5, lo=0.4, hi=0.6))
    return comp.model_copy(update={"policies": [pol]})


def test_oracle_note_when_a_policy_is_above_the_oracle() -> None:
    """A "learned" policy above the oracle at k = 1 carries a note; none when it stays below."""
    comp = fx.comparison()
    above = fx.POLICY.copy()
    above[0] = min(1.0, fx.ORACLE[0] + 0.1)  # k = 1: above the oracle
    fig = P.plot_coverage(_with_policy(comp, above))
    notes = [t for t in _texts(fig) if "not a pointwise upper bound" in t]
    assert len(notes) == 1 and "$k$ = 1" in notes[0]
    assert P.oracle_exceeded(_with_policy(comp, above)) == [1]
    below = P.plot_coverage(comp)  # the fixture's policy is below the oracle everywhere
    assert not any("upper bound" in t for t in _texts(below))


def test_box_medians_take_their_series_colour() -> None:
    """Each time-to-coverage box median has its own series colour (not all orange)."""
    fig = P.plot_time_to_coverage(fx.comparison(n_policies=2))
    box_ax = fig.axes[-1]
    patches = [p for p in box_ax.patches if p.get_facecolor()[3] > 0 and p.get_gid() != "censored"]
    medians = [ln for ln in box_ax.lines if len(ln.get_xdata()) == 2 and ln.get_linewidth() > 2.0]
    assert len(medians) == len(patches) >= 4
    for patch, median in zip(patches, medians, strict=True):
        assert to_rgba(median.get_color())[:3] == pytest.approx(patch.get_facecolor()[:3])
    assert len({to_rgba(m.get_color()) for m in medians}) >= 3  # learned, learned1, iid, oracle differ


def test_ci_note_only_when_something_is_shaded() -> None:
    """No "shaded: 95% CI" legend entry when no band is drawn, and "1 input" not "1 inputs"."""
    comp = fx.comparison()
    bare = comp.model_copy(
        update={
            "policies": [],
            "n_inputs": 1,
            "iid": comp.iid.model_copy(update={"coverage_lo": None, "coverage_hi": None}),
        }
    )
    fig = P.plot_coverage(bare)
    title = fig._suptitle.get_text()
    assert not _bands(fig.axes[0])
    assert "1 inputs" not in title and "1 input" in title
    assert not any("shaded" in t for t in _legend_texts(fig))
    assert "shaded: 95% CI" in _legend_texts(P.plot_coverage(comp))


def _legend_texts(fig) -> list[str]:
    return [t.get_text() for leg in fig.legends for t in leg.get_texts()]


def _run(k_budget: int, iid_shift: float = 0.0) -> Report:
    comp = fx.comparison()
    if k_budget != fx.K:
        cut = slice(0, k_budget)

        def trim(c: CurveSet) -> CurveSet:
            data = c.model_dump()
            for key, v in list(data.items()):
                if isinstance(v, list) and len(v) == fx.K and key != "time_to_coverage":
                    data[key] = v[cut]
            data["time_to_coverage"] = []
            data["coverage_by_rarity"] = data["rarity_bins"] = None
            return CurveSet(**data)

        comp = comp.model_copy(
            update={
                "budget": k_budget,
                "iid": trim(comp.iid),
                "oracle": trim(comp.oracle),
                "policies": [
                    p.model_copy(update={"curves": trim(p.curves), "barcode": None}) for p in comp.policies
                ],
            }
        )
    if iid_shift:
        iid = comp.iid.model_copy(update={"coverage": list(np.clip(fx.IID + iid_shift, 0, 1)), "auc": 0.5})
        comp = comp.model_copy(update={"iid": iid})
    return Report(comparisons=[comp])


def _panel(fig, gid: str):
    (ax,) = [a for a in fig.axes if a.get_gid() == gid]
    return ax


def _policy_lines(ax) -> dict[str, np.ndarray]:
    """``{label: y}`` of the solid (policy) lines of an axes."""
    return {ln.get_label(): np.asarray(ln.get_ydata()) for ln in ax.lines if ln.get_linestyle() == "-"}


def test_compare_overlays_runs_on_one_axes_per_task_with_their_own_baselines() -> None:
    """compare: one axes for hanoi, a line and colour per run, each run's own iid where they differ."""
    fig = P.plot_compare({"a": _run(fx.K), "b": _run(fx.K, iid_shift=0.1)})
    assert [ax.get_gid() for ax in fig.axes] == ["compare:hanoi"]
    ax = fig.axes[0]
    lines = _policy_lines(ax)
    assert list(lines) == ["a: learned", "b: learned"]
    assert all(np.allclose(y, fx.POLICY) for y in lines.values())
    colours = {ln.get_label(): to_rgba(ln.get_color()) for ln in ax.lines}
    assert colours["a: learned"] != colours["b: learned"]
    assert len(_bands(ax)) == 2  # each run's policy band
    # The iids differ (b's prior is shifted): each run's own, dotted, in its colour. The oracles are
    # the same curve: drawn once, black dashed.
    iids = {ln.get_label(): ln for ln in ax.lines if ln.get_label().endswith(": iid")}
    assert set(iids) == {"a: iid", "b: iid"}
    assert np.allclose(iids["a: iid"].get_ydata(), fx.IID)
    assert np.allclose(iids["b: iid"].get_ydata(), np.clip(fx.IID + 0.1, 0, 1))
    assert to_rgba(iids["b: iid"].get_color()) == colours["b: learned"]
    (oracle,) = [ln for ln in ax.lines if ln.get_label() == "oracle"]
    assert np.allclose(oracle.get_ydata(), fx.ORACLE) and oracle.get_color() == "black"
    legend = _legend_texts(fig)
    assert {"a: learned", "b: learned"} <= set(legend)
    assert "\n" not in fig._suptitle.get_text()
    g = fx.comparison().policies[0].gain
    gain = f"gain {g.value:.2f} [{g.lo:.2f}, {g.hi:.2f}]"
    notes = [t.get_text() for t in ax.findobj(Text) if "gain" in t.get_text()]
    assert notes == [f"a, learned: {gain}", f"b, learned: {gain}"]


def test_compare_draws_only_the_tasks_a_run_measured() -> None:
    """Runs of different tasks: an axes per task found in any run, a line only where a run has it."""
    hanoi, sort = fx.comparison("hanoi"), fx.comparison("sort", n_policies=2)
    fig = P.plot_compare({"both": Report(comparisons=[hanoi, sort]), "sort-only": Report(comparisons=[sort])})
    assert [ax.get_gid() for ax in fig.axes] == ["compare:hanoi", "compare:sort"]  # no empty panel
    assert not any("not in this run" in t.get_text() for t in fig.findobj(Text))
    hanoi_ax, sort_ax = fig.axes
    assert list(_policy_lines(hanoi_ax)) == ["both: learned"]
    assert list(_policy_lines(sort_ax)) == [
        "both: learned",
        "both: learned1",
        "sort-only: learned",
        "sort-only: learned1",
    ]
    # A run's second policy carries a marker, its colour is the run's.
    by_label = {ln.get_label(): ln for ln in sort_ax.lines}
    assert by_label["both: learned"].get_marker() in (None, "None", "")
    assert by_label["both: learned1"].get_marker() == "s"
    assert by_label["both: learned1"].get_color() == by_label["both: learned"].get_color()
    # Shared baselines are drawn once in the sort axes, however many runs measured it.
    assert [ln.get_label() for ln in sort_ax.lines if not ln.get_label().count(":")] == ["iid", "oracle"]


def test_compare_lays_many_tasks_out_in_a_grid_without_empty_slots() -> None:
    """5 tasks: 3 + 2 axes, each titled with its task and K, every run a line in each."""
    tasks = [f"task{i}" for i in range(5)]
    rep = Report(comparisons=[fx.comparison(t) for t in tasks])
    fig = P.plot_compare({f"run{i}": rep for i in range(4)})
    assert len(fig.axes) == 5
    assert [ax.get_title() for ax in fig.axes] == [f"{t} (K = {fx.K})" for t in tasks]
    assert all(len(_policy_lines(ax)) == 4 for ax in fig.axes)
    colours = {to_rgba(ln.get_color()) for ln in fig.axes[0].lines if ln.get_linestyle() == "-"}
    assert len(colours) == 4  # a colour per run


def test_compare_refuses_runs_with_different_budgets(tmp_path: Path) -> None:
    """A K=12 run is not drawn under a K=16 title; one line names both budgets."""
    with pytest.raises(SeffiError) as err:
        P.plot_compare({"k16": _run(16), "k12": _run(12)})
    msg = str(err.value)
    assert "\n" not in msg and "K=16 in k16" in msg and "K=12 in k12" in msg

    from seffi.experiment.compare import compare_runs
    from seffi.report import write_report

    write_report(tmp_path / "k16", _run(16), plots=False)
    write_report(tmp_path / "k12", _run(12), plots=False)
    with pytest.raises(SeffiError, match="different budgets"):
        compare_runs([tmp_path / "k16", tmp_path / "k12"], tmp_path / "cmp")
    assert not (tmp_path / "cmp" / "compare.png").exists()


def _eval_comparison(n_evals: int) -> Comparison:
    comp = fx.comparison()
    pols = []
    for i in range(n_evals):
        g = 0.1 * i
        label = "eval" if i == n_evals - 1 else f"eval@{4000 * (i + 1)}"
        gain = Gain(value=g, lo=g - 0.2, hi=g + 0.2)
        pols.append(PolicyResult(curves=fx.curve_set(label, "policy", fx.POLICY), gain=gain))
    # The evaluator lists the final evaluation first, then earlier ones.
    return comp.model_copy(update={"policies": [pols[-1], *pols[:-1]]})


def test_many_evaluations_become_a_gain_vs_step_panel(tmp_path: Path) -> None:
    """6 evaluations: one CI band on the coverage plot, a gain-vs-step panel with CI."""
    comp = _eval_comparison(6)
    cov = P.plot_coverage(comp)
    assert len(_bands(cov.axes[0])) == 2  # the last evaluation's and the iid's, not 6 stacked ones
    fig = P.plot_gain_vs_step(comp)
    assert fig is not None
    ax = fig.axes[0]
    (line,) = [ln for ln in ax.lines if ln.get_label() == "gain vs iid"]
    assert list(line.get_xdata()) == [4000, 8000, 12000, 16000, 20000, 24000]  # final: one spacing on
    assert list(line.get_ydata()) == pytest.approx([0.0, 0.1, 0.2, 0.3, 0.4, 0.5])
    assert len(_bands(ax)) == 1
    assert [t.get_text() for t in ax.get_xticklabels()][-1] == "final"
    files = P.render_report_plots(Report(comparisons=[comp]), tmp_path)
    assert any(name.endswith("/gain_vs_step") for name in files)
    assert P.plot_gain_vs_step(fx.comparison()) is None  # one policy: no series


class _FakeMonitor:
    finalized = False
    label = "eval"

    def __init__(self) -> None:
        self.extra_policies: list = []

    def finalize(self, *, interrupted=False):
        return [p.label for p in self.extra_policies]


def _evaluator(keep_history):
    from seffi.callbacks.evaluator import CoverageEvaluator

    ev = CoverageEvaluator.__new__(CoverageEvaluator)  # the finalize logic alone, no env
    ev.monitor, ev.keep_history = _FakeMonitor(), keep_history
    pol = PolicyResult(curves=fx.curve_set("eval", "policy", fx.POLICY))
    ev.history = [(4000 * (i + 1), pol) for i in range(8)]
    return ev


def test_evaluator_keeps_every_evaluation() -> None:
    """The eval report keeps all 7 earlier evaluations, none dropped."""
    labels = _evaluator(None).finalize()
    assert labels == [f"eval@{4000 * (i + 1)}" for i in range(7)]
    with pytest.warns(RuntimeWarning, match="leaves out the evaluations at steps 8000, 24000"):
        assert len(_evaluator(6).finalize()) == 5
