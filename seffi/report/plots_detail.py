"""Detail figures of a comparison: strategy barcodes and common-vs-rare coverage (see plots.py)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from seffi.coverage.barcode import BARCODE_ROWS
from seffi.report.plots_style import (
    STYLE,
    _a,
    _blank_figure,
    finish,
    font,
    k_ticks,
    legend_below,
    legend_label,
    strategy_colors,
    styled_sets,
    suptitle,
    title,
)
from seffi.report.schema import Barcode, Comparison

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

# -- strategy barcodes ----------------------------------------------------------------------------------

# An id a reader can use as a row label: short, and not a hash (8+ hex digits).
_READABLE_ID = re.compile(r"^(?![0-9a-f]{8,}$).{1,8}$", re.IGNORECASE)


def row_labels(input_ids: Sequence[str]) -> tuple[list[str], str]:
    """Row tick labels and the y-axis label of a barcode.

    Short readable ids label their rows; hash-like or long ids are replaced by the row number
    (1-based, rows sorted by input id), so no tick shows an unreadable hash.

    Returns:
        ``(labels, ylabel)``.
    """
    if input_ids and all(_READABLE_ID.match(i) for i in input_ids):
        return list(input_ids), "input id (its first run)"
    return [str(i + 1) for i in range(len(input_ids))], "input # (sorted by id; its first run)"


def _draw_barcode(
    ax: Axes, barcode: Barcode, colors: Mapping[str, Any], max_rows: int, ylabels: bool
) -> None:
    """Draw one barcode as an RGB image (one rasterized artist, however many cells) + first-hit dots."""
    from matplotlib.colors import to_rgb

    rows = barcode.matrix[:max_rows]
    n_rows = max(len(rows), 1)
    width = max(max((len(r) for r in rows), default=1), 1)
    # Palette index: 0 = beyond the row, 1 = no match, 2 + j = strategy j.
    palette = np.array(
        [
            to_rgb(STYLE["beyond_row"]),
            to_rgb(STYLE["no_match"]),
            *(to_rgb(colors[s]) for s in barcode.strategies),
        ],
        dtype=np.float64,
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
    # Marker area follows the cell size, so dense barcodes (large K or many rows) are not covered in dots.
    fig_w, fig_h = ax.figure.get_figwidth(), ax.figure.get_figheight()
    cell_pt = 72.0 * min(ax.get_position().width * fig_w / width, ax.get_position().height * fig_h / n_rows)
    size = float(np.clip((0.45 * cell_pt) ** 2, 2.0, 30.0))
    ax.scatter(fx, fy, marker="o", s=size, facecolor="white", edgecolor="black", linewidth=0.7, zorder=3)
    ax.set_xlabel("sample index i")
    ax.set_xticks(k_ticks(width, 16, 8))
    labels, _ = row_labels(barcode.input_ids[:max_rows])
    # Every row labelled up to 32 rows; beyond, about 16 labels (rows at ~15 px each stay legible).
    step = 1 if len(rows) <= 32 else int(np.ceil(len(rows) / 16))
    ticks = [i for i in range(len(rows)) if i == 0 or (i + 1) % step == 0]
    ax.set_yticks(ticks, [labels[i] for i in ticks])
    if not ylabels:
        ax.tick_params(axis="y", labelleft=False)


def _barcode_legend(fig: Figure, colors: Mapping[str, Any]) -> None:
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles: list[Any] = [Patch(facecolor=c, edgecolor="0.5", linewidth=0.5) for c in colors.values()]
    labels = list(colors)
    handles.append(Patch(facecolor=STYLE["no_match"], edgecolor="0.5", linewidth=0.5))
    labels.append("no match")
    dot = {"marker": "o", "linestyle": "", "markerfacecolor": "white", "markeredgecolor": "black"}
    handles.append(Line2D([], [], **dot))
    labels.append("first appearance")
    legend_below(fig, handles, labels)


def _barcode_size(n_panels: int, width: int, n_rows: int) -> tuple[float, float]:
    panel = float(np.clip(1.0 + 0.22 * width, 2.4, 6.0))
    # ~0.25 in a row up to 24 rows, then shrinking to ~0.15 in (64 rows in a 12 in figure).
    height = float(np.clip(2.2 + 0.25 * min(n_rows, 24) + 0.15 * max(n_rows - 24, 0), 3.6, 12.5))
    return max(7.0, 1.2 + n_panels * panel), height


def _rows_note(n_shown: int, n_rows: int, n_runs: int | None) -> str:
    """How many runs the rows are, e.g. "16 of 64 runs shown" (the y label says which run)."""
    if n_runs is not None and n_runs > n_shown:
        return f"{n_shown} of {n_runs} runs shown"
    if n_rows > n_shown:
        return f"first {n_shown} of {n_rows} rows shown"
    return ""


def plot_barcode(
    barcode: Barcode,
    *,
    title: str = "strategy barcode",
    max_rows: int = BARCODE_ROWS,
    n_runs: int | None = None,
) -> Figure:
    """Strategy barcode: rows inputs, columns sample index, colour = strategy, dot at first appearance.

    Cells with no match are white; cells past a row's end are light grey. Only the first ``max_rows``
    rows are drawn (by default as many as a monitor keeps); the title says how many of ``n_runs``
    runs (when given) or of the barcode's rows that is.
    """
    rows = barcode.matrix[:max_rows]
    width = max((len(r) for r in rows), default=1)
    fig = _blank_figure(_barcode_size(1, width, len(rows)))
    ax = fig.subplots()
    colors = strategy_colors(barcode.strategies)
    _draw_barcode(ax, barcode, colors, max_rows, ylabels=True)
    ax.set_ylabel(row_labels(barcode.input_ids[:max_rows])[1])
    _barcode_legend(fig, colors)
    note = _rows_note(len(rows), len(barcode.matrix), n_runs)
    suptitle(fig, f"{title}, {note}" if note else title)
    return finish(fig)


def plot_barcodes(comparison: Comparison, *, max_rows: int = BARCODE_ROWS) -> Figure | None:
    """The barcodes of all policies of a comparison side by side (one panel each, shared colours).

    Panels share the input axis when the policies saw the same inputs in the same order, so the same
    row is the same input across panels and redundancy can be compared directly. Strategy colours come
    from `seffi.report.plots_style.strategy_colors`, never from the policy palette.

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
    colors = strategy_colors(names)
    same_rows = all(b.input_ids[:max_rows] == bars[0].input_ids[:max_rows] for b in bars)
    width = max(max((len(r) for r in b.matrix[:max_rows]), default=1) for b in bars)
    n_rows = max(len(b.matrix[:max_rows]) for b in bars)
    fig = _blank_figure(_barcode_size(len(bars), width, n_rows))
    axes = fig.subplots(1, len(bars), squeeze=False, sharey=same_rows)[0]
    notes = [
        _rows_note(len(b.matrix[:max_rows]), len(b.matrix), p.curves.n_runs)
        for p, b in zip(pols, bars, strict=True)
    ]
    shared = notes[0] if len(set(notes)) == 1 else ""
    for i, (ax, pol, bar, note) in enumerate(zip(axes, pols, bars, notes, strict=True)):
        _draw_barcode(ax, bar, colors, max_rows, ylabels=i == 0 or not same_rows)
        name = legend_label(pol.curves)
        ax.set_title(name if shared or not note else f"{name}\n{note}")
    axes[0].set_ylabel(row_labels(bars[0].input_ids[:max_rows])[1])
    _barcode_legend(fig, colors)
    what = "strategy barcodes" + (f", {shared}" if shared else "")
    suptitle(fig, f"{comparison.task}: {what}" if shared else title(comparison, what))
    return finish(fig)


# -- common vs rare strategies ----------------------------------------------------------------------------


def rarity_panels(comparison: Comparison) -> dict[str, Any] | None:
    """The numbers behind `plot_coverage_by_rarity` (also used by tests).

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

    Top: small multiples, one facet per base-probability quantile bin (most common on the left,
    shared y; a tick at every k up to K = 8), the share of that
    bin's strategies found by k. A policy that only avoids repeats gains in the common bins; one that
    finds genuinely rare strategies gains in the rare bins. Bottom: the AUC difference to iid split by
    bin (the bars of one sampler sum to AUC - AUC_iid), i.e. where each sampler's gain comes from.
    Each row has its own legend below it: lines for the facets, patches for the bars.

    Returns:
        The figure, or None when no curve set carries ``coverage_by_rarity``.
    """
    data = rarity_panels(comparison)
    if data is None or not data["bins"]:
        return None
    bins: list[str] = data["bins"]
    n = len(bins)
    has_delta = bool(data["delta"])
    fig = _blank_figure((max(7.0, 1.9 * n + 1.2), 7.8 if has_delta else 4.6))
    top_fig, bottom_fig = fig.subfigures(2, 1, height_ratios=[1.2, 1.0]) if has_delta else (fig, None)
    facets = top_fig.subplots(1, n, sharey=True, squeeze=False)[0]
    K = comparison.budget
    styled = [(c, s) for c, s in styled_sets(comparison) if c.label in data["curves"]]
    for b, (ax, name) in enumerate(zip(facets, bins, strict=True)):
        ax.set_gid(f"rarity:facet:{b}")
        for c, style in styled:
            ax.plot(data["k"][c.label], data["curves"][c.label][b], label=legend_label(c), **style)
        ax.set_title(name)
        ax.set_xlabel("sample budget k")
        ax.set_xlim(0.5, K + 0.5)
        ax.set_xticks(k_ticks(K, 8, 5))
        ax.grid(True, alpha=0.3)
    top = 1.0 if data["normalized"] else max(1e-9, *(np.nanmax(v) for v in data["curves"].values()))
    facets[0].set_ylim(-0.02, top * 1.05)
    facets[0].set_ylabel(
        "share of the bin's\nstrategies found" if data["normalized"] else "coverage from the bin\n(found / M)"
    )
    handles, labels = facets[0].get_legend_handles_labels()
    legend_below(top_fig, handles, labels)
    if bottom_fig is not None:
        bx = bottom_fig.subplots()
        bx.set_gid("rarity:delta")
        deltas = [(c, s) for c, s in styled if c.label in data["delta"]]
        width = 0.8 / max(len(deltas), 1)
        x = np.arange(n, dtype=np.float64)
        for j, (c, style) in enumerate(deltas):
            oracle = c.role == "oracle"
            bx.bar(
                x + (j - (len(deltas) - 1) / 2) * width,
                data["delta"][c.label],
                width * 0.92,
                label=legend_label(c),
                facecolor="none" if oracle else style["color"],
                edgecolor=style["color"],
                linestyle="--" if oracle else "-",
                linewidth=1.2 if oracle else 0.0,
                alpha=1.0 if oracle else 0.8,
            )
        bx.axhline(0.0, color="0.3", linewidth=0.8)
        bx.set_xticks(x, bins)
        bx.set_ylabel("AUC - AUC_iid\nfrom the bin")
        bx.set_title("where the gain over iid comes from (a sampler's bars sum to its AUC - AUC_iid)")
        bx.grid(True, axis="y", alpha=0.3)
        handles, labels = bx.get_legend_handles_labels()  # the bars' Rectangle patches
        legend_below(bottom_fig, handles, labels)
    if data["dropped"]:
        note = f"empty bins not shown: {', '.join(data['dropped'])}"
        fig.text(0.005, 0.005, note, fontsize=font("note"), color="0.4")
    suptitle(fig, title(comparison, "coverage of common vs rare strategies"))
    return finish(fig)
