"""Shared pieces of the report figures: the Agg figure factory, colours by role, titles, legends.

Used by :mod:`seffi.report.plots` (per-comparison figures), :mod:`seffi.report.plots_detail`
(barcodes, common vs rare) and :mod:`seffi.report.plots_compare` (several runs, evaluation series).
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from seffi._io import write_figure
from seffi.report.schema import Comparison, CurveSet, PolicyResult

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
    n = comparison.n_inputs
    detail = f"{where}budget K={comparison.budget}, {n} input{'' if n == 1 else 's'}"
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


def save_figure(fig: Figure, path: str | Path, *, dpi: int = DPI) -> Path:
    """Write ``fig`` as PNG (parent folders created)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    import matplotlib

    # Layout and drawing both happen inside savefig, so the text settings apply to both.
    with matplotlib.rc_context(_SAVE_RC):
        # No "Software" metadata: equal figures give equal bytes across matplotlib patch versions.
        write_figure(fig, path, dpi=dpi, metadata={"Software": None}, pil_kwargs=_PNG_OPTIONS)
    # No fig.clear(): it re-initialises every axes (~5-10 ms each) only to drop it; an unreferenced
    # Agg figure (no pyplot registry) is freed by the garbage collector like any other object.
    return path
