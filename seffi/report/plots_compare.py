"""Figures over several results: runs overlaid (``seffi compare``) and a series of periodic evaluations.

- :func:`plot_compare` overlays several runs, one panel per task. Each run's policies are drawn with
  their CI bands next to *that run's own* iid and oracle curves (runs may use other priors or
  skews). Runs whose budget K differs on a task are refused with one line
  (:class:`IncompatibleRuns`): their coverage curves live on different x ranges and their AUCs
  average over different budgets, so an overlay would compare unlike numbers.
- :func:`plot_gain_vs_step` draws the gain vs iid (with its CI) of every periodic evaluation against
  the training step, instead of stacking one CI band per evaluation on the coverage plot.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from seffi.errors import SeffiError
from seffi.report._plot_base import (
    _POLICY_COLORS,
    _a,
    _budget_axis,
    _figure,
    _style,
    _suptitle,
    _title,
    _wrap,
)
from seffi.report.schema import Comparison, PolicyResult, Report

if TYPE_CHECKING:
    from matplotlib.figure import Figure

_LINESTYLES = ("-", "-.", ":", (0, (5, 1)))
_EVAL_LABEL = re.compile(r"^(?P<base>.+)@(?P<step>\d+)$")


class IncompatibleRuns(SeffiError):
    """Runs that cannot share one panel (a task measured at different budgets K)."""


def check_overlay(reports: Mapping[str, Report]) -> None:
    """Refuse runs whose budgets differ on a task they share.

    Raises:
        IncompatibleRuns: one line naming the task and each run's K.
    """
    budgets: dict[str, dict[str, int]] = {}
    for run, rep in reports.items():
        for comp in rep.comparisons:
            budgets.setdefault(comp.task, {}).setdefault(run, comp.budget)
    for task, per_run in budgets.items():
        if len(set(per_run.values())) > 1:
            which = ", ".join(f"K={k} in {run}" for run, k in per_run.items())
            raise IncompatibleRuns(
                f"cannot overlay {task}: the runs use different budgets ({which}); "
                "coverage and AUC at different K do not compare — compare runs of one K"
            )


def plot_compare(reports: Mapping[str, Report]) -> Figure:
    """Overlay several runs: one panel per task, each run's policies (CI bands) and its own iid/oracle.

    Baselines are drawn per run (thin, in the run's line style) because runs may differ in prior or
    skew; identical baselines simply coincide.

    Args:
        reports: ``{run label: report}``, in legend order.

    Raises:
        IncompatibleRuns: two runs measured one task at different budgets.
        ValueError: no run holds a comparison.
    """
    tasks: list[str] = []
    for rep in reports.values():
        for comp in rep.comparisons:
            if comp.task not in tasks:
                tasks.append(comp.task)
    if not tasks:
        raise ValueError("no comparisons to overlay")
    check_overlay(reports)
    fig, axes = _figure(1, len(tasks), size=(6.0 * len(tasks), 5.4))
    for ax, task in zip(axes[0], tasks, strict=True):
        budget = 1
        for r_i, (run_label, rep) in enumerate(reports.items()):
            dash = _LINESTYLES[r_i % len(_LINESTYLES)]
            for comp in rep.comparisons:
                if comp.task != task:
                    continue
                budget = comp.budget
                for p_i, pol in enumerate(comp.policies):
                    c = pol.curves
                    color = _POLICY_COLORS[(r_i * 3 + p_i) % len(_POLICY_COLORS)]
                    g = pol.gain
                    gain = "" if g is None or g.value is None else f", gain {g.value:.2f}"
                    if g is not None and g.value is not None and g.lo is not None and g.hi is not None:
                        gain += f" [{g.lo:.2f}, {g.hi:.2f}]"
                    ax.plot(
                        c.k, _a(c.coverage), color=color, linestyle=dash, linewidth=2.0,
                        label=f"{run_label}: {c.label}{gain}",
                    )  # fmt: skip
                    if c.coverage_lo is not None and c.coverage_hi is not None:
                        ax.fill_between(
                            c.k, _a(c.coverage_lo), _a(c.coverage_hi), color=color, alpha=0.13, linewidth=0
                        )
                for c in (comp.iid, comp.oracle):
                    if c is not None:
                        style = dict(_style(c, 0), linestyle=dash, linewidth=1.3)
                        auc = "" if c.auc is None else f" (AUC {c.auc:.3f})"
                        ax.plot(c.k, _a(c.coverage), label=f"{run_label}: {c.label}{auc}", **style)
        ax.set_xlabel("sample budget k")
        ax.set_ylabel("strategy coverage C(k)")
        ax.set_ylim(-0.02, 1.05)
        _budget_axis(ax, budget)
        # Per panel (tasks differ in their runs), in the lower right where rising curves leave room.
        ax.legend(loc="lower right", fontsize=7, framealpha=0.85)
        what = f"{task}: coverage across runs (K={budget}; shaded: 95% CI; each run's own iid/oracle)"
        ax.set_title("\n".join(_wrap(what, 6.0, 10.0)), fontsize=10)
    return fig


def eval_series(comparison: Comparison) -> list[tuple[int | None, PolicyResult]]:
    """The periodic evaluations of a comparison, oldest first: ``(step, policy)``.

    Earlier evaluations carry a ``<label>@<step>`` label (see
    :class:`seffi.callbacks.evaluator.CoverageEvaluator`); the final one keeps the plain ``<label>``
    and comes last with step None. Empty when the comparison holds fewer than two ``@`` lines.
    """
    groups: dict[str, list[tuple[int, PolicyResult]]] = {}
    for pol in comparison.policies:
        m = _EVAL_LABEL.match(pol.label)
        if m:
            groups.setdefault(m["base"], []).append((int(m["step"]), pol))
    if not groups:
        return []
    base, items = max(groups.items(), key=lambda kv: len(kv[1]))
    if len(items) < 2:
        return []
    out: list[tuple[int | None, PolicyResult]] = list(sorted(items, key=lambda t: t[0]))
    out += [(None, p) for p in comparison.policies if p.label == base]
    return out


def plot_gain_vs_step(comparison: Comparison) -> Figure | None:
    """Gain vs iid of each periodic evaluation against the training step, with its 95% CI.

    The final evaluation (its step is not in the label) sits one step-spacing right of the last
    labelled one, on a tick named "final". Evaluations whose gain is undefined are listed under the axes
    with their reason, never silently left out.

    Returns:
        The figure, or None when the comparison holds fewer than 3 evaluations.
    """
    series = eval_series(comparison)
    if len(series) < 3:
        return None
    steps = np.array([s for s, _ in series if s is not None], dtype=np.float64)
    spacing = float(np.median(np.diff(steps))) if steps.size > 1 else max(1.0, float(steps[0]))
    xs = [float(s) if s is not None else float(steps[-1] + spacing) for s, _ in series]
    fig, axes = _figure(size=(7.0, 4.6))
    ax = axes[0, 0]
    val, lo, hi, missing = [], [], [], []
    for _step, pol in series:
        g = pol.gain
        if g is None or g.value is None:
            val.append(np.nan)
            lo.append(np.nan)
            hi.append(np.nan)
            missing.append(f"{pol.label}: {'no gain' if g is None else g.reason}")
            continue
        val.append(g.value)
        lo.append(g.value if g.lo is None else g.lo)
        hi.append(g.value if g.hi is None else g.hi)
    color = _POLICY_COLORS[0]
    ax.fill_between(xs, lo, hi, color=color, alpha=0.18, linewidth=0, label="95% CI")
    ax.plot(xs, val, color=color, marker="o", linewidth=2.0, label="gain vs iid")
    ax.axhline(0.0, color="tab:gray", linewidth=1.2, label="iid (0)")
    ax.axhline(1.0, color="black", linestyle="--", linewidth=1.2, label="oracle (1)")
    ticks = [f"{int(x):,}" if s is not None else "final" for x, (s, _) in zip(xs, series, strict=True)]
    if len(xs) <= 12:
        ax.set_xticks(xs, ticks, fontsize=7, rotation=30)
    ax.set_xlabel("training step of the evaluation")
    ax.set_ylabel("gain vs iid (0 = iid, 1 = oracle)")
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper left", fontsize=7, framealpha=0.85)
    if missing:
        fig.text(0.005, 0.005, "gain undefined: " + "; ".join(missing), fontsize=7, color="0.3")
    what = f"gain over training ({len(series)} evaluations)"
    _suptitle(fig, _title(comparison, what, fig.get_figwidth()))
    return fig
