"""Figures over several results: runs overlaid (``seffi compare``) and a series of periodic evaluations.

- [`plot_compare`][seffi.report.plots_compare.plot_compare] draws several runs as small multiples, a row per
  task and a column per run (shared y): each run's policies with their CI bands next to *that run's own* iid
  and oracle curves (runs may use other priors or skews), each gain vs iid written in its panel. Runs whose
  budget K differs on a task are refused with one line
  ([`IncompatibleRuns`][seffi.report.plots_compare.IncompatibleRuns]): their coverage curves live on different
  x ranges and their AUCs average over different budgets, so an overlay would compare unlike numbers.
- [`plot_gain_vs_step`][seffi.report.plots_compare.plot_gain_vs_step] draws the gain vs iid (with its CI) of
  every periodic evaluation against the training step, instead of stacking one CI band per evaluation on the
  coverage plot.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from seffi.errors import SeffiError
from seffi.report import plots_style as style
from seffi.report.plots_style import _a, _add_band_key, _band, _figure, _gain_text
from seffi.report.schema import Comparison, PolicyResult, Report

if TYPE_CHECKING:
    from matplotlib.figure import Figure

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
    """Several runs as small multiples: a row per task, a column per run, each against its own baselines.

    A panel holds one run's policies (CI bands for all but sanity checks) and that run's own iid and
    oracle curves, because runs may differ in prior or skew; the gains vs iid are written in the panel.
    A policy label has one colour in every panel, and all panels share the y axis.

    Args:
        reports: ``{run label: report}``, in column order.

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
    colors: dict[str, str] = {}  # one colour per policy label across runs and tasks
    for rep in reports.values():
        for comp in rep.comparisons:
            for pol in comp.policies:
                if not style.is_sanity(pol.curves) and pol.label not in colors:
                    colors[pol.label] = style.policy_color(len(colors))
    runs = list(reports)
    fig, axes = _figure(len(tasks), len(runs), size=(max(7.0, 0.9 + 3.5 * len(runs)), 1.6 + 2.7 * len(tasks)))
    legend: dict[str, object] = {}
    for row, task in enumerate(tasks):
        for col, run in enumerate(runs):
            ax = axes[row, col]
            ax.set_gid(f"compare:{task}:{run}")
            comp = next((c for c in reports[run].comparisons if c.task == task), None)
            if row == 0:
                ax.set_title(run)
            if col == 0:
                ax.set_ylabel(f"{task}\ncoverage C(k)")
            if row == len(tasks) - 1:
                ax.set_xlabel("sample budget k")
            ax.set_ylim(-0.02, 1.05)
            if comp is None:
                ax.text(0.5, 0.5, "task not in this run", ha="center", va="center", transform=ax.transAxes)
                continue
            gains = []
            for pol in comp.policies:
                c = pol.curves
                look = style.role_style(c, 0)
                if not style.is_sanity(c):
                    look["color"] = colors[c.label]
                (line,) = ax.plot(c.k, _a(c.coverage), label=style.legend_label(c), **look)
                legend.setdefault(style.legend_label(c), line)
                if not style.is_sanity(c):
                    _band(ax, c.k, c.coverage_lo, c.coverage_hi, look["color"])
                if pol.gain is not None:
                    gains.append(f"{c.label}: {_gain_text(pol).removeprefix(', ')}")
            for c in (comp.iid, comp.oracle):
                if c is not None:
                    (line,) = ax.plot(c.k, _a(c.coverage), label=c.label, **style.role_style(c, 0))
                    legend.setdefault(f"{c.label} (the run's own)", line)
            if gains:
                style.corner_note(ax, gains)
            style.budget_axis(ax, comp.budget, narrow=True)
    for ax in axes[:, 1:].ravel():
        ax.tick_params(axis="y", labelleft=False)
    handles, labels = list(legend.values()), list(legend)
    _add_band_key(handles, labels)
    style.legend_below(fig, handles, labels)
    style.suptitle(fig, "strategy coverage by task (rows) and run (columns)")
    return style.finish(fig)


def eval_series(comparison: Comparison) -> list[tuple[int | None, PolicyResult]]:
    """The periodic evaluations of a comparison, oldest first: ``(step, policy)``.

    Earlier evaluations carry a ``<label>@<step>`` label (see
    [`seffi.callbacks.evaluator.CoverageEvaluator`][seffi.callbacks.CoverageEvaluator]); the final one keeps
    the plain ``<label>`` and comes last with step None. Empty when the comparison holds fewer than two ``@``
    lines.
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
    color, look = style.policy_color(0), style.STYLE
    ax.fill_between(xs, lo, hi, color=color, alpha=look["band_alpha"] + 0.05, linewidth=0, label="95% CI")
    ax.plot(xs, val, color=color, marker="o", linewidth=look["policy"]["linewidth"], label="gain vs iid")
    ax.axhline(0.0, **look["iid"], label="iid (0)")
    ax.axhline(1.0, **look["oracle"], label="oracle (1)")
    ticks = [f"{int(x):,}" if s is not None else "final" for x, (s, _) in zip(xs, series, strict=True)]
    if len(xs) <= 12:
        ax.set_xticks(xs, ticks, rotation=30)
    ax.set_xlabel("training step of the evaluation")
    ax.set_ylabel("gain vs iid (0 = iid, 1 = oracle)")
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper left", fontsize=style.font("legend"), framealpha=0.85)
    if missing:
        note = "gain undefined: " + "; ".join(missing)
        fig.text(0.005, 0.005, note, fontsize=style.font("note"), color="0.3")
    style.suptitle(fig, style.title(comparison, f"gain over training ({len(series)} evaluations)"))
    return style.finish(fig)
