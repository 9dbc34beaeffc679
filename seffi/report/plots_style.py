"""The look of every report figure, defined once: palettes, line styles, font sizes, titles, legends.

- Policies take strong tab10 colours (grey and pink left out: grey is the iid's, pink is too close
  to a strategy colour); baselines are muted: iid a grey dotted line, the oracle a black dashed one,
  and a sanity-check policy (a measured iid sampler, see `is_sanity`) a light grey dash-dot line.
- Strategies (barcode cells) take a qualitative palette of their own (Set2), so a colour never means
  a strategy in one figure and a policy in another; strategy j of a task always gets the same colour.
- One title line per figure: task and what is shown. The env id, budget and run details belong to the
  report's caption and tables, not to the figure.
- Font sizes suit a figure shown at its natural width (100 dpi: a 7 in figure is 700 px wide).

Also the pieces every figure is built from: the Agg figure factory, NaN gaps, CI bands, the gain text
and PNG writing.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from seffi._io import write_figure
from seffi.report.schema import Comparison, CurveSet, PolicyResult

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure, SubFigure

STYLE: dict[str, Any] = {
    # Points, at 100 dpi.
    "font": {"title": 12.5, "panel": 11.0, "label": 11.0, "tick": 10.0, "legend": 9.5, "note": 9.0},
    "policy_colors": (
        "tab:blue",
        "tab:orange",
        "tab:green",
        "tab:red",
        "tab:purple",
        "tab:brown",
        "tab:olive",
        "tab:cyan",
    ),
    "policy": {"linestyle": "-", "linewidth": 2.2},
    "iid": {"color": "0.35", "linestyle": ":", "linewidth": 2.4},
    "oracle": {"color": "black", "linestyle": "--", "linewidth": 1.7},
    "sanity": {"color": "0.62", "linestyle": "-.", "linewidth": 1.8},
    "band_alpha": 0.15,
    # Qualitative palettes for strategies, none shared with the policies; greys left out (they mean
    # "baseline" and "beyond the row" here). Up to 7 strategies take Set2, more take tab20b + tab20c.
    "strategy_palette": "Set2",
    "strategy_palette_many": ("tab20b", "tab20c"),
    "no_match": "white",
    "beyond_row": "0.92",
}

#: A policy label that names a sanity check: a measured iid sampler ("iid-sampler") or a run marked
#: "sanity" (e.g. "GRPO lr=0 (sanity)"). It is drawn as a baseline, not in a policy colour.
SANITY_LABEL = re.compile(r"^iid[-_ ]|\bsanity\b", re.IGNORECASE)


def font(role: str) -> float:
    """Font size (points) of a text role: title, panel, label, tick, legend or note."""
    return float(STYLE["font"][role])


def is_sanity(c: CurveSet) -> bool:
    """Whether a policy curve set is a sanity check (its label matches `SANITY_LABEL`)."""
    return c.role == "policy" and bool(SANITY_LABEL.search(c.label))


def policy_color(index: int) -> str:
    """The colour of the ``index``-th (non-sanity) policy."""
    colors = STYLE["policy_colors"]
    return colors[index % len(colors)]


def role_style(c: CurveSet, index: int) -> dict[str, Any]:
    """Line style of a curve set: baselines and sanity checks by role, policies by ``index``."""
    if c.role in ("iid", "oracle"):
        return dict(STYLE[c.role])
    if is_sanity(c):
        return dict(STYLE["sanity"])
    return {"color": policy_color(index), **STYLE["policy"]}


def styled_sets(comparison: Comparison) -> list[tuple[CurveSet, dict[str, Any]]]:
    """Every curve set of ``comparison`` (policies, iid, oracle) with its line style.

    Sanity-check policies take no policy colour, so the first real policy is always blue.
    """
    out, n_policy = [], 0
    for c in comparison.curve_sets():
        out.append((c, role_style(c, n_policy)))
        n_policy += c.role == "policy" and not is_sanity(c)
    return out


def policy_styles(comparison: Comparison) -> dict[str, dict[str, Any]]:
    """``{policy label: line style}``, the styles `styled_sets` gives the policies."""
    return {c.label: s for c, s in styled_sets(comparison) if c.role == "policy"}


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

    if len(names) <= 7:
        palette = [to_rgb(c) for c in matplotlib.colormaps[STYLE["strategy_palette"]].colors[:7]]
    else:
        palette = [to_rgb(c) for n in STYLE["strategy_palette_many"] for c in matplotlib.colormaps[n].colors]
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
    fig.suptitle("\n".join(lines), fontsize=font("title"))


def legend_below(fig: Figure | SubFigure, handles: Sequence[Any], labels: Sequence[str]) -> None:
    """One legend under the axes of ``fig`` (a figure or subfigure), in as many columns as fit."""
    if not handles:
        return
    size = font("legend")
    root = fig.get_figure(root=True)
    width_in = root.get_figwidth() * fig.bbox.width / root.bbox.width
    ncols = 1
    for n in range(len(labels), 1, -1):
        # Entries fill the columns top to bottom; a column is as wide as its longest entry:
        # handle and padding (~0.75 in) + text (~0.55 em per character).
        rows = -(-len(labels) // n)
        cols = [labels[i : i + rows] for i in range(0, len(labels), rows)]
        need = sum(0.75 + max(len(t) for t in col) * 0.55 * size / 72.0 for col in cols)
        if need <= width_in - 0.2:
            ncols = len(cols)
            break
    fig.legend(handles, labels, loc="outside lower center", ncols=ncols, fontsize=size, frameon=False)


def axes_legend_below(fig: Figure, ax: Axes) -> None:
    """`legend_below` with the labelled artists of ``ax``."""
    handles, labels = ax.get_legend_handles_labels()
    legend_below(fig, handles, labels)


def k_ticks(budget: int, every_up_to: int, most: int) -> list[int]:
    """Ticks of a budget axis 1..K: every k up to ``every_up_to``, else 1 and a round step's multiples.

    The step is the smallest of 2, 4, 5, 10, 20, 25, 50, ... giving at most ``most`` multiples.
    """
    if budget <= every_up_to:
        return list(range(1, budget + 1))
    steps = (base * 10**e for e in range(20) for base in (2, 4, 5, 10))
    step = next(s for s in steps if budget // s <= most)
    return [1, *range(step, budget + 1, step)]


def budget_axis(ax: Axes, budget: int, *, narrow: bool = False) -> None:
    """The budget axis: range 1..K, a tick at every k up to K = 16 (about 8 beyond), a light grid.

    Args:
        ax: the axes.
        budget: K.
        narrow: a panel under ~4 in wide: every k up to K = 8, about 5 ticks beyond.
    """
    ax.set_xlim(0.5, budget + 0.5)
    ax.set_xticks(k_ticks(budget, 8, 5) if narrow else k_ticks(budget, 16, 8))
    ax.grid(True, alpha=0.3)


def corner_note(ax: Axes, lines: Sequence[str], **kwargs: Any) -> None:
    """Note text in the lower right corner of ``ax`` (where rising coverage curves leave room)."""
    style = {"ha": "right", "va": "bottom", "fontsize": font("note"), "color": "0.2", **kwargs}
    box = {"facecolor": "white", "edgecolor": "none", "alpha": 0.8, "pad": 1.5}
    ax.text(0.98, 0.03, "\n".join(lines), transform=ax.transAxes, bbox=box, **style)


def finish(fig: Figure) -> Figure:
    """Apply the font sizes of `STYLE` to every axes' ticks, axis labels and panel titles."""
    for ax in fig.axes:
        ax.tick_params(labelsize=font("tick"))
        ax.xaxis.label.set_fontsize(font("label"))
        ax.yaxis.label.set_fontsize(font("label"))
        ax.title.set_fontsize(font("panel"))
    return fig


PLOTS_DIR = "plots"
DPI = 100
# PNG zlib level: these plots are large flat-colour areas, where level 1 encodes about 3x faster than
# the default 6 for files within a few percent of the size (measured on a `seffi run` report).
_PNG_OPTIONS = {"compress_level": 1}
# Unhinted glyphs: text rendering is the largest single cost of a plot; at these font sizes and 100 dpi
# unhinted antialiased text is as legible as autohinted text (compared side by side) and ~13% faster.
_SAVE_RC = {
    "text.hinting": "no_hinting",
    "figure.autolayout": False,
    "figure.constrained_layout.use": False,
}
#: One bound of a curve's interval: a value per budget (null = undefined), or None without an interval.
_Bound = Sequence[float | None] | None


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


def _band(ax: Any, k: Sequence[int], lo: _Bound, hi: _Bound, color: str) -> bool:
    """Shade a curve's CI between ``lo`` and ``hi`` over the budgets ``k`` (gaps where a bound is null).

    Args:
        ax: The matplotlib axes.
        k: The budgets, shape (K,).
        lo: The interval's lower bound per budget, shape (K,); None when the curve has no interval.
        hi: The upper bound, likewise.
        color: The curve's colour.

    Returns:
        Whether a band was drawn (not when either bound is None).
    """
    if lo is None or hi is None:
        return False
    ax.fill_between(k, _a(lo), _a(hi), color=color, alpha=STYLE["band_alpha"], linewidth=0)
    return True


def _add_band_key(handles: list[Any], labels: list[str]) -> None:
    """Append the legend entry of the CI bands (a grey patch, "shaded: 95% CI") to a legend's lists."""
    from matplotlib.patches import Patch

    handles.append(Patch(facecolor="0.5", alpha=2 * STYLE["band_alpha"], linewidth=0))
    labels.append("shaded: 95% CI")


def _gain_text(p: PolicyResult) -> str:
    g = p.gain
    if g is None:
        return ""
    if g.value is None:
        return ", gain n/a"
    if g.lo is not None and g.hi is not None:
        return f", gain {g.value:.2f} [{g.lo:.2f}, {g.hi:.2f}]"
    return f", gain {g.value:.2f}"


def save_figure(fig: Figure, path: str | Path, *, dpi: int = DPI) -> Path:
    """Write ``fig`` as PNG (parent folders created).

    A figure with a layout engine is laid out here once and keeps that layout (its engine is removed),
    so drawing it again gives the same picture without a second layout pass.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    import matplotlib

    # Layout and drawing both happen under the text settings.
    with matplotlib.rc_context(_SAVE_RC):
        engine = fig.get_layout_engine()
        if engine is not None and dpi == fig.dpi:
            # savefig with a layout engine draws the whole figure once with output disabled, only to
            # run the layout, then again for the pixels. Running the layout here (same renderer, same
            # dpi) and dropping the engine leaves savefig the one draw: equal bytes, ~20% less time.
            engine.execute(fig)
            fig.set_layout_engine(None)  # _SAVE_RC turns off the rc layouts None would pick
        # No "Software" metadata: equal figures give equal bytes across matplotlib patch versions.
        write_figure(fig, path, dpi=dpi, metadata={"Software": None}, pil_kwargs=_PNG_OPTIONS)
    # No fig.clear(): it re-initialises every axes (~5-10 ms each) only to drop it; an unreferenced
    # Agg figure (no pyplot registry) is freed by the garbage collector like any other object.
    return path
