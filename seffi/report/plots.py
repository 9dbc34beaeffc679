"""The figures of a report: schema objects in, ``matplotlib.figure.Figure`` out (Agg canvas, no pyplot).

The look is defined once, in `STYLE`: policies take tab10 colours, the iid is grey dotted, the oracle
black dashed, a sanity-check policy (`is_sanity`) light grey dash-dot; strategies take a palette of
their own, so a colour never means a strategy in one figure and a policy in another.
[`plot_compare`][seffi.report.plots.plot_compare] overlays several runs (``seffi compare``).
"""

from __future__ import annotations

import functools
import io
import math
import re
import textwrap
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from seffi._convert import printable
from seffi._io import write_atomic
from seffi.coverage.barcode import BARCODE_ROWS
from seffi.errors import SeffiError
from seffi.report.schema import Barcode, Comparison, CurveSet, PolicyResult, Report

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure, SubFigure

STYLE: dict[str, Any] = {
    # Points, at 100 dpi.
    "font": {"title": 12.5, "panel": 11.0, "label": 11.0, "tick": 10.0, "legend": 9.5, "note": 9.0},
    # Grey is the iid's; pink is too close to a strategy colour.
    "policy_colors": tuple(f"tab:{c}" for c in "blue orange green red purple brown olive cyan".split()),
    "policy": {"linestyle": "-", "linewidth": 2.2},
    "iid": {"color": "0.35", "linestyle": ":", "linewidth": 2.4},
    "oracle": {"color": "black", "linestyle": "--", "linewidth": 1.7},
    "sanity": {"color": "0.62", "linestyle": "-.", "linewidth": 1.8},
    "band_alpha": 0.15,
    # Up to 7 strategies take Set2, more take tab20b + tab20c.
    "strategy_palette": "Set2",
    "strategy_palette_many": ("tab20b", "tab20c"),
    "no_match": "white",
    "beyond_row": "0.92",
}

#: A policy label that names a sanity check ("iid-sampler", "GRPO lr=0 (sanity)"): drawn as a baseline.
SANITY_LABEL = re.compile(r"^iid[-_ ]|\bsanity\b", re.IGNORECASE)
BUDGET = "sample budget $k$"
SAMPLE_INDEX = "sample index $i$"
AUC_GAIN = r"$\mathrm{AUC} - \mathrm{AUC}_{\mathrm{iid}}$"
PLOTS_DIR = "plots"
#: The file formats a figure is written in.
FORMATS = ("png", "pdf", "svg")
#: Resolution of the figures a run writes as it ends: a 7 in figure is 700 px wide.
DPI = 100
#: Resolution of ``seffi report`` and ``seffi compare`` PNGs.
PRINT_DPI = 300
#: Comparisons a report draws plots for (each costs ~2 s of CPU at print resolution).
PLOTTED_COMPARISONS = 20
#: Strategies a barcode legend names; it counts the others.
LEGEND_STRATEGIES = 24
# PNG zlib level 1: ~3x faster than the default 6 on these flat-colour plots, files a few % larger.
_PNG_OPTIONS = {"compress_level": 1}
# Unhinted text is as legible and ~13% faster; PDF fonts as TrueType (journals refuse Type 3); SVG ids
# from a fixed salt and no dates or versions (`_METADATA`): equal figures give equal bytes.
_SAVE_RC = {
    "text.hinting": "no_hinting",
    "figure.autolayout": False,
    "figure.constrained_layout.use": False,
    "pdf.fonttype": 42,
    "svg.hashsalt": "seffi",
}
_METADATA = {
    "png": {"Software": None},
    "pdf": {"Creator": None, "Producer": None, "CreationDate": None},
    "svg": {"Creator": None, "Date": None},
}


def font(role: str) -> float:
    """Font size (points) of a text role: title, panel, label, tick, legend or note."""
    return float(STYLE["font"][role])


def is_sanity(c: CurveSet) -> bool:
    """Whether a policy curve set is a sanity check (its label matches `SANITY_LABEL`)."""
    return c.role == "policy" and bool(SANITY_LABEL.search(c.label))


def policy_color(index: int) -> str:
    """The colour of the ``index``-th (non-sanity) policy."""
    return STYLE["policy_colors"][index % len(STYLE["policy_colors"])]


def styled_sets(comparison: Comparison) -> list[tuple[CurveSet, dict[str, Any]]]:
    """Every curve set of ``comparison`` with its line style; the first real policy is always blue."""
    out, n_policy = [], 0
    for c in comparison.curve_sets():
        if c.role in ("iid", "oracle") or is_sanity(c):
            style = dict(STYLE["sanity" if is_sanity(c) else c.role])
        else:
            style = {"color": policy_color(n_policy), **STYLE["policy"]}
            n_policy += 1
        out.append((c, style))
    return out


def _literal(value: str) -> str:
    """A name as literal figure text: control characters a space, ``$`` not mathtext."""
    return printable(value).replace("$", r"\$")


def figure_safe(comparison: Comparison) -> Comparison:
    """``comparison`` with every name drawn as typed, never parsed as mathtext."""

    def names(data: Any) -> Any:
        if isinstance(data, str):
            return _literal(data)
        if isinstance(data, list):
            return [names(v) for v in data]
        if isinstance(data, dict):
            return {k: names(v) for k, v in data.items()}
        return data

    return Comparison.model_validate(names(comparison.model_dump()))


def legend_label(c: CurveSet) -> str:
    """Legend name: the label, the method of a baseline, "(sanity check)" for a sanity policy."""
    if c.role != "policy":
        return f"{c.label} ({c.method})" if c.method else c.label
    if is_sanity(c) and "sanity" not in c.label.lower():
        return f"{c.label} (sanity check)"
    return c.label


def strategy_colors(names: Sequence[str]) -> dict[str, tuple[float, float, float]]:
    """``{strategy: RGB}``: the j-th name of a task's strategy list always gets the same colour."""
    import matplotlib
    from matplotlib.colors import to_rgb

    maps = [STYLE["strategy_palette"]] if len(names) <= 7 else STYLE["strategy_palette_many"]
    palette = [to_rgb(c) for n in maps for c in matplotlib.colormaps[n].colors]
    palette = palette[:7] if len(names) <= 7 else palette
    return {s: palette[j % len(palette)] for j, s in enumerate(names)}


def wrap(text: str, width_in: float, size: float | None = None) -> list[str]:
    """Split ``text`` into lines that fit ``width_in`` inches at font ``size`` (DejaVu Sans)."""
    size = font("title") if size is None else size
    # DejaVu Sans averages ~0.52 em per glyph on mixed-case text; 0.56 leaves a margin.
    chars = max(16, int(width_in * 72.0 / (0.56 * size)))
    return textwrap.wrap(text, chars, break_on_hyphens=False) or [""]


def title(comparison: Comparison, what: str) -> str:
    """The one title line of a comparison's figure: ``"<task>: <what> (<n> inputs)"``."""
    n = comparison.n_inputs
    return f"{comparison.task}: {what} ({n} input{'' if n == 1 else 's'})"


def suptitle(fig: Figure, text: str) -> None:
    """Set the figure title, wrapped to the figure width only when it would not fit."""
    lines = [line for part in text.split("\n") for line in wrap(part, fig.get_figwidth())]
    top = 1.0 - _PAD_IN / fig.get_figheight()
    fig.suptitle("\n".join(lines), fontsize=font("title"), y=top, va="top", gid=_SUPTITLE)


def legend_below(fig: Figure | SubFigure, handles: Sequence[Any], labels: Sequence[str]) -> None:
    """One legend under the axes of ``fig`` (a figure or subfigure), in as many columns as fit."""
    if not handles:
        return
    size = font("legend")
    root = fig.canvas.figure  # the root figure (get_figure(root=True) needs matplotlib 3.10)
    width_in = root.get_figwidth() * fig.bbox.width / root.bbox.width
    ncols = 1
    for n in range(len(labels), 1, -1):
        # Entries fill the columns top to bottom; a column is as wide as its longest entry:
        # handle and padding (~0.75 in) + text (~0.55 em per character).
        rows = -(-len(labels) // n)
        cols = [labels[i : i + rows] for i in range(0, len(labels), rows)]
        if sum(0.75 + max(map(len, col)) * 0.55 * size / 72.0 for col in cols) <= width_in - 0.2:
            ncols = len(cols)
            break
    fig.legend(handles, labels, loc="outside lower center", ncols=ncols, fontsize=size, frameon=False)


def k_ticks(budget: int, every_up_to: int, most: int) -> list[int]:
    """Ticks of a budget axis 1..K: every k up to ``every_up_to``, else 1 and a round step's multiples.

    The step is the smallest of 2, 4, 5, 10, 20, 40, 50, 100, ... giving at most ``most`` multiples.
    """
    if budget <= every_up_to:
        return list(range(1, budget + 1))
    steps = (base * 10**e for e in range(20) for base in (2, 4, 5, 10))
    step = next(s for s in steps if budget // s <= most)
    return [1, *range(step, budget + 1, step)]


def budget_axis(ax: Axes, budget: int, *, narrow: bool = False) -> None:
    """Axis 1..K with a light grid; fewer ticks on a ``narrow`` (< 4 in) axes."""
    ax.set_xlim(0.5, budget + 0.5)
    ax.set_xticks(k_ticks(budget, 8, 5) if narrow else k_ticks(budget, 16, 8))
    ax.grid(True, alpha=0.3)


def _corner_note(ax: Axes, lines: Sequence[str], **kwargs: Any) -> None:
    """Note text in the lower right corner (where rising coverage curves leave room)."""
    style = {"ha": "right", "va": "bottom", "fontsize": font("note"), "color": "0.2", **kwargs}
    box = {"facecolor": "white", "edgecolor": "none", "alpha": 0.8, "pad": 1.5}
    ax.text(0.98, 0.03, "\n".join(lines), transform=ax.transAxes, bbox=box, **style)


def finish(
    fig: Figure, text: str | None = None, legend: tuple[Sequence[Any], Sequence[str]] = ((), ())
) -> Figure:
    """Put the title ``text`` on ``fig``, ``legend`` (handles, labels) below it, and `STYLE`'s font sizes."""
    legend_below(fig, *legend)
    if text is not None:
        suptitle(fig, text)
    for ax in fig.axes:
        ax.tick_params(labelsize=font("tick"))
        ax.xaxis.label.set_fontsize(font("label"))
        ax.yaxis.label.set_fontsize(font("label"))
        if ax.get_title():
            # At a fixed height: no x tick labels sit above an axes here, so matplotlib's search
            # through every sibling's tick labels for room at each draw would find none.
            ax.set_title(ax.get_title(), fontsize=font("panel"), y=1.0)
    return fig


#: Space (inches) between the figure's edge and any text, and on each side of an axes' decorations.
_PAD_IN = 3 / 72
_SUPTITLE = "suptitle"
_MATHTEXT: dict[str, Any] = {}  # the first Agg renderer's mathtext parser, shared by all (`lay_out`)


def _decorations(ax: Axes, renderer: Any) -> tuple[float, float, float, float]:
    """How far (pixels) the tick labels, axis labels, title and texts of ``ax`` reach out of it (l, r, b, t).

    Each text is measured once; an axis label sits ``labelpad`` beyond its tick labels (as matplotlib
    draws it), so only its size is measured.
    """
    pos = ax.get_window_extent(renderer)
    x0, x1, y0, y1 = pos.x0, pos.x1, pos.y0, pos.y1
    texts = [ax.title, *ax.texts]
    for axis in (ax.xaxis, ax.yaxis):
        axis.get_majorticklabels()  # places the ticks and sets their labels
        lo, hi = sorted(axis.get_view_interval())
        locs = axis.get_majorticklocs()
        ticks = axis.get_major_ticks(len(locs))
        shown = [t for t, v in zip(ticks, locs, strict=True) if lo - 1e-9 <= v <= hi + 1e-9]
        labels = [lab for t in shown for lab in (t.label1, t.label2) if lab.get_visible() and lab.get_text()]
        boxes = [lab.get_window_extent(renderer) for lab in labels]
        inner = (min([b.x0 for b in boxes], default=x0), min([b.y0 for b in boxes], default=y0))
        texts += labels
        if axis.label.get_visible() and axis.label.get_text():
            size = axis.label.get_window_extent(renderer)
            gap = axis.labelpad * renderer.points_to_pixels(1.0)
            if axis is ax.xaxis:
                y0 = min(y0, min(inner[1], pos.y0) - gap - size.height)
            else:
                x0 = min(x0, min(inner[0], pos.x0) - gap - size.width)
    for t in texts:
        if t.get_visible() and t.get_text():
            b = t.get_window_extent(renderer)
            x0, x1, y0, y1 = min(x0, b.x0), max(x1, b.x1), min(y0, b.y0), max(y1, b.y1)
    return pos.x0 - x0, x1 - pos.x1, pos.y0 - y0, y1 - pos.y1


def lay_out(fig: Figure | SubFigure) -> None:
    """Place the axes of ``fig`` in their grid, leaving room for every decoration, title and legend.

    Each grid column is as wide as its axes' widest left and right decorations need, each row as
    tall as its top and bottom ones; the axes share what is left equally, under the figure title and
    above the figure legend (`legend_below`). Every text is measured once, which costs a fraction of
    matplotlib's constrained layout (it measures each tick label four times). It places the axes of
    a grid spec only: colorbars and twin axes (none in seffi's figures) are left where they are.
    """
    from matplotlib.axes import Axes
    from matplotlib.backends.backend_agg import RendererAgg
    from matplotlib.transforms import Bbox

    root = fig.canvas.figure  # the root figure (get_figure(root=True) needs matplotlib 3.10)
    renderer = root._get_renderer()
    if isinstance(renderer, RendererAgg):
        # matplotlib caches a label's mathtext parse per parser, and each figure's renderer has its own:
        # one parser for all of them parses "sample budget $k$" once per process, not once per figure.
        renderer.mathtext_parser = _MATHTEXT.setdefault("parser", renderer.mathtext_parser)
    for sub in fig.subfigs:
        lay_out(sub)
    axes = [ax for ax in fig.get_children() if isinstance(ax, Axes) and ax.get_subplotspec() is not None]
    if not axes:
        return
    pad = _PAD_IN * root.dpi
    box = fig.bbox
    top, bottom = box.y1, box.y0
    title = next((t for t in root.texts if t.get_gid() == _SUPTITLE), None)
    if title is not None:  # the figure's title, over a subfigure too
        top = min(top, title.get_window_extent(renderer).y0 - pad)
    for legend in fig.legends:
        bottom = max(bottom, legend.get_window_extent(renderer).y1 + pad)
    nrows, ncols = axes[0].get_subplotspec().get_gridspec().get_geometry()
    left, right = np.zeros(ncols), np.zeros(ncols)
    above, below = np.zeros(nrows), np.zeros(nrows)
    specs = [ax.get_subplotspec() for ax in axes]
    spans = [(s.rowspan.start, s.rowspan.stop - 1, s.colspan.start, s.colspan.stop - 1) for s in specs]
    for ax, (r0, r1, c0, c1) in zip(axes, spans, strict=True):
        out = _decorations(ax, renderer)
        left[c0] = max(left[c0], out[0] + pad)
        right[c1] = max(right[c1], out[1] + pad)
        below[r1] = max(below[r1], out[2] + pad)
        above[r0] = max(above[r0], out[3] + pad)
    width = (box.width - left.sum() - right.sum()) / ncols
    height = (top - bottom - above.sum() - below.sum()) / nrows
    if width <= 0 or height <= 0:  # the texts need more than the figure: keep the axes where they are
        warnings.warn("seffi plot: the figure is too small for its labels and legend", stacklevel=2)
        return
    xs = box.x0 + np.cumsum(left) + np.concatenate([[0.0], np.cumsum(right + width)[:-1]])
    ys = top - np.cumsum(above) - np.concatenate([[0.0], np.cumsum(below + height)[:-1]])
    to_fig = fig.transSubfigure.inverted()
    for ax, (r0, r1, c0, c1) in zip(axes, spans, strict=True):
        corners = [[xs[c0], ys[r1] - height], [xs[c1] + width, ys[r0]]]
        ax.set_position(to_fig.transform_bbox(Bbox(corners)))


@functools.cache
def _layout_engine() -> type:
    """The layout engine of seffi's figures (a class built on first use: matplotlib loads lazily)."""
    from matplotlib.layout_engine import LayoutEngine

    class GridLayout(LayoutEngine):
        """`lay_out` at each draw."""

        _adjust_compatible = False
        _colorbar_gridspec = False

        def execute(self, fig: Figure) -> None:
            lay_out(fig)

    return GridLayout


def _figure(size: tuple[float, float] = (7.0, 4.5)) -> Figure:
    """An empty Figure on its own Agg canvas (not pyplot: no global state, thread-safe)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    # At the save dpi, the layout pass and the final draw hit matplotlib's text-metrics cache.
    fig = Figure(figsize=size, dpi=DPI, layout=_layout_engine()())
    FigureCanvasAgg(fig)
    return fig


def _k_figure(
    comparison: Comparison,
    size: tuple[float, float],
    draw: Any,
    what: str,
    ylabel: str,
    *,
    xlabel: str = BUDGET,
    top: float | None = 1.05,
) -> Figure:
    """A one-axes figure over k = 1..K: ``draw(ax)`` (returns the legend or None), labels, title."""
    fig = _figure(size)
    ax = fig.subplots()
    legend = draw(ax)
    ax.set(xlabel=xlabel, ylabel=ylabel, ylim=(-0.02, top))
    budget_axis(ax, comparison.budget)
    return finish(fig, title(comparison, what), legend or ax.get_legend_handles_labels())


def _a(values: Sequence[float | None] | None) -> np.ndarray:
    """Per-k values (null = undefined) as a float array with NaN, which matplotlib leaves as gaps."""
    return np.array([np.nan if v is None else v for v in (values or [])], dtype=np.float64)


def _band(ax: Any, k: Sequence[int], lo: Any, hi: Any, color: str) -> bool:
    """Shade a curve's CI between ``lo`` and ``hi``; False without an interval."""
    if lo is None or hi is None:
        return False
    ax.fill_between(k, _a(lo), _a(hi), color=color, alpha=STYLE["band_alpha"], linewidth=0)
    return True


def _add_band_key(handles: list[Any], labels: list[str]) -> None:
    from matplotlib.patches import Patch

    handles.append(Patch(facecolor="0.5", alpha=2 * STYLE["band_alpha"], linewidth=0))
    labels.append("shaded: 95% CI")


def _gain_text(p: PolicyResult) -> str:
    g = p.gain
    if g is None:
        return ""
    if g.value is None:
        return ", gain n/a"
    flag = " (fragile)" if g.fragile else ""
    if g.lo is not None and g.hi is not None:
        return f", gain {g.value:.2f} [{g.lo:.2f}, {g.hi:.2f}]{flag}"
    return f", gain {g.value:.2f}{' [unbounded]' if g.unbounded else ''}{flag}"


def check_format(fmt: str) -> str:
    """``fmt`` when it is one of `FORMATS`; else one `SeffiError` line naming the choices."""
    if fmt not in FORMATS:
        raise SeffiError(f"unknown figure format {fmt!r}; choose one of {', '.join(FORMATS)}")
    return fmt


def save_figure(fig: Figure, path: str | Path, *, dpi: int = DPI) -> Path:
    """Write ``fig`` to a ``.png``, ``.pdf`` or ``.svg`` file (`SeffiError` for another suffix) at ``dpi``."""
    path = Path(path)
    fmt = path.suffix.lstrip(".").lower()
    if fmt not in FORMATS:
        raise SeffiError(f"cannot write a figure as {path.name!r}: use a .png, .pdf or .svg file")
    path.parent.mkdir(parents=True, exist_ok=True)
    import matplotlib

    with matplotlib.rc_context(_SAVE_RC):
        engine = fig.get_layout_engine()
        if engine is not None and fmt == "png":
            # savefig with a layout engine draws once with output disabled only to run the layout:
            # running it here and dropping the engine leaves one draw (equal bytes, ~20% faster).
            fig.set_dpi(dpi)
            engine.execute(fig)
            fig.set_layout_engine(None)  # _SAVE_RC turns off the rc layouts None would pick
        buf = io.BytesIO()
        extra = {"pil_kwargs": _PNG_OPTIONS} if fmt == "png" else {}
        fig.savefig(buf, format=fmt, dpi=dpi, metadata=_METADATA[fmt], **extra)
        write_atomic(path, buf.getvalue())
    return path


# An id a reader can use as a row label: short, and not a hash (8+ hex digits).
_READABLE_ID = re.compile(r"^(?![0-9a-f]{8,}$).{1,8}$", re.IGNORECASE)


def _row_labels(input_ids: Sequence[str]) -> tuple[list[str], str]:
    """``(row tick labels, y-axis label)``: short readable ids, else row numbers (1-based)."""
    if input_ids and all(_READABLE_ID.match(i) for i in input_ids):
        return list(input_ids), "input id (its first run)"
    return [str(i + 1) for i in range(len(input_ids))], "input # (sorted by id; its first run)"


def _draw_barcode(ax: Axes, barcode: Barcode, colors: Mapping[str, Any], ylabels: bool) -> None:
    """One barcode as an RGB image (one rasterized artist, however many cells) + first-hit dots."""
    from matplotlib.colors import to_rgb

    rows = barcode.matrix[:BARCODE_ROWS]
    n_rows = max(len(rows), 1)
    width = max(max((len(r) for r in rows), default=1), 1)
    grid = np.full((n_rows, width), -2, dtype=np.int64)  # -2 = beyond the row, -1 = no match
    for i, r in enumerate(rows):
        grid[i, : len(r)] = r
    # Colours of the strategies drawn only: the cost follows the cells, not the M declared.
    used, cell = np.unique(grid, return_inverse=True)
    fixed = {-2: STYLE["beyond_row"], -1: STYLE["no_match"]}
    rgb = [to_rgb(fixed[j] if j < 0 else colors[barcode.strategies[j]]) for j in used.tolist()]
    palette = np.round(np.array(rgb) * 255).astype(np.uint8)  # bytes: drawn as they are
    # 1-based columns so "sample index i" means the same here as in N(i) and C(k).
    extent = (0.5, width + 0.5, n_rows - 0.5, -0.5)
    ax.imshow(palette[cell.reshape(grid.shape)], aspect="auto", interpolation="nearest", extent=extent)
    fx, fy = [], []
    for i, r in enumerate(rows):
        seen: set[int] = set()
        for j, v in enumerate(r):
            # Prefer the recorded flag: a multi-match sample can be new through a strategy not shown.
            if barcode.new[i][j] if barcode.new is not None else v >= 0 and v not in seen:
                fx.append(j + 1)
                fy.append(i)
            seen.add(v)
    # Marker area follows the cell size, so dense barcodes are not covered in dots.
    pos, (fig_w, fig_h) = ax.get_position(), ax.figure.get_size_inches()
    cell_pt = 72.0 * min(pos.width * fig_w / width, pos.height * fig_h / n_rows)
    size = float(np.clip((0.45 * cell_pt) ** 2, 2.0, 30.0))
    ax.scatter(fx, fy, marker="o", s=size, facecolor="white", edgecolor="black", linewidth=0.7, zorder=3)
    ax.set_xlabel(SAMPLE_INDEX)
    ax.set_xticks(k_ticks(width, 16, 8))
    labels, _ = _row_labels(barcode.input_ids[:BARCODE_ROWS])
    step = 1 if len(rows) <= 32 else int(np.ceil(len(rows) / 16))  # every row up to 32, then ~16
    ticks = [i for i in range(len(rows)) if i == 0 or (i + 1) % step == 0]
    ax.set_yticks(ticks, [labels[i] for i in ticks])
    if not ylabels:
        ax.tick_params(axis="y", labelleft=False)


def _rows_note(barcode: Barcode, n_runs: int | None) -> str:
    """How many runs the rows are, e.g. "16 of 64 runs shown"."""
    n_shown = len(barcode.matrix[:BARCODE_ROWS])
    if n_runs is not None and n_runs > n_shown:
        return f"{n_shown} of {n_runs} runs shown"
    return f"first {n_shown} of {len(barcode.matrix)} rows shown" if len(barcode.matrix) > n_shown else ""


def plot_barcodes(comparison: Comparison) -> Figure | None:
    """Strategy barcodes of the policies side by side (None when no policy carries one).

    Rows are inputs, columns samples, colour the strategy, a dot its first appearance; only the first
    `BARCODE_ROWS` rows are drawn.
    """
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    pols = [p for p in comparison.policies if p.barcode is not None]
    if not pols:
        return None
    bars = [p.barcode for p in pols if p.barcode is not None]
    names = list(dict.fromkeys(s for b in bars for s in b.strategies))  # in order of first appearance
    colors = strategy_colors(names)
    same_rows = all(b.input_ids[:BARCODE_ROWS] == bars[0].input_ids[:BARCODE_ROWS] for b in bars)
    width = max(max((len(r) for r in b.matrix[:BARCODE_ROWS]), default=1) for b in bars)
    n_rows = max(len(b.matrix[:BARCODE_ROWS]) for b in bars)
    panel = float(np.clip(1.0 + 0.22 * width, 2.4, 6.0))
    # ~0.25 in a row up to 24 rows, then shrinking to ~0.15 in (64 rows in a 12 in figure).
    height = float(np.clip(2.2 + 0.25 * min(n_rows, 24) + 0.15 * max(n_rows - 24, 0), 3.6, 12.5))
    fig = _figure((max(7.0, 1.2 + len(bars) * panel), height))
    axes = fig.subplots(1, len(bars), squeeze=False, sharey=same_rows)[0]
    notes = [_rows_note(b, p.curves.n_runs) for p, b in zip(pols, bars, strict=True)]
    shared = notes[0] if len(set(notes)) == 1 else ""
    for i, (ax, pol, bar, note) in enumerate(zip(axes, pols, bars, notes, strict=True)):
        _draw_barcode(ax, bar, colors, ylabels=i == 0 or not same_rows)
        name = legend_label(pol.curves)
        ax.set_title(name if shared or not note else f"{name}\n{note}")
    axes[0].set_ylabel(_row_labels(bars[0].input_ids[:BARCODE_ROWS])[1])
    seen = {b.strategies[j] for b in bars for r in b.matrix[:BARCODE_ROWS] for j in set(r) if j >= 0}
    drawn = [s for s in names if s in seen]
    named = drawn[:LEGEND_STRATEGIES]
    handles: list[Any] = [Patch(facecolor=colors[s], edgecolor="0.5", linewidth=0.5) for s in named]
    labels = list(named)
    if len(drawn) > len(named):
        handles.append(Line2D([], [], linestyle=""))
        labels.append(f"+ {len(drawn) - len(named)} more strategies")
    dot = {"marker": "o", "linestyle": "", "markerfacecolor": "white", "markeredgecolor": "black"}
    handles += [Patch(facecolor=STYLE["no_match"], edgecolor="0.5", linewidth=0.5), Line2D([], [], **dot)]
    what = "strategy barcodes" + (f", {shared}" if shared else "")
    text = f"{comparison.task}: {what}" if shared else title(comparison, what)
    return finish(fig, text, (handles, [*labels, "no match", "first appearance"]))


def rarity_panels(comparison: Comparison) -> dict[str, Any] | None:
    """The numbers behind `plot_coverage_by_rarity` (None without ``coverage_by_rarity``).

    Each row is the coverage a base-probability quantile bin contributes (row 0 = most common); when
    the oracle reaches full coverage at K, rows are divided by the oracle's at K and empty bins
    dropped. ``delta`` is each bin's mean contribution minus the iid's.
    """
    sets = [c for c in comparison.curve_sets() if c.coverage_by_rarity]
    if not sets:
        return None
    n_bins = len(sets[0].coverage_by_rarity or [])
    sets = [c for c in sets if len(c.coverage_by_rarity or []) == n_bins]
    labels = sets[0].rarity_bins or [f"q{b + 1}" for b in range(n_bins)]
    rows = {c.label: np.array([_a(r) for r in c.coverage_by_rarity or []]) for c in sets}
    oracle, iid = comparison.oracle, comparison.iid
    ceiling: np.ndarray | None = None
    if oracle is not None and oracle.label in rows and (oracle.coverage[-1] or 0.0) >= 1.0 - 1e-9:
        ceiling = rows[oracle.label][:, -1]
    keep = np.ones(n_bins, dtype=bool) if ceiling is None else ceiling > 1e-12
    curves = {
        lab: r[keep] / ceiling[keep, None] if ceiling is not None else r[keep] for lab, r in rows.items()
    }
    delta: dict[str, np.ndarray] = {}
    if iid is not None and iid.label in rows:
        base = np.nanmean(rows[iid.label], axis=1)
        delta = {c.label: (np.nanmean(rows[c.label], axis=1) - base)[keep] for c in sets if c.role != "iid"}
    return {
        "bins": [lab for lab, k in zip(labels, keep, strict=True) if k],
        "dropped": [lab for lab, k in zip(labels, keep, strict=True) if not k],
        "normalized": ceiling is not None,
        "curves": curves,
        "k": {c.label: c.k for c in sets},
        "delta": delta,
    }


def plot_coverage_by_rarity(comparison: Comparison) -> Figure | None:
    """Common vs rare: a facet per base-probability bin, and AUC - AUC_iid split by bin below.

    None when no curve set carries ``coverage_by_rarity``.
    """
    data = rarity_panels(comparison)
    if data is None or not data["bins"]:
        return None
    bins: list[str] = data["bins"]
    n = len(bins)
    has_delta = bool(data["delta"])
    fig = _figure((max(7.0, 1.9 * n + 1.2), 7.8 if has_delta else 4.6))
    top_fig, bottom_fig = fig.subfigures(2, 1, height_ratios=[1.2, 1.0]) if has_delta else (fig, None)
    facets = top_fig.subplots(1, n, sharey=True, squeeze=False)[0]
    styled = [(c, s) for c, s in styled_sets(comparison) if c.label in data["curves"]]
    for b, (ax, name) in enumerate(zip(facets, bins, strict=True)):
        ax.set_gid(f"rarity:facet:{b}")
        for c, style in styled:
            ax.plot(data["k"][c.label], data["curves"][c.label][b], label=legend_label(c), **style)
        ax.set(title=name, xlabel=BUDGET)
        budget_axis(ax, comparison.budget, narrow=True)
    top = 1.0 if data["normalized"] else max(1e-9, *(np.nanmax(v) for v in data["curves"].values()))
    facets[0].set_ylim(-0.02, top * 1.05)
    facets[0].set_ylabel(
        "share of the bin's\nstrategies found" if data["normalized"] else "coverage from the bin\n(found / M)"
    )
    legend_below(top_fig, *facets[0].get_legend_handles_labels())
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
        bx.set_ylabel(f"{AUC_GAIN}\nfrom the bin")
        bx.set_title(f"where the gain over iid comes from (a sampler's bars sum to its {AUC_GAIN})")
        bx.grid(True, axis="y", alpha=0.3)
        legend_below(bottom_fig, *bx.get_legend_handles_labels())
    if data["dropped"]:
        note = f"empty bins not shown: {', '.join(data['dropped'])}"
        fig.text(0.005, 0.005, note, fontsize=font("note"), color="0.4")
    return finish(fig, title(comparison, "coverage of common vs rare strategies"))


_EVAL_LABEL = re.compile(r"^(?P<base>.+)@(?P<step>\d+)$")
#: Markers that tell a run's policies apart (its first policy has none), the colour being the run's.
_POLICY_MARKERS = (None, "s", "^", "D", "v", "P", "X")


class IncompatibleRuns(SeffiError):
    """Runs that cannot share one panel (a task measured at different budgets K)."""


def check_overlay(reports: Mapping[str, Report]) -> None:
    """Raise `IncompatibleRuns` (one line naming the task and each run's K) when budgets differ on a task."""
    budgets: dict[str, dict[str, int]] = {}
    for run, rep in reports.items():
        for comp in rep.comparisons:
            budgets.setdefault(comp.task, {}).setdefault(run, comp.budget)
    for task, per_run in budgets.items():
        if len(set(per_run.values())) > 1:
            which = ", ".join(f"K={k} in {printable(run)}" for run, k in per_run.items())
            raise IncompatibleRuns(
                f"cannot overlay {printable(task)}: the runs use different budgets ({which}); "
                "coverage and AUC at different K do not compare — compare runs of one K"
            )


def _same_curves(curves: Sequence[CurveSet | None]) -> bool:
    """Whether every run's baseline is the same curve (same k, coverage equal to 1e-12)."""
    first = curves[0]
    return all(
        c is not None
        and first is not None
        and list(c.k) == list(first.k)
        and np.allclose(_a(c.coverage), _a(first.coverage), rtol=0.0, atol=1e-12, equal_nan=True)
        for c in curves
    )


def _gain_notes(ax: Axes, lines: Sequence[tuple[str, str]]) -> None:
    """Gain notes in the lower right corner: one ``(text, colour)`` line per run and policy."""
    from matplotlib.offsetbox import AnchoredOffsetbox, TextArea, VPacker

    rows = [TextArea(text, textprops={"color": color, "fontsize": font("note")}) for text, color in lines]
    child = VPacker(children=rows, align="right", pad=0, sep=2)
    box = AnchoredOffsetbox(loc="lower right", child=child, pad=0.3, borderpad=0.5, frameon=True)
    box.patch.set(facecolor="white", edgecolor="none", alpha=0.8)
    box.set_gid("compare:gains")
    ax.add_artist(box)


def plot_compare(reports: Mapping[str, Report]) -> Figure:
    """Several runs overlaid: one axes per task, a colour per run, each run against its own baselines.

    A run's policies take its colour (further policies markers), its iid and oracle too; a baseline
    every run shares is drawn once, grey or black. The gains sit in the lower right corner.

    Args:
        reports: ``{run label: report}``; runs take the policy colours in this order.

    Raises:
        IncompatibleRuns: two runs measured one task at different budgets.
        ValueError: no run holds a comparison.
    """
    from matplotlib.lines import Line2D

    check_overlay(reports)  # names as given, for its message
    reports = {
        _literal(run): rep.model_copy(update={"comparisons": [figure_safe(c) for c in rep.comparisons]})
        for run, rep in reports.items()
    }
    tasks = list(dict.fromkeys(comp.task for rep in reports.values() for comp in rep.comparisons))
    if not tasks:
        raise ValueError("no comparisons to overlay")
    run_color = {run: policy_color(i) for i, run in enumerate(reports)}
    # A run's policies, in order of first appearance over its tasks: the j-th takes the j-th marker.
    markers: dict[tuple[str, str], str | None] = {}
    for run, rep in reports.items():
        pols = (p for c in rep.comparisons for p in c.policies if not is_sanity(p.curves))
        for j, label in enumerate(dict.fromkeys(p.label for p in pols)):
            markers[(run, label)] = _POLICY_MARKERS[j % len(_POLICY_MARKERS)]
    n = len(tasks)
    ncols = 2 if n == 4 else min(n, 3)
    nrows = -(-n // ncols)
    fig = _figure((max(7.0, 0.4 + 4.2 * ncols), 1.6 + 0.2 * len(reports) + 3.3 * nrows))
    grid = fig.subplots(nrows, ncols, squeeze=False).ravel()
    for ax in grid[n:]:
        ax.remove()  # a task grid's unused slots: no empty panel
    legend: dict[str, Any] = {}
    own = {"iid": False, "oracle": False}  # some task draws each run's own baseline
    for i, (ax, task) in enumerate(zip(grid, tasks, strict=False)):
        ax.set_gid(f"compare:{task}")
        comps = {run: c for run, rep in reports.items() for c in rep.comparisons if c.task == task}
        notes: list[tuple[str, str]] = []
        for run, comp in comps.items():
            color = run_color[run]
            for pol in comp.policies:
                c = pol.curves
                if is_sanity(c):
                    look = {**STYLE["sanity"], "color": color, "linewidth": 1.3}
                else:
                    look = {
                        **STYLE["policy"],
                        "color": color,
                        "marker": markers[(run, c.label)],
                        "markersize": 5,
                    }
                label = f"{run}: {legend_label(c)}"
                legend.setdefault(label, ax.plot(c.k, _a(c.coverage), label=label, **look)[0])
                if not is_sanity(c):
                    _band(ax, c.k, c.coverage_lo, c.coverage_hi, color)
                if pol.gain is not None:
                    notes.append((f"{run}, {c.label}: {_gain_text(pol).removeprefix(', ')}", color))
        for role in ("iid", "oracle"):
            curves = [getattr(comp, role) for comp in comps.values()]
            if _same_curves(curves):
                ax.plot(curves[0].k, _a(curves[0].coverage), label=role, **STYLE[role])  # type: ignore[union-attr]
                continue
            for run, c in zip(comps, curves, strict=True):
                if c is not None:
                    ax.plot(
                        c.k,
                        _a(c.coverage),
                        label=f"{run}: {role}",
                        **{**STYLE[role], "color": run_color[run]},
                    )
                    own[role] = True
        if notes:
            _gain_notes(ax, notes)
        budget = next(iter(comps.values())).budget
        budget_axis(ax, budget, narrow=ncols > 1)
        ax.set(ylim=(-0.02, 1.05), title=f"{task} (K = {budget})")
        if i % ncols == 0:
            ax.set_ylabel("strategy coverage $C(k)$")
        else:
            ax.tick_params(axis="y", labelleft=False)
        if i + ncols >= n:  # no axes below this one
            ax.set_xlabel(BUDGET)
    for role, what in (("iid", "dotted"), ("oracle", "dashed")):
        mine = f"{what}; in a run's colour: that run's own"
        legend[f"{role} ({mine})" if own[role] else f"{role} (every run's)"] = Line2D([], [], **STYLE[role])
    handles, labels = list(legend.values()), list(legend)
    _add_band_key(handles, labels)
    runs = f"{len(reports)} run{'s' if len(reports) > 1 else ''}"
    return finish(fig, f"strategy coverage of {runs}, one panel per task", (handles, labels))


def eval_series(comparison: Comparison) -> list[tuple[int | None, PolicyResult]]:
    """The periodic evaluations of a comparison, oldest first: ``(step, policy)``.

    Earlier evaluations carry a ``<label>@<step>`` label; the final one keeps the plain ``<label>`` and
    comes last with step None. Empty with fewer than two ``@`` lines.
    """
    groups: dict[str, list[tuple[int, PolicyResult]]] = {}
    for pol in comparison.policies:
        if m := _EVAL_LABEL.match(pol.label):
            groups.setdefault(m["base"], []).append((int(m["step"]), pol))
    if not groups:
        return []
    base, items = max(groups.items(), key=lambda kv: len(kv[1]))
    if len(items) < 2:
        return []
    out: list[tuple[int | None, PolicyResult]] = sorted(items, key=lambda t: t[0])
    return out + [(None, p) for p in comparison.policies if p.label == base]


def plot_gain_vs_step(comparison: Comparison) -> Figure | None:
    """Gain vs iid of each periodic evaluation against its training step, with its 95% CI.

    The final evaluation sits one step-spacing on, at "final"; None with fewer than 3 evaluations.
    """
    series = eval_series(comparison)
    if len(series) < 3:
        return None
    steps = np.array([s for s, _ in series if s is not None], dtype=np.float64)
    spacing = float(np.median(np.diff(steps))) if steps.size > 1 else max(1.0, float(steps[0]))
    xs = [float(s) if s is not None else float(steps[-1] + spacing) for s, _ in series]
    fig = _figure((7.0, 4.6))
    ax = fig.subplots()
    gains = [pol.gain for _, pol in series]
    val = [np.nan if g is None or g.value is None else g.value for g in gains]
    lo = [v if g is None or g.lo is None else g.lo for v, g in zip(val, gains, strict=True)]
    hi = [v if g is None or g.hi is None else g.hi for v, g in zip(val, gains, strict=True)]
    missing = [
        f"{pol.label}: {'no gain' if pol.gain is None else pol.gain.reason}"
        for _, pol in series
        if pol.gain is None or pol.gain.value is None
    ]
    color = policy_color(0)
    ax.fill_between(xs, lo, hi, color=color, alpha=STYLE["band_alpha"] + 0.05, linewidth=0, label="95% CI")
    ax.plot(xs, val, color=color, marker="o", linewidth=STYLE["policy"]["linewidth"], label="gain vs iid")
    ax.axhline(0.0, **STYLE["iid"], label="iid (0)")
    ax.axhline(1.0, **STYLE["oracle"], label="oracle (1)")
    if len(xs) <= 12:
        ticks = [f"{int(x):,}" if s is not None else "final" for x, (s, _) in zip(xs, series, strict=True)]
        ax.set_xticks(xs, ticks, rotation=30)
    xlabel = "training step of the evaluation"
    if missing:  # under the axis, where the layout makes room for it
        note = "gain undefined: " + "; ".join(missing)
        xlabel += "\n" + "\n".join(wrap(note, fig.get_figwidth() - 0.5, font("label")))
    ax.set(xlabel=xlabel, ylabel="gain vs iid (0 = iid, 1 = oracle)")
    ax.grid(True, alpha=0.3)
    # Below the axes: inside, the oracle's line at 1 would run through the legend's text.
    text = title(comparison, f"gain over training ({len(series)} evaluations)")
    return finish(fig, text, ax.get_legend_handles_labels())


ORACLE_NOTE = (
    "note: the oracle is not a pointwise upper bound; a sampler whose traces match several strategies "
    "(or that is lucky at small $k$) can sit above it at some $k$"
)


def oracle_exceeded(comparison: Comparison, *, tol: float = 1e-9) -> list[int]:
    """The budgets k where some policy's coverage is above the oracle's (multi-strategy traces, luck)."""
    oracle = comparison.oracle
    if oracle is None:
        return []
    ref = dict(zip(oracle.k, _a(oracle.coverage), strict=True))
    out = {
        int(k)
        for p in comparison.policies
        for k, v in zip(p.curves.k, _a(p.curves.coverage), strict=True)
        if (o := ref.get(k)) is not None and np.isfinite(v) and np.isfinite(o) and v > o + tol
    }
    return sorted(out)


def _mark_extrapolated(ax: Any, c: CurveSet, y: Sequence[float | None], style: dict[str, Any]) -> None:
    """Draw a curve's extrapolated part (an iid baseline beyond its samples) dashed, marked by a rule."""
    ext = np.asarray(getattr(c, "extrapolated", None) or [], dtype=bool)
    if not ext.any():
        return
    first = int(np.argmax(ext))
    k, v = np.asarray(c.k)[max(first - 1, 0) :], _a(y)[max(first - 1, 0) :]
    width = float(style.get("linewidth", 1.8))
    # A white line under a dashed one of the curve's colour turns the solid stretch dashed.
    ax.plot(k, v, color="white", linewidth=width + 0.8, label="_nolegend_")
    ax.plot(
        k, v, label="_nolegend_", gid="extrapolated", color=style["color"], linestyle="--", linewidth=width
    )
    ax.axvline(c.k[first], color="0.6", linestyle=":", linewidth=0.8)
    note = f" {c.label} extrapolated"
    ax.text(c.k[first], 0.01, note, fontsize=font("note"), color="0.35", ha="left", va="bottom")


def plot_coverage(comparison: Comparison, *, valid: bool = False) -> Figure:
    """Main figure: coverage C(k) with CI bands, policies vs iid vs oracle (``valid``: valid-only coverage).

    The legend gives each sampler's AUC and each policy's gain vs iid with CI; a note says when a
    policy is above the oracle. Earlier evaluations of a periodic series are thin lines without bands.
    """
    gains = {id(p.curves): _gain_text(p) for p in comparison.policies}
    series = eval_series(comparison)
    faded = {id(p.curves) for _, p in series[:-1]} if len(series) >= 3 else set()

    def draw(ax: Axes) -> tuple[list[Any], list[str]]:
        banded = False
        for c, style in styled_sets(comparison):
            y = c.valid_coverage if valid else c.coverage
            lo, hi = (c.valid_coverage_lo, c.valid_coverage_hi) if valid else (c.coverage_lo, c.coverage_hi)
            if y is None:
                continue
            if id(c) in faded:
                ax.plot(c.k, _a(y), color=style["color"], linewidth=0.9, alpha=0.55, label=c.label)
                continue
            auc = c.valid_auc if valid else c.auc
            label = legend_label(c) + ("" if auc is None else f": AUC {auc:.3f}")
            label += "" if valid else gains.get(id(c), "")
            marker = "o" if len(c.k) <= 12 and c.role == "policy" and not is_sanity(c) else None
            ax.plot(c.k, _a(y), label=label, marker=marker, markersize=4, **style)
            _mark_extrapolated(ax, c, y, style)
            # Bands for the policies and the iid only: a sanity check's band would cover the iid's.
            if not is_sanity(c):
                banded = _band(ax, c.k, lo, hi, style["color"]) or banded
        above = [] if valid else oracle_exceeded(comparison)
        if above:
            ks = ", ".join(str(k) for k in above[:6]) + (", …" if len(above) > 6 else "")
            note = [*wrap(ORACLE_NOTE, 4.0, font("note")), f"(here: $k$ = {ks})"]
            _corner_note(ax, note, gid="oracle-note")
        handles, labels = ax.get_legend_handles_labels()
        if banded:
            _add_band_key(handles, labels)
        return handles, labels

    ylabel = "valid-strategy coverage" if valid else r"strategy coverage $C(k) = \mathbb{E}\,|S_k|\,/\,M$"
    what = "valid coverage" if valid else "strategy coverage"
    return _k_figure(comparison, (7.0, 5.0), draw, what, ylabel, xlabel=f"{BUDGET} (samples per input)")


#: The last coverage figure written (its comparison's JSON, format and dpi) and its bytes: a run's final
#: W&B chart image and its report's coverage plot show the same comparison, which is then drawn once.
_last_coverage: tuple[str, bytes] | None = None


def save_coverage(comparison: Comparison, path: str | Path, *, dpi: int = DPI) -> Path:
    """Write `plot_coverage` of ``comparison`` to ``path``, reusing the previous call's bytes when equal."""
    global _last_coverage
    path = Path(path)
    key = f"{path.suffix}@{dpi}:{comparison.model_dump_json()}"
    if _last_coverage is not None and _last_coverage[0] == key:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, _last_coverage[1])
        return path
    save_figure(plot_coverage(comparison), path, dpi=dpi)
    _last_coverage = (key, path.read_bytes())
    return path


def remember_coverage(comparison: Comparison, path: str | Path, *, dpi: int = DPI) -> None:
    """Make ``path``, `plot_coverage` of ``comparison`` drawn elsewhere, the figure `save_coverage` reuses."""
    global _last_coverage
    path = Path(path)
    _last_coverage = (f"{path.suffix}@{dpi}:{comparison.model_dump_json()}", path.read_bytes())


def plot_novelty(comparison: Comparison) -> Figure:
    """Marginal novelty N(i) = Pr[sample i reveals a new strategy] (expected new count if that is all)."""

    def draw(ax: Axes) -> None:
        for c, style in styled_sets(comparison):
            y = c.novelty if c.novelty is not None else c.expected_new
            if y is not None:
                suffix = "" if c.novelty is not None else " (expected # new)"
                ax.plot(c.k, _a(y), label=legend_label(c) + suffix, **style)

    ylabel = r"novelty $N(i) = \Pr[\mathrm{sample}\ i\ \mathrm{is\ new}]$"
    return _k_figure(comparison, (7.0, 4.8), draw, "marginal novelty", ylabel, xlabel=SAMPLE_INDEX, top=None)


def _tau_groups(sets: Sequence[CurveSet], taus: Sequence[float], m: int | None) -> list[list[float]]:
    """Group thresholds whose T is the same for every run: equal ceil(tau * M), else equal numbers."""

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


def _merged_note(group: Sequence[float], m: int | None) -> str:
    """Why thresholds share a panel, e.g. "(M = 4: 80% coverage needs all 4)"."""
    if not m:
        return "(equal for every sampler here)"
    need = math.ceil(group[0] * m - 1e-9)
    return f"(M = {m}: {group[0]:.0%} coverage needs {f'all {m}' if need == m else f'{need} of {m}'})"


def plot_time_to_coverage(comparison: Comparison, taus: Sequence[float] = (0.8, 1.0)) -> Figure:
    """Survival Pr[T_tau > k] per tau, plus a box panel of per-run T (censored runs in a band at K+1).

    Thresholds that give the same T for every sampler share one panel; a censored median is marked
    with a triangle.
    """
    from matplotlib.lines import Line2D

    styled = styled_sets(comparison)
    groups = _tau_groups([c for c, _ in styled], taus, comparison.num_strategies)
    budget = comparison.budget
    fig = _figure((min(10.0, 4.0 * (len(groups) + 1)), 4.8))
    axes = fig.subplots(1, len(groups) + 1, squeeze=False)[0]
    names = ["$" + " = ".join(f"T_{{{tau:g}}}" for tau in g) + "$" for g in groups]  # $T_{0.8} = T_{1}$
    legend: dict[str, Any] = {}
    for ax, group, name in zip(axes[:-1], groups, names, strict=True):
        tau = group[0]
        for c, style in styled:
            t = c.ttc(tau)
            if t is not None and t.survival is not None:
                (line,) = ax.step(c.k, _a(t.survival), where="post", label=legend_label(c), **style)
                legend.setdefault(legend_label(c), line)
        # A thin solid line (dotted and dashed mean the baselines here), labelled below its left end.
        ax.axhline(0.5, color="0.6", linewidth=0.9)
        at = {"xycoords": ("axes fraction", "data"), "xytext": (3, -3), "textcoords": "offset points"}
        ax.annotate("median", (0.0, 0.5), ha="left", va="top", fontsize=font("note"), color="0.4", **at)
        merged = f"\n{_merged_note(group, comparison.num_strategies)}" if len(group) > 1 else ""
        ylabel = f"$\\Pr[T_{{{tau:g}}} > k]$  (below {tau:.0%} coverage)"
        ax.set(xlabel=BUDGET, ylabel=ylabel, ylim=(-0.02, 1.05), title=f"survival of {name}{merged}")
        budget_axis(ax, budget, narrow=True)
    box_ax = axes[-1]
    data, labels, colors = [], [], []
    for c, style in styled:
        for group, name in zip(groups, names, strict=True):
            t = c.ttc(group[0])
            if t is not None and t.values:
                data.append([budget + 1 if v is None else v for v in t.values])  # censored at K+1
                labels.append(c.label if len(groups) == 1 else f"{c.label} {name}")
                colors.append(style["color"])
    if data:
        box_ax.axhspan(budget + 0.5, budget + 1.5, color="0.88", linewidth=0, zorder=0, gid="censored")
        parts = box_ax.boxplot(data, patch_artist=True, widths=0.6)
        # One slanted line per box when thresholds split the boxes: two-line labels would collide.
        slant = {} if len(groups) == 1 else {"rotation": 45, "ha": "right", "rotation_mode": "anchor"}
        box_ax.set_xticks(range(1, len(labels) + 1), labels, **slant)
        # Medians in the series colour, above the caps: the default orange reads as the second policy.
        for patch, median, color in zip(parts["boxes"], parts["medians"], colors, strict=True):
            patch.set(facecolor=color, alpha=0.35)
            median.set(color=color, linewidth=2.2, zorder=4)
        mark = {"marker": "^", "markersize": 9, "markeredgecolor": "black", "linestyle": ""}
        censored = [i for i, d in enumerate(data) if np.median(d) >= budget + 1]
        for i in censored:
            box_ax.plot(
                i + 1,
                budget + 1,
                color=colors[i],
                markeredgewidth=0.8,
                zorder=5,
                gid="censored-median",
                **mark,
            )
        if censored:
            legend[f"median censored (> K = {budget})"] = Line2D([], [], color="0.6", **mark)
        box_ax.set_ylim(min(0.5, min(min(d) for d in data) - 0.5), budget + 1.5)
        # Budget ticks, none closer to K+1 than ~8% of the axis, and "> K" at K+1 (the censored runs).
        ticks = [t for t in k_ticks(budget, 8, 5) if budget + 1 - t >= max(1.0, 0.08 * (budget + 1))]
        box_ax.set_yticks([*ticks, budget + 1], [*map(str, ticks), f"$>{budget}$"])
    else:
        box_ax.text(0.5, 0.5, "no per-run values", ha="center", va="center", transform=box_ax.transAxes)
    what = names[0] if len(groups) == 1 else "$T$"
    box_ax.set(
        ylabel=f"samples needed {what}\n(shaded: censored, not reached by $K$)", title=f"{what} per run"
    )
    box_ax.grid(True, axis="y", alpha=0.3)
    finish(fig, title(comparison, "time to coverage"), (list(legend.values()), list(legend)))
    box_ax.tick_params(axis="x", labelsize=font("note"))  # one label per (sampler, threshold)
    return fig


def plot_valid_vs_raw(comparison: Comparison) -> Figure:
    """Raw coverage (solid) vs valid-only coverage (dotted): a gap is earned by incorrect solutions."""

    def draw(ax: Axes) -> tuple[list[Any], list[str]]:
        handles: list[Any] = []
        labels: list[str] = []
        for c, style in styled_sets(comparison):
            # Line style means raw vs valid here, so every sampler is solid/dotted; colour names it.
            handles += ax.plot(c.k, _a(c.coverage), **dict(style, linestyle="-", linewidth=2.0))
            if c.valid_coverage is not None:
                ax.plot(c.k, _a(c.valid_coverage), **dict(style, linestyle=":", linewidth=2.4))
            rate = "" if c.valid_rate is None else f" (valid rate {c.valid_rate:.0%})"
            labels.append(legend_label(c) + rate)
        # The line styles are not samplers: a note, so no legend handle looks like a sampler's line.
        _corner_note(ax, ["solid: raw, every matched strategy", "dotted: valid, correct solutions only"])
        return handles, labels

    what = "raw vs valid strategy coverage"
    return _k_figure(comparison, (7.0, 5.0), draw, what, "strategy coverage $C(k)$")


def plot_latent(comparison: Comparison) -> Figure | None:
    """Latent-code coverage of router policies (a method diagnostic); None when no policy has one."""
    latents = [(p, p.latent) for p in comparison.policies if p.latent is not None]
    if not latents:
        return None
    styles = {c.label: s for c, s in styled_sets(comparison) if c.role == "policy"}

    def draw(ax: Axes) -> None:
        for pol, lat in latents:
            style = styles[pol.label]  # the policy's colour and line in every plot
            codes = "" if lat.num_codes is None else f" ({lat.num_codes} codes)"
            ax.plot(lat.k, _a(lat.coverage), label=f"{legend_label(pol.curves)}{codes}", **style)
            if not is_sanity(pol.curves):
                _band(ax, lat.k, lat.coverage_lo, lat.coverage_hi, style["color"])

    ylabel = r"latent-code coverage (distinct $z$ / #codes)"
    return _k_figure(comparison, (7.0, 4.8), draw, "router latent-code coverage, a diagnostic", ylabel)


#: The figures after the coverage plot, in report order (each drawn when its data exist).
_PLOTS = {
    "coverage_by_rarity": plot_coverage_by_rarity,
    "novelty": plot_novelty,
    "time_to_coverage": plot_time_to_coverage,
    "valid_vs_raw": plot_valid_vs_raw,
    "barcode": plot_barcodes,
    "latent": plot_latent,
    "gain_vs_step": plot_gain_vs_step,
}


def render_report_plots(
    report: Report, out_dir: str | Path, *, format: str = "png", dpi: int = DPI
) -> dict[str, Path]:
    """Write the plots of the first `PLOTTED_COMPARISONS` comparisons as ``out_dir/plots/<slug>_<plot>.*``.

    Returns:
        ``{"<slug>/<plot>": path}``, coverage first (`SeffiError` for a ``format`` not in `FORMATS`).
    """
    ext = check_format(format)
    out = Path(out_dir) / PLOTS_DIR
    files: dict[str, Path] = {}
    if len(report.comparisons) > PLOTTED_COMPARISONS:
        warnings.warn(
            f"the report holds {len(report.comparisons):,} comparisons: plots are drawn for the first "
            f"{PLOTTED_COMPARISONS} (report.md has the table of every one)",
            stacklevel=2,
        )
    for slug, comp in zip(report.slugs()[:PLOTTED_COMPARISONS], report.comparisons, strict=False):
        comp = figure_safe(comp)
        sets = comp.curve_sets()
        files[f"{slug}/coverage"] = save_coverage(comp, out / f"{slug}_coverage.{ext}", dpi=dpi)
        applies = {
            "novelty": any(c.novelty is not None or c.expected_new is not None for c in sets),
            "time_to_coverage": any(c.time_to_coverage for c in sets),
            "valid_vs_raw": any(c.valid_coverage is not None for c in sets),
        }
        for name, draw in _PLOTS.items():
            fig = draw(comp) if applies.get(name, True) else None
            if fig is not None:
                files[f"{slug}/{name}"] = save_figure(fig, out / f"{slug}_{name}.{ext}", dpi=dpi)
    return files
