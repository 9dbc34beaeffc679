"""Matplotlib figures of a report (Agg canvas; pure functions: schema objects in, Figure out).

Each ``plot_*`` returns a ``matplotlib.figure.Figure`` (or None when it has nothing to draw);
[`save_figure`][seffi.report.plots.save_figure] writes a PNG;
[`render_report_plots`][seffi.report.plots.render_report_plots] writes every plot of a report.

Conventions, so figures compare at a glance (all defined in `seffi.report.plots_style`):

- colours are fixed by role: policies take strong tab10 colours; iid is a grey dotted line, the oracle
  a black dashed one, a sanity-check policy (``iid-sampler``) a light grey dash-dot line;
- one title line: task, what is shown and the number of inputs (the env id belongs to the caption);
- legends of line plots sit below the axes, outside the data, so they never hide a curve;
- constrained layout places everything, so nothing is cut off.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from seffi._io import write_atomic
from seffi.report.plots_compare import (
    eval_series,
    plot_compare,
    plot_gain_vs_step,
)
from seffi.report.plots_detail import (
    plot_barcode,
    plot_barcodes,
    plot_coverage_by_rarity,
    rarity_panels,
)
from seffi.report.plots_style import (
    DPI,
    PLOTS_DIR,
    STYLE,
    _a,
    _add_band_key,
    _band,
    _figure,
    _gain_text,
    axes_legend_below,
    budget_axis,
    corner_note,
    finish,
    font,
    is_sanity,
    legend_below,
    legend_label,
    policy_styles,
    save_figure,
    styled_sets,
    suptitle,
    title,
    wrap,
)
from seffi.report.schema import Comparison, CurveSet, Report

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "DPI",
    "PLOTS_DIR",
    "STYLE",
    "eval_series",
    "oracle_exceeded",
    "plot_barcode",
    "plot_barcodes",
    "plot_compare",
    "plot_coverage",
    "plot_coverage_by_rarity",
    "plot_gain_vs_step",
    "plot_latent",
    "plot_novelty",
    "plot_time_to_coverage",
    "plot_valid_vs_raw",
    "rarity_panels",
    "render_report_plots",
    "save_coverage",
    "save_figure",
]
#: Text of the note drawn when a sampler's coverage exceeds the oracle's at some k.
ORACLE_NOTE = (
    "note: the oracle is not a pointwise upper bound; a sampler whose traces match several strategies "
    "(or that is lucky at small k) can sit above it at some k"
)


def oracle_exceeded(comparison: Comparison, *, tol: float = 1e-9) -> list[int]:
    """The budgets k where some policy's coverage is above the oracle's (empty when none is).

    The no-repeat oracle maximises coverage in expectation only for single-strategy traces and over the
    whole budget; a policy can beat it at a given k (multi-strategy traces, luck at k = 1), which a reader
    would otherwise take for a bug.
    """
    oracle = comparison.oracle
    if oracle is None:
        return []
    ref = dict(zip(oracle.k, _a(oracle.coverage), strict=True))
    out: set[int] = set()
    for p in comparison.policies:
        for k, v in zip(p.curves.k, _a(p.curves.coverage), strict=True):
            o = ref.get(k)
            if o is not None and np.isfinite(v) and np.isfinite(o) and v > o + tol:
                out.add(int(k))
    return sorted(out)


def plot_coverage(comparison: Comparison, *, valid: bool = False) -> Figure:
    """Main figure: coverage C(k) with CI bands, policies vs iid vs oracle.

    The legend (below the axes) gives each sampler's AUC and, for policies, the gain vs iid with CI,
    and a "shaded: 95% CI" entry when a band is drawn. Sanity-check policies (see
    `seffi.report.plots_style.is_sanity`) are drawn as a muted line without a band. Where a
    policy is above the oracle at some k, a note in the axes says the oracle is not a pointwise upper
    bound. A series of periodic evaluations (``eval@<step>`` lines, see
    [`eval_series`][seffi.report.plots_compare.eval_series]) is drawn as thin lines without bands, the last
    evaluation with its band: [`plot_gain_vs_step`][seffi.report.plots_compare.plot_gain_vs_step] shows the
    series with CIs.

    Args:
        comparison: the comparison to draw.
        valid: draw valid-only coverage instead of raw coverage.
    """
    fig, axes = _figure(size=(7.0, 5.0))
    ax = axes[0, 0]
    gains = {id(p.curves): _gain_text(p) for p in comparison.policies}
    series = eval_series(comparison)
    # Earlier evaluations of a series: a stack of overlapping CI bands is unreadable, so no bands.
    faded = {id(p.curves) for _, p in series[:-1]} if len(series) >= 3 else set()
    banded = False
    for c, style in styled_sets(comparison):
        y = c.valid_coverage if valid else c.coverage
        lo, hi = (c.valid_coverage_lo, c.valid_coverage_hi) if valid else (c.coverage_lo, c.coverage_hi)
        if y is None:
            continue
        if id(c) in faded:
            ax.plot(c.k, _a(y), color=style["color"], linewidth=0.9, alpha=0.55, label=c.label)
            continue
        label = legend_label(c)
        auc = c.valid_auc if valid else c.auc
        if auc is not None:
            label += f": AUC {auc:.3f}"
        if not valid:
            label += gains.get(id(c), "")
        marker = "o" if len(c.k) <= 12 and c.role == "policy" and not is_sanity(c) else None
        ax.plot(c.k, _a(y), label=label, marker=marker, markersize=4, **style)
        _mark_extrapolated(ax, c, y, style)
        # Bands for the policies and the iid only: a sanity check's band would cover the iid's.
        if not is_sanity(c):
            banded = _band(ax, c.k, lo, hi, style["color"]) or banded
    ax.set_xlabel("sample budget k (samples per input)")
    ax.set_ylabel("valid-strategy coverage" if valid else "strategy coverage C(k) = E|S_k| / M")
    ax.set_ylim(-0.02, 1.05)
    budget_axis(ax, comparison.budget)
    above = [] if valid else oracle_exceeded(comparison)
    if above:
        ks = ", ".join(str(k) for k in above[:6]) + (", …" if len(above) > 6 else "")
        note = [*wrap(ORACLE_NOTE, 4.0, font("note")), f"(here: k = {ks})"]
        corner_note(ax, note, gid="oracle-note")
    handles, labels = ax.get_legend_handles_labels()
    if banded:
        _add_band_key(handles, labels)
    legend_below(fig, handles, labels)
    suptitle(fig, title(comparison, "valid coverage" if valid else "strategy coverage"))
    return finish(fig)


#: The last coverage PNG drawn, with the JSON of its comparison: a run's final W&B chart image and its
#: report's coverage plot show the same comparison, which is then drawn once.
_last_coverage: tuple[str, bytes] | None = None


def save_coverage(comparison: Comparison, path: str | Path) -> Path:
    """Write `plot_coverage` of ``comparison`` as PNG at ``path`` (parent folders created).

    A comparison equal (field by field) to the one of the previous call is not drawn again: the
    previous PNG's bytes are written.
    """
    global _last_coverage
    path = Path(path)
    key = comparison.model_dump_json()
    last = _last_coverage
    if last is not None and last[0] == key:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, last[1])
        return path
    save_figure(plot_coverage(comparison), path)
    _last_coverage = (key, path.read_bytes())
    return path


def _mark_extrapolated(ax: Any, c: CurveSet, y: Sequence[float | None], style: dict[str, Any]) -> None:
    """Draw a curve's extrapolated part (``extrapolated``: k > n of an iid baseline from n samples) dashed.

    A white line under a dashed one of the curve's colour turns the solid stretch dashed; a dotted
    vertical line and a label mark where the model-based extrapolation starts.
    """
    ext = np.asarray(getattr(c, "extrapolated", None) or [], dtype=bool)
    if not ext.any():
        return
    first = int(np.argmax(ext))
    k, v = np.asarray(c.k)[max(first - 1, 0) :], _a(y)[max(first - 1, 0) :]
    width = float(style.get("linewidth", 1.8))
    ax.plot(k, v, color="white", linewidth=width + 0.8, label="_nolegend_")
    dashed = {"color": style["color"], "linestyle": "--", "linewidth": width}
    ax.plot(k, v, label="_nolegend_", gid="extrapolated", **dashed)
    ax.axvline(c.k[first], color="0.6", linestyle=":", linewidth=0.8)
    note = f" {c.label} extrapolated"
    ax.text(c.k[first], 0.01, note, fontsize=font("note"), color="0.35", ha="left", va="bottom")


def plot_novelty(comparison: Comparison) -> Figure:
    """Marginal novelty N(i) = Pr[sample i reveals a new strategy] (expected new count if that is all)."""
    fig, axes = _figure(size=(7.0, 4.8))
    ax = axes[0, 0]
    for c, style in styled_sets(comparison):
        y = c.novelty if c.novelty is not None else c.expected_new
        if y is None:
            continue
        suffix = "" if c.novelty is not None else " (expected # new)"
        ax.plot(c.k, _a(y), label=legend_label(c) + suffix, **style)
    ax.set_xlabel("sample index i")
    ax.set_ylabel("novelty N(i) = Pr[sample i is new]")
    ax.set_ylim(bottom=-0.02)
    budget_axis(ax, comparison.budget)
    axes_legend_below(fig, ax)
    suptitle(fig, title(comparison, "marginal novelty"))
    return finish(fig)


def _tau_groups(sets: Sequence[CurveSet], taus: Sequence[float], m: int | None) -> list[list[float]]:
    """Group thresholds whose T is the same for every run (e.g. T(0.8) = T(1) when M <= 4).

    With M strategies per input, T(tau) = the first k with |S_k| >= ceil(tau * M), so thresholds
    with equal ceil(tau * M) define the same T (estimated curves may differ by their Monte Carlo
    noise only). Without M, thresholds are grouped when every sampler reports identical numbers.
    """

    def key(tau: float) -> Any:
        if m:
            return math.ceil(tau * m - 1e-9)
        ts = [c.ttc(tau) for c in sets]
        return tuple(
            None if t is None else (tuple(t.survival or ()), tuple(t.values or ()), t.median) for t in ts
        )

    groups: dict[Any, list[float]] = {}
    for tau in taus:
        groups.setdefault(key(tau), []).append(tau)
    return list(groups.values())


def _labelled_rule(ax: Any, y: float, text: str, **line: Any) -> None:
    """A horizontal line at ``y`` across ``ax``, with ``text`` just below its left end."""
    ax.axhline(y, **line)
    at = {"xycoords": ("axes fraction", "data"), "xytext": (3, -3), "textcoords": "offset points"}
    ax.annotate(text, (0.0, y), ha="left", va="top", fontsize=font("note"), color="0.4", **at)


def plot_time_to_coverage(comparison: Comparison, taus: Sequence[float] = (0.8, 1.0)) -> Figure:
    """Survival Pr[T(tau) > k] per tau, plus a box panel of per-run T (censored runs drawn at K+1).

    A survival curve crosses the thin 0.5 line at the median T. One legend (below) serves all panels.
    Thresholds that give the same T for every sampler (with M <= 4 strategies, 80% coverage already
    needs all of them) share one panel, titled e.g. "T(0.8) = T(1)".
    """
    styled = styled_sets(comparison)
    groups = _tau_groups([c for c, _ in styled], taus, comparison.num_strategies)
    fig, axes = _figure(1, len(groups) + 1, size=(min(10.0, 4.0 * (len(groups) + 1)), 4.8))
    names = [" = ".join(f"T({tau:g})" for tau in g) for g in groups]
    legend: dict[str, Any] = {}
    for ax, group, name in zip(axes[0, :-1], groups, names, strict=True):
        tau = group[0]
        for c, style in styled:
            t = c.ttc(tau)
            if t is None or t.survival is None:
                continue
            (line,) = ax.step(c.k, _a(t.survival), where="post", label=legend_label(c), **style)
            legend.setdefault(legend_label(c), line)
        # A thin solid line: dotted and dashed mean the baselines here.
        _labelled_rule(ax, 0.5, "median", color="0.6", linewidth=0.9)
        ax.set_xlabel("sample budget k")
        ax.set_ylabel(f"Pr[T({tau:g}) > k]  (below {tau:.0%} coverage)")
        ax.set_ylim(-0.02, 1.05)
        budget_axis(ax, comparison.budget, narrow=True)
        ax.set_title(f"survival of {name}")
    box_ax = axes[0, -1]
    data, labels, colors = [], [], []
    for c, style in styled:
        for group, name in zip(groups, names, strict=True):
            t = c.ttc(group[0])
            if t is None or not t.values:
                continue
            # Censored runs sit at K+1 so the box shows them as "beyond the budget".
            data.append([comparison.budget + 1 if v is None else v for v in t.values])
            labels.append(c.label if len(groups) == 1 else f"{c.label} {name}")
            colors.append(style["color"])
    if data:
        parts = box_ax.boxplot(data, patch_artist=True, widths=0.6)
        # One line per box, slanted, when thresholds split the boxes: two-line labels would collide.
        slant = {} if len(groups) == 1 else {"rotation": 35, "ha": "right", "rotation_mode": "anchor"}
        box_ax.set_xticks(range(1, len(labels) + 1), labels, **slant)
        for patch, color in zip(parts["boxes"], colors, strict=True):
            patch.set_facecolor(color)
            patch.set_alpha(0.35)
        # Each median in its own series colour: matplotlib's default (orange for every box) reads as
        # the second policy's colour.
        for median, color in zip(parts["medians"], colors, strict=True):
            median.set_color(color)
            median.set_linewidth(2.2)
        censored = {"color": "0.5", "linestyle": ":", "linewidth": 1}
        _labelled_rule(box_ax, comparison.budget + 1, "censored (> K)", **censored)
        box_ax.set_ylim(top=comparison.budget + 1.6)
    else:
        box_ax.text(0.5, 0.5, "no per-run values", ha="center", va="center", transform=box_ax.transAxes)
    box_ax.set_ylabel("samples needed T(tau)")
    box_ax.set_title(f"{names[0]} per run" if len(groups) == 1 else "T per run")
    box_ax.grid(True, axis="y", alpha=0.3)
    legend_below(fig, list(legend.values()), list(legend))
    suptitle(fig, title(comparison, "time to coverage"))
    finish(fig)
    box_ax.tick_params(axis="x", labelsize=font("note"))  # one label per (sampler, threshold)
    return fig


def plot_valid_vs_raw(comparison: Comparison) -> Figure:
    """Raw strategy coverage (solid) vs valid-only coverage (dotted), same colour per sampler.

    A method should not look good by producing many invalid modes: a gap between the two lines is
    coverage earned by incorrect solutions. The legend names samplers by colour (with their valid
    rate); a corner note says what the two line styles mean.
    """
    fig, axes = _figure(size=(7.0, 5.0))
    ax = axes[0, 0]
    handles: list[Any] = []
    labels: list[str] = []
    for c, style in styled_sets(comparison):
        # Line style means raw vs valid here, so every sampler is solid/dotted; colour names it.
        (line,) = ax.plot(c.k, _a(c.coverage), **dict(style, linestyle="-", linewidth=2.0))
        if c.valid_coverage is not None:
            ax.plot(c.k, _a(c.valid_coverage), **dict(style, linestyle=":", linewidth=2.4))
        rate = "" if c.valid_rate is None else f" (valid rate {c.valid_rate:.0%})"
        handles.append(line)
        labels.append(legend_label(c) + rate)
    # The line styles are not samplers: a note, so no legend handle looks like a sampler's line.
    corner_note(ax, ["solid: raw, every matched strategy", "dotted: valid, correct solutions only"])
    ax.set_xlabel("sample budget k")
    ax.set_ylabel("coverage")
    ax.set_ylim(-0.02, 1.05)
    budget_axis(ax, comparison.budget)
    legend_below(fig, handles, labels)
    suptitle(fig, title(comparison, "raw vs valid strategy coverage"))
    return finish(fig)


def plot_latent(comparison: Comparison) -> Figure | None:
    """Latent-code coverage of router policies: a method diagnostic, drawn apart from strategy coverage.

    Returns:
        The figure, or None when no policy carries a latent curve.
    """
    latents = [(p, p.latent) for p in comparison.policies if p.latent is not None]
    if not latents:
        return None
    styles = policy_styles(comparison)
    fig, axes = _figure(size=(7.0, 4.8))
    ax = axes[0, 0]
    for pol, lat in latents:
        style = styles[pol.label]  # the policy's colour and line in every plot
        codes = "" if lat.num_codes is None else f" ({lat.num_codes} codes)"
        ax.plot(lat.k, _a(lat.coverage), label=f"{legend_label(pol.curves)}{codes}", **style)
        if not is_sanity(pol.curves):
            _band(ax, lat.k, lat.coverage_lo, lat.coverage_hi, style["color"])
    ax.set_xlabel("sample budget k")
    ax.set_ylabel("latent-code coverage (distinct z / #codes)")
    ax.set_ylim(-0.02, 1.05)
    budget_axis(ax, comparison.budget)
    axes_legend_below(fig, ax)
    suptitle(fig, title(comparison, "router latent-code coverage, a diagnostic"))
    return finish(fig)


def render_report_plots(report: Report, out_dir: str | Path) -> dict[str, Path]:
    """Write every plot of ``report`` under ``out_dir/plots/``.

    Returns:
        ``{"<slug>/<plot>": path}`` with plot in coverage, coverage_by_rarity, novelty,
        time_to_coverage, valid_vs_raw, barcode, latent, gain_vs_step (those that apply), in that order.
    """
    out = Path(out_dir) / PLOTS_DIR
    files: dict[str, Path] = {}
    for slug, comp in zip(report.slugs(), report.comparisons, strict=True):

        def _save(name: str, fig: Figure | None, slug: str = slug) -> None:
            if fig is not None:
                files[f"{slug}/{name}"] = save_figure(fig, out / f"{slug}_{name}.png")

        sets = comp.curve_sets()
        files[f"{slug}/coverage"] = save_coverage(comp, out / f"{slug}_coverage.png")
        _save("coverage_by_rarity", plot_coverage_by_rarity(comp))
        if any(c.novelty is not None or c.expected_new is not None for c in sets):
            _save("novelty", plot_novelty(comp))
        if any(c.time_to_coverage for c in sets):
            _save("time_to_coverage", plot_time_to_coverage(comp))
        if any(c.valid_coverage is not None for c in sets):
            _save("valid_vs_raw", plot_valid_vs_raw(comp))
        _save("barcode", plot_barcodes(comp))
        _save("latent", plot_latent(comp))
        _save("gain_vs_step", plot_gain_vs_step(comp))
    return files
