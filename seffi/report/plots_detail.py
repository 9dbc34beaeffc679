"""Detail figures of a comparison: strategy barcodes and common-vs-rare coverage (see plots.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from seffi.report._plot_base import (
    _a,
    _blank_figure,
    _figure,
    _legend_below,
    _legend_label,
    _styled_sets,
    _suptitle,
    _title,
    _wrap,
)
from seffi.report.schema import Barcode, Comparison

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


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
