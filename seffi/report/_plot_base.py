"""Shared pieces of the report figures: the Agg figure factory, NaN gaps, CI bands, gain text, PNG writing.

Used by [`seffi.report.plots`][seffi.report.plots] (per-comparison figures), `seffi.report.plots_detail`
(barcodes, common vs rare) and [`seffi.report.plots_compare`][seffi.report.plots_compare] (several runs,
evaluation series).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from seffi._io import write_figure
from seffi.report.plots_style import STYLE
from seffi.report.schema import PolicyResult

if TYPE_CHECKING:
    from matplotlib.figure import Figure

PLOTS_DIR = "plots"
DPI = 100
# PNG zlib level: these plots are large flat-colour areas, where level 1 encodes about 3x faster than
# the default 6 for files within a few percent of the size (measured on a `seffi run` report).
_PNG_OPTIONS = {"compress_level": 1}
# Unhinted glyphs: text rendering is the largest single cost of a plot; at these font sizes and 100 dpi
# unhinted antialiased text is as legible as autohinted text (compared side by side) and ~13% faster.
_SAVE_RC = {"text.hinting": "no_hinting"}
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
