"""Matplotlib figures of a report (Agg canvas; pure functions: schema objects in, Figure out).

Each ``plot_*`` returns a ``matplotlib.figure.Figure`` (or None when it has nothing to draw);
:func:`save_figure` writes a PNG; :func:`render_report_plots` writes every plot of a report.

Conventions, so figures compare at a glance:

- colours are fixed by role: policies take the tab10 cycle, iid is grey, the oracle a black dashed line;
- the title (a figure suptitle, wrapped to the figure width so long env ids never run off the edge)
  says task, what is shown, env id, budget K and the number of inputs;
- legends of line plots sit below the axes, outside the data, so they never hide a curve;
- constrained layout places everything, so nothing is cut off.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from seffi.report.schema import Barcode, Comparison, CurveSet, PolicyResult, Report

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

PLOTS_DIR = "plots"
DPI = 100
_POLICY_COLORS = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown", "tab:pink")
_TITLE_SIZE = 11.0
_LEGEND_SIZE = 8.0
# PNG zlib level: these plots are large flat-colour areas, where level 1 encodes about 3x faster than
# the default 6 for files within a few percent of the size (measured on a `seffi run` report).
_PNG_OPTIONS = {"compress_level": 1}
# Unhinted glyphs: text rendering is the largest single cost of a plot; at these font sizes and 100 dpi
# unhinted antialiased text is as legible as autohinted text (compared side by side) and ~13% faster.
_SAVE_RC = {"text.hinting": "no_hinting"}


def _figure(
    nrows: int = 1, ncols: int = 1, size: tuple[float, float] = (7.0, 4.5)
) -> tuple[Figure, np.ndarray]:
    """A Figure on its own Agg canvas with an ``(nrows, ncols)`` grid of axes."""
    fig = _blank_figure(size)
    axes = fig.subplots(nrows, ncols, squeeze=False)
    return fig, axes


def _blank_figure(size: tuple[float, float]) -> Figure:
    # Figure() + Agg canvas (not pyplot): no global state, no GUI, safe in worker threads.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    # The figure dpi equals the save dpi, so the layout pass and the final draw measure text at the
    # same resolution and the second one hits matplotlib's text-metrics cache.
    fig = Figure(figsize=size, dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _a(values: Sequence[float | None] | None) -> np.ndarray:
    """Per-k values (null = undefined) as a float array with NaN, which matplotlib leaves as gaps."""
    return np.array([np.nan if v is None else v for v in (values or [])], dtype=np.float64)


def _style(curves: CurveSet, index: int) -> dict[str, Any]:
    if curves.role == "oracle":
        return {"color": "black", "linestyle": "--", "linewidth": 1.6}
    if curves.role == "iid":
        return {"color": "tab:gray", "linestyle": "-", "linewidth": 1.8}
    return {"color": _POLICY_COLORS[index % len(_POLICY_COLORS)], "linestyle": "-", "linewidth": 2.0}


def _styled_sets(comparison: Comparison) -> list[tuple[CurveSet, dict[str, Any]]]:
    out, n_policy = [], 0
    for c in comparison.curve_sets():
        out.append((c, _style(c, n_policy)))
        n_policy += c.role == "policy"
    return out


def _legend_label(c: CurveSet) -> str:
    extra = f" ({c.method})" if c.method and c.role != "policy" else ""
    return f"{c.label}{extra}"


def _wrap(text: str, width_in: float, size: float = _TITLE_SIZE) -> list[str]:
    """Split ``text`` into lines that fit ``width_in`` inches at font ``size`` (DejaVu Sans)."""
    # DejaVu Sans averages ~0.52 em per glyph on mixed-case titles; 0.56 leaves a margin (tested with a
    # long CamelCase env id, see tests/report/test_plots.py).
    chars = max(16, int(width_in * 72.0 / (0.56 * size)))
    return textwrap.wrap(text, chars, break_on_hyphens=False) or [""]


def _title(comparison: Comparison, what: str, width_in: float = 7.0) -> str:
    """Figure title: ``"<task>: <what>"`` then ``"<env id> · K=.., n inputs"``, wrapped to the width."""
    where = f"{comparison.env_id} · " if comparison.env_id else ""
    detail = f"{where}budget K={comparison.budget}, {comparison.n_inputs} inputs"
    return "\n".join(_wrap(f"{comparison.task}: {what}", width_in) + _wrap(detail, width_in))


def _suptitle(fig: Figure, text: str) -> None:
    fig.suptitle(text, fontsize=_TITLE_SIZE)


def _legend_below(fig: Figure, handles: Sequence[Any], labels: Sequence[str]) -> None:
    """One figure legend under the axes, in as many columns as fit the figure width."""
    if not handles:
        return
    width_in = fig.get_figwidth()
    # One entry ~ handle (0.45 in) + text (0.55 em per char) + padding.
    entry_in = 0.6 + max(len(s) for s in labels) * 0.55 * _LEGEND_SIZE / 72.0
    ncols = int(max(1, min(len(labels), width_in // entry_in)))
    fig.legend(handles, labels, loc="outside lower center", ncols=ncols, fontsize=_LEGEND_SIZE, frameon=False)


def _axes_legend_below(fig: Figure, ax: Axes) -> None:
    handles, labels = ax.get_legend_handles_labels()
    _legend_below(fig, handles, labels)


def _budget_axis(ax: Axes, budget: int) -> None:
    ax.set_xlim(0.5, budget + 0.5)
    if budget <= 20:
        ax.set_xticks(range(1, budget + 1, max(1, budget // 10)))
    ax.grid(True, alpha=0.3)


def _gain_text(p: PolicyResult) -> str:
    g = p.gain
    if g is None:
        return ""
    if g.value is None:
        return ", gain n/a"
    if g.lo is not None and g.hi is not None:
        return f", gain {g.value:.2f} [{g.lo:.2f}, {g.hi:.2f}]"
    return f", gain {g.value:.2f}"


def plot_coverage(comparison: Comparison, *, valid: bool = False) -> Figure:
    """Main figure: coverage C(k) with CI bands, policies vs iid vs oracle.

    The legend (below the axes) gives each sampler's AUC and, for policies, the gain vs iid with CI.

    Args:
        comparison: the comparison to draw.
        valid: draw valid-only coverage instead of raw coverage.
    """
    fig, axes = _figure(size=(7.0, 5.0))
    ax = axes[0, 0]
    gains = {id(p.curves): _gain_text(p) for p in comparison.policies}
    for c, style in _styled_sets(comparison):
        y = c.valid_coverage if valid else c.coverage
        lo, hi = (c.valid_coverage_lo, c.valid_coverage_hi) if valid else (c.coverage_lo, c.coverage_hi)
        if y is None:
            continue
        label = _legend_label(c)
        auc = c.valid_auc if valid else c.auc
        if auc is not None:
            label += f": AUC {auc:.3f}"
        if not valid:
            label += gains.get(id(c), "")
        ax.plot(c.k, _a(y), label=label, marker="o" if len(c.k) <= 12 else None, markersize=3, **style)
        if lo is not None and hi is not None:
            ax.fill_between(c.k, _a(lo), _a(hi), color=style["color"], alpha=0.15, linewidth=0)
    ax.set_xlabel("sample budget k (samples per input)")
    ax.set_ylabel("valid-strategy coverage" if valid else "strategy coverage C(k) = E|S_k| / M")
    ax.set_ylim(-0.02, 1.05)
    _budget_axis(ax, comparison.budget)
    _axes_legend_below(fig, ax)
    what = "valid coverage" if valid else "strategy coverage (shaded: 95% CI)"
    _suptitle(fig, _title(comparison, what, fig.get_figwidth()))
    return fig


def plot_novelty(comparison: Comparison) -> Figure:
    """Marginal novelty N(i) = Pr[sample i reveals a new strategy] (expected new count if that is all)."""
    fig, axes = _figure(size=(7.0, 4.8))
    ax = axes[0, 0]
    for c, style in _styled_sets(comparison):
        y = c.novelty if c.novelty is not None else c.expected_new
        if y is None:
            continue
        suffix = "" if c.novelty is not None else " (expected # new)"
        ax.plot(c.k, _a(y), label=_legend_label(c) + suffix, **style)
    ax.set_xlabel("sample index i")
    ax.set_ylabel("novelty N(i) = Pr[sample i is new]")
    ax.set_ylim(bottom=-0.02)
    _budget_axis(ax, comparison.budget)
    _axes_legend_below(fig, ax)
    _suptitle(fig, _title(comparison, "marginal novelty", fig.get_figwidth()))
    return fig


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


def plot_time_to_coverage(comparison: Comparison, taus: Sequence[float] = (0.8, 1.0)) -> Figure:
    """Survival Pr[T(tau) > k] per tau, plus a box panel of per-run T (censored runs drawn at K+1).

    A survival curve crosses the dotted 0.5 line at the median T. One legend (below) serves all panels.
    Thresholds that give the same T for every sampler (with M <= 4 strategies, 80% coverage already
    needs all of them) share one panel, titled e.g. "T(0.8) = T(1)".
    """
    styled = _styled_sets(comparison)
    groups = _tau_groups([c for c, _ in styled], taus, comparison.num_strategies)
    fig, axes = _figure(1, len(groups) + 1, size=(4.2 * (len(groups) + 1), 4.6))
    names = [" = ".join(f"T({tau:g})" for tau in g) for g in groups]
    legend: dict[str, Any] = {}
    for ax, group, name in zip(axes[0, :-1], groups, names, strict=True):
        tau = group[0]
        for c, style in styled:
            t = c.ttc(tau)
            if t is None or t.survival is None:
                continue
            (line,) = ax.step(c.k, _a(t.survival), where="post", **style)
            legend.setdefault(_legend_label(c), line)
        ax.axhline(0.5, color="0.55", linestyle=":", linewidth=1)
        ax.set_xlabel("sample budget k")
        ax.set_ylabel(f"Pr[T({tau:g}) > k]  (not yet at {tau:.0%} coverage)")
        ax.set_ylim(-0.02, 1.05)
        _budget_axis(ax, comparison.budget)
        ax.set_title(f"survival of {name}; dotted: median level", fontsize=9)
    box_ax = axes[0, -1]
    data, labels, colors = [], [], []
    for c, style in styled:
        for group, name in zip(groups, names, strict=True):
            t = c.ttc(group[0])
            if t is None or not t.values:
                continue
            # Censored runs sit at K+1 so the box shows them as "beyond the budget".
            data.append([comparison.budget + 1 if v is None else v for v in t.values])
            labels.append(f"{c.label}\n{name}")
            colors.append(style["color"])
    if data:
        parts = box_ax.boxplot(data, patch_artist=True, widths=0.6)
        box_ax.set_xticks(range(1, len(labels) + 1), labels, fontsize=7)
        for patch, color in zip(parts["boxes"], colors, strict=True):
            patch.set_facecolor(color)
            patch.set_alpha(0.35)
        box_ax.axhline(comparison.budget + 1, color="0.5", linestyle=":", linewidth=1)
        box_ax.annotate(
            "censored (> K)",
            (0.0, comparison.budget + 1),
            xycoords=("axes fraction", "data"),
            xytext=(3, -3),
            textcoords="offset points",
            va="top",
            fontsize=7,
            color="0.4",
        )
        box_ax.set_ylim(top=comparison.budget + 1.6)
    else:
        box_ax.text(0.5, 0.5, "no per-run values", ha="center", va="center", transform=box_ax.transAxes)
    box_ax.set_ylabel("samples needed T(tau)")
    box_ax.set_title("T per run", fontsize=9)
    box_ax.grid(True, axis="y", alpha=0.3)
    _legend_below(fig, list(legend.values()), list(legend))
    _suptitle(fig, _title(comparison, "time to coverage", fig.get_figwidth()))
    return fig


# -- strategy barcodes ----------------------------------------------------------------------------------


def _strategy_colors(names: Sequence[str]) -> dict[str, Any]:
    import matplotlib

    cmap = matplotlib.colormaps["tab20" if len(names) > 10 else "tab10"]
    return {s: cmap(j % cmap.N) for j, s in enumerate(names)}


def _draw_barcode(
    ax: Axes, barcode: Barcode, colors: Mapping[str, Any], max_rows: int, ylabels: bool
) -> None:
    """Draw one barcode as an RGB image (one rasterized artist, however many cells) + first-hit dots."""
    from matplotlib.colors import to_rgb

    rows = barcode.matrix[:max_rows]
    n_rows = max(len(rows), 1)
    width = max(max((len(r) for r in rows), default=1), 1)
    # Palette index: 0 = beyond the row (light grey), 1 = no match (white), 2 + j = strategy j.
    palette = np.array(
        [to_rgb("0.92"), (1.0, 1.0, 1.0), *(to_rgb(colors[s]) for s in barcode.strategies)], dtype=np.float64
    )
    grid = np.zeros((n_rows, width), dtype=np.int64)
    for i, r in enumerate(rows):
        grid[i, : len(r)] = np.asarray(r, dtype=np.int64) + 2
    # 1-based columns so "sample index i" means the same here as in N(i) and C(k).
    extent = (0.5, width + 0.5, n_rows - 0.5, -0.5)
    ax.imshow(palette[grid], aspect="auto", interpolation="nearest", extent=extent)
    fx, fy = [], []
    for i, r in enumerate(rows):
        seen: set[int] = set()
        for j, v in enumerate(r):
            # Prefer the recorded flag: a multi-match sample can be new through a strategy not shown.
            is_new = barcode.new[i][j] if barcode.new is not None else v >= 0 and v not in seen
            seen.add(v)
            if is_new:
                fx.append(j + 1)
                fy.append(i)
    # Marker area follows the cell size, so dense barcodes (large K) are not covered in dots.
    cell_pt = 72.0 * ax.get_position().width * ax.figure.get_figwidth() / width
    size = float(np.clip((0.4 * cell_pt) ** 2, 1.0, 14.0))
    ax.scatter(fx, fy, marker="o", s=size, facecolor="white", edgecolor="black", linewidth=0.6, zorder=3)
    ax.set_xlabel("sample index i")
    if ylabels and len(rows) <= 30:
        ax.set_yticks(range(len(rows)), [i[:12] for i in barcode.input_ids[:max_rows]], fontsize=7)
    elif not ylabels:
        ax.tick_params(axis="y", labelleft=False)


def _barcode_legend(fig: Figure, colors: Mapping[str, Any]) -> None:
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles: list[Any] = [Patch(facecolor=c, label=s) for s, c in colors.items()]
    handles.append(Patch(facecolor="white", edgecolor="0.6", label="no match"))
    handles.append(
        Line2D(
            [],
            [],
            marker="o",
            linestyle="",
            markerfacecolor="white",
            markeredgecolor="black",
            label="first appearance",
        )
    )
    fig.legend(handles=handles, loc="outside right upper", fontsize=7, frameon=False)


def _barcode_size(n_panels: int, width: int, n_rows: int, n_strategies: int) -> tuple[float, float]:
    panel = float(np.clip(1.0 + 0.22 * width, 2.2, 7.0))
    legend = 1.9  # strategy names at font size 7
    height = float(np.clip(1.7 + 0.27 * n_rows, 3.2, 12.0))
    return 1.1 + n_panels * panel + legend, max(height, 1.6 + 0.2 * n_strategies)


def plot_barcode(barcode: Barcode, *, title: str = "strategy barcode", max_rows: int = 60) -> Figure:
    """Strategy barcode: rows inputs, columns sample index, colour = strategy, dot at first appearance.

    Cells with no match are white; cells past a row's end are light grey. Only the first
    ``max_rows`` inputs are drawn (stated in the title) so the figure stays legible.
    """
    rows = barcode.matrix[:max_rows]
    width = max((len(r) for r in rows), default=1)
    fig = _blank_figure(_barcode_size(1, width, len(rows), len(barcode.strategies)))
    ax = fig.subplots()
    colors = _strategy_colors(barcode.strategies)
    _draw_barcode(ax, barcode, colors, max_rows, ylabels=True)
    ax.set_ylabel("input")
    _barcode_legend(fig, colors)
    shown = "" if len(barcode.matrix) <= max_rows else f" (first {max_rows} of {len(barcode.matrix)} inputs)"
    lines = [line for part in (title + shown).split("\n") for line in _wrap(part, fig.get_figwidth())]
    _suptitle(fig, "\n".join(lines))
    return fig


def plot_barcodes(comparison: Comparison, *, max_rows: int = 60) -> Figure | None:
    """The barcodes of all policies of a comparison side by side (one panel each, shared colours).

    Panels share the input axis when the policies saw the same inputs in the same order, so the same
    row is the same input across panels and redundancy can be compared directly.

    Returns:
        The figure, or None when no policy carries a barcode.
    """
    pols = [p for p in comparison.policies if p.barcode is not None]
    if not pols:
        return None
    bars = [p.barcode for p in pols if p.barcode is not None]
    names: list[str] = []
    for b in bars:
        names += [s for s in b.strategies if s not in names]
    colors = _strategy_colors(names)
    same_rows = all(b.input_ids[:max_rows] == bars[0].input_ids[:max_rows] for b in bars)
    width = max(max((len(r) for r in b.matrix[:max_rows]), default=1) for b in bars)
    n_rows = max(len(b.matrix[:max_rows]) for b in bars)
    fig = _blank_figure(_barcode_size(len(bars), width, n_rows, len(names)))
    axes = fig.subplots(1, len(bars), squeeze=False, sharey=same_rows)[0]
    for i, (ax, pol, bar) in enumerate(zip(axes, pols, bars, strict=True)):
        _draw_barcode(ax, bar, colors, max_rows, ylabels=i == 0 or not same_rows)
        cut = "" if len(bar.matrix) <= max_rows else f" (first {max_rows} of {len(bar.matrix)})"
        ax.set_title(f"{pol.label}{cut}", fontsize=9)
    axes[0].set_ylabel("input")
    _barcode_legend(fig, colors)
    _suptitle(fig, _title(comparison, "strategy barcodes", fig.get_figwidth()))
    return fig


def plot_valid_vs_raw(comparison: Comparison) -> Figure:
    """Raw strategy coverage (solid) vs valid-only coverage (dotted), same colour per sampler.

    A method should not look good by producing many invalid modes: a gap between the two lines is
    coverage earned by incorrect solutions. The legend names samplers by colour (with their valid
    rate) and the two line styles once, instead of one entry per line.
    """
    from matplotlib.lines import Line2D

    fig, axes = _figure(size=(7.0, 5.0))
    ax = axes[0, 0]
    handles: list[Any] = []
    labels: list[str] = []
    for c, style in _styled_sets(comparison):
        (line,) = ax.plot(c.k, _a(c.coverage), **style)
        if c.valid_coverage is not None:
            ax.plot(c.k, _a(c.valid_coverage), **dict(style, linestyle=":", linewidth=2.2))
        rate = "" if c.valid_rate is None else f" (valid rate {c.valid_rate:.0%})"
        handles.append(line)
        labels.append(_legend_label(c) + rate)
    handles += [
        Line2D([], [], color="0.3", linestyle="-", linewidth=2.0),
        Line2D([], [], color="0.3", linestyle=":", linewidth=2.2),
    ]
    labels += ["raw: every matched strategy", "valid: correct solutions only"]
    ax.set_xlabel("sample budget k")
    ax.set_ylabel("coverage")
    ax.set_ylim(-0.02, 1.05)
    _budget_axis(ax, comparison.budget)
    _legend_below(fig, handles, labels)
    what = "raw (solid) vs valid (dotted) strategy coverage"
    _suptitle(fig, _title(comparison, what, fig.get_figwidth()))
    return fig


# -- common vs rare strategies ----------------------------------------------------------------------------


def rarity_panels(comparison: Comparison) -> dict[str, Any] | None:
    """The numbers behind :func:`plot_coverage_by_rarity` (also used by tests).

    Rows of ``coverage_by_rarity`` are the coverage *contributed* by each base-probability quantile bin
    (row 0 = most common), so they sum to C(k). When the oracle reaches full coverage at K, its rows at
    K are the bins' shares of the strategies; each row is then divided by that share, giving "share of
    this bin's strategies found by k" on a 0..1 scale, and empty bins (share 0, e.g. M=3 with 4 bins)
    are dropped. Otherwise the raw contributions are shown.

    Returns:
        None when no curve set has ``coverage_by_rarity``; else a dict with ``bins`` (labels shown),
        ``normalized`` (bool), ``ceiling`` (share per shown bin or None), ``curves``
        (``{label: float array, shape (n_shown, K)}``), ``k`` (``{label: k list}``), ``dropped``
        (labels of empty bins) and ``delta`` (``{label: float array, shape (n_shown,)}``: mean over k
        of the bin's contribution minus the iid's, for policies and the oracle; bars over all bins sum to
        AUC - AUC_iid; empty when the iid has no rarity rows).
    """
    sets = [c for c in comparison.curve_sets() if c.coverage_by_rarity]
    if not sets:
        return None
    n_bins = len(sets[0].coverage_by_rarity or [])
    sets = [c for c in sets if len(c.coverage_by_rarity or []) == n_bins]
    labels = sets[0].rarity_bins or [f"q{b + 1}" for b in range(n_bins)]
    rows = {c.label: np.array([_a(r) for r in c.coverage_by_rarity or []]) for c in sets}
    oracle = comparison.oracle
    ceiling: np.ndarray | None = None
    if oracle is not None and oracle.label in rows and (oracle.coverage[-1] or 0.0) >= 1.0 - 1e-9:
        ceiling = rows[oracle.label][:, -1]
    keep = np.ones(n_bins, dtype=bool) if ceiling is None else ceiling > 1e-12
    curves = {
        label: (r[keep] / ceiling[keep, None]) if ceiling is not None else r[keep]
        for label, r in rows.items()
    }
    delta: dict[str, np.ndarray] = {}
    iid = comparison.iid
    if iid is not None and iid.label in rows:
        base = np.nanmean(rows[iid.label], axis=1)
        for c in sets:
            if c.role != "iid":
                delta[c.label] = (np.nanmean(rows[c.label], axis=1) - base)[keep]
    return {
        "bins": [lab for lab, k in zip(labels, keep, strict=True) if k],
        "dropped": [lab for lab, k in zip(labels, keep, strict=True) if not k],
        "normalized": ceiling is not None,
        "ceiling": None if ceiling is None else ceiling[keep],
        "curves": curves,
        "k": {c.label: c.k for c in sets},
        "delta": delta,
    }


def plot_coverage_by_rarity(comparison: Comparison) -> Figure | None:
    """Common vs rare: coverage of each base-probability quantile bin, policies vs iid vs oracle.

    Top: one facet per bin (most common on the left), the share of that bin's strategies found by k.
    A policy that only avoids repeats gains in the common bins; one that finds genuinely rare
    strategies gains in the rare bins. Bottom: the AUC difference to iid split by bin (the bars of
    one sampler sum to AUC - AUC_iid), i.e. where each sampler's gain comes from.

    The facets share one axes (offset x ranges, one line per sampler with gaps between bins): it
    reads like small multiples with a shared y scale at a fraction of the drawing cost.

    Returns:
        The figure, or None when no curve set carries ``coverage_by_rarity``.
    """
    data = rarity_panels(comparison)
    if data is None or not data["bins"]:
        return None
    from matplotlib.transforms import blended_transform_factory

    bins: list[str] = data["bins"]
    n = len(bins)
    has_delta = bool(data["delta"])
    fig, axes = _figure(2 if has_delta else 1, 1, size=(max(7.0, 2.2 * n + 1.2), 7.4 if has_delta else 4.8))
    ax = axes[0, 0]
    ax.set_gid("rarity:facets")
    K = comparison.budget
    gap = max(1.0, 0.3 * K)
    offsets = [b * (K + gap) for b in range(n)]
    legend: dict[str, Any] = {}
    for c, style in _styled_sets(comparison):
        if c.label not in data["curves"]:
            continue
        k = np.asarray(data["k"][c.label], dtype=np.float64)
        rows = data["curves"][c.label]
        # One line per sampler across all facets; NaN breaks the line between facets.
        xs = np.concatenate([np.r_[off + k, np.nan] for off in offsets])
        ys = np.concatenate([np.r_[rows[b], np.nan] for b in range(n)])
        (line,) = ax.plot(xs, ys, label=c.label, **style)
        legend.setdefault(_legend_label(c), line)
    top = 1.0 if data["normalized"] else max(1e-9, *(np.nanmax(v) for v in data["curves"].values()))
    ax.set_ylim(-0.02, top * 1.05)
    ax.set_xlim(0.5, offsets[-1] + K + 0.5)
    head = blended_transform_factory(ax.transData, ax.transAxes)
    for b, (name, off) in enumerate(zip(bins, offsets, strict=True)):
        ax.text(off + (K + 1) / 2, 1.01, name, transform=head, ha="center", va="bottom", fontsize=9)
        if b:
            ax.axvline(off - gap / 2, color="0.6", linewidth=0.8)
    ticks = sorted({1, max(1, K // 2), K})
    ax.set_xticks([off + t for off in offsets for t in ticks], [str(t) for _ in offsets for t in ticks])
    ax.tick_params(axis="x", labelsize=8)
    ax.grid(True, axis="y", alpha=0.3)
    ax.set_xlabel("sample budget k, per base-probability quantile bin (left: most common)")
    ax.set_ylabel(
        "share of the bin's strategies found" if data["normalized"] else "coverage from the bin (found / M)"
    )
    if has_delta:
        bx = axes[1, 0]
        bx.set_gid("rarity:delta")
        deltas = [(c, s) for c, s in _styled_sets(comparison) if c.label in data["delta"]]
        width = 0.8 / max(len(deltas), 1)
        x = np.arange(n, dtype=np.float64)
        for j, (c, style) in enumerate(deltas):
            oracle = c.role == "oracle"
            bx.bar(
                x + (j - (len(deltas) - 1) / 2) * width,
                data["delta"][c.label],
                width * 0.92,
                label=c.label,
                facecolor="none" if oracle else style["color"],
                edgecolor="black" if oracle else style["color"],
                linestyle="--" if oracle else "-",
                alpha=1.0 if oracle else 0.75,
            )
        bx.axhline(0.0, color="0.3", linewidth=0.8)
        bx.set_xticks(x, bins)
        bx.set_ylabel("AUC - AUC_iid from the bin")
        bx.set_title(
            "where the gain over iid comes from (one sampler's bars sum to its AUC - AUC_iid)", fontsize=9
        )
        bx.grid(True, axis="y", alpha=0.3)
    if data["dropped"]:
        fig.text(0.005, 0.005, f"empty bins not shown: {', '.join(data['dropped'])}", fontsize=7, color="0.4")
    _legend_below(fig, list(legend.values()), list(legend))
    what = "coverage of common vs rare strategies (base-probability quantiles)"
    _suptitle(fig, _title(comparison, what, fig.get_figwidth()))
    return fig


def plot_latent(comparison: Comparison) -> Figure | None:
    """Latent-code coverage of router policies: a method diagnostic, drawn apart from strategy coverage.

    Returns:
        The figure, or None when no policy carries a latent curve.
    """
    latents = [(i, p.latent) for i, p in enumerate(comparison.policies) if p.latent is not None]
    if not latents:
        return None
    fig, axes = _figure(size=(7.0, 4.8))
    ax = axes[0, 0]
    for i, lat in latents:
        color = _POLICY_COLORS[i % len(_POLICY_COLORS)]
        codes = "" if lat.num_codes is None else f" ({lat.num_codes} codes)"
        ax.plot(lat.k, _a(lat.coverage), color=color, linewidth=2.0, label=f"{lat.label}{codes}")
        if lat.coverage_lo is not None and lat.coverage_hi is not None:
            ax.fill_between(
                lat.k, _a(lat.coverage_lo), _a(lat.coverage_hi), color=color, alpha=0.15, linewidth=0
            )
    ax.set_xlabel("sample budget k")
    ax.set_ylabel("latent-code coverage (distinct z / #codes)")
    ax.set_ylim(-0.02, 1.05)
    _budget_axis(ax, comparison.budget)
    _axes_legend_below(fig, ax)
    what = "router latent-code coverage (DIAGNOSTIC, not strategy coverage)"
    _suptitle(fig, _title(comparison, what, fig.get_figwidth()))
    return fig


def plot_compare(reports: Mapping[str, Report]) -> Figure:
    """Overlay several runs: one panel per task, each run's policies plus the first run's iid/oracle.

    Args:
        reports: ``{run label: report}``, in legend order.
    """
    tasks: list[str] = []
    for rep in reports.values():
        for comp in rep.comparisons:
            if comp.task not in tasks:
                tasks.append(comp.task)
    if not tasks:
        raise ValueError("no comparisons to overlay")
    fig, axes = _figure(1, len(tasks), size=(6.0 * len(tasks), 5.2))
    linestyles = ("-", "-.", ":", (0, (5, 1)))
    for ax, task in zip(axes[0], tasks, strict=True):
        drew_baselines = False
        budget = 1
        for r_i, (run_label, rep) in enumerate(reports.items()):
            for comp in rep.comparisons:
                if comp.task != task:
                    continue
                budget = max(budget, comp.budget)
                for p_i, pol in enumerate(comp.policies):
                    c = pol.curves
                    color = _POLICY_COLORS[(r_i * 3 + p_i) % len(_POLICY_COLORS)]
                    gain = (
                        "" if pol.gain is None or pol.gain.value is None else f", gain {pol.gain.value:.2f}"
                    )
                    ax.plot(
                        c.k,
                        _a(c.coverage),
                        color=color,
                        linestyle=linestyles[r_i % len(linestyles)],
                        linewidth=2.0,
                        label=f"{run_label}: {c.label}{gain}",
                    )
                if not drew_baselines:
                    for c in (comp.iid, comp.oracle):
                        if c is not None:
                            ax.plot(c.k, _a(c.coverage), label=f"{c.label} ({run_label})", **_style(c, 0))
                    drew_baselines = True
        ax.set_xlabel("sample budget k")
        ax.set_ylabel("strategy coverage C(k)")
        ax.set_ylim(-0.02, 1.05)
        _budget_axis(ax, budget)
        # Per panel (tasks differ in their runs), in the lower right where rising curves leave room.
        ax.legend(loc="lower right", fontsize=7, framealpha=0.85)
        ax.set_title("\n".join(_wrap(f"{task}: coverage across runs (K={budget})", 6.0, 10.0)), fontsize=10)
    return fig


def save_figure(fig: Figure, path: str | Path, *, dpi: int = DPI) -> Path:
    """Write ``fig`` as PNG (parent folders created)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    import matplotlib

    # Layout and drawing both happen inside savefig, so the text settings apply to both.
    with matplotlib.rc_context(_SAVE_RC):
        # No "Software" metadata: equal figures give equal bytes across matplotlib patch versions.
        fig.savefig(path, dpi=dpi, metadata={"Software": None}, pil_kwargs=_PNG_OPTIONS)
    # No fig.clear(): it re-initialises every axes (~5-10 ms each) only to drop it; an unreferenced
    # Agg figure (no pyplot registry) is freed by the garbage collector like any other object.
    return path


def render_report_plots(report: Report, out_dir: str | Path) -> dict[str, Path]:
    """Write every plot of ``report`` under ``out_dir/plots/``.

    Returns:
        ``{"<slug>/<plot>": path}`` with plot in coverage, coverage_by_rarity, novelty,
        time_to_coverage, valid_vs_raw, barcode, latent (those that apply), in that order.
    """
    out = Path(out_dir) / PLOTS_DIR
    files: dict[str, Path] = {}
    used: set[str] = set()
    for index, comp in enumerate(report.comparisons):
        slug = comp.slug if comp.slug not in used else f"{comp.slug}_{index}"
        used.add(slug)

        def _save(name: str, fig: Figure | None, slug: str = slug) -> None:
            if fig is not None:
                files[f"{slug}/{name}"] = save_figure(fig, out / f"{slug}_{name}.png")

        sets = comp.curve_sets()
        _save("coverage", plot_coverage(comp))
        _save("coverage_by_rarity", plot_coverage_by_rarity(comp))
        if any(c.novelty is not None or c.expected_new is not None for c in sets):
            _save("novelty", plot_novelty(comp))
        if any(c.time_to_coverage for c in sets):
            _save("time_to_coverage", plot_time_to_coverage(comp))
        if any(c.valid_coverage is not None for c in sets):
            _save("valid_vs_raw", plot_valid_vs_raw(comp))
        _save("barcode", plot_barcodes(comp))
        _save("latent", plot_latent(comp))
    return files
