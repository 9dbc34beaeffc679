"""Matplotlib figures of a report (Agg backend; pure functions: schema objects in, Figure out).

Each ``plot_*`` returns a ``matplotlib.figure.Figure``; :func:`save_figure` writes a PNG and closes it;
:func:`render_report_plots` writes every plot of a report. Colours are fixed by role so figures
compare at a glance: policies take the tab10 cycle, iid is grey, the oracle is a black dashed line.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from seffi.report.schema import Barcode, Comparison, CurveSet, Report

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

PLOTS_DIR = "plots"
_POLICY_COLORS = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown", "tab:pink")


def _figure(
    nrows: int = 1, ncols: int = 1, size: tuple[float, float] = (7.0, 4.5)
) -> tuple[Figure, np.ndarray]:
    # Figure() + Agg canvas (not pyplot): no global state, no GUI, safe in worker threads.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=size, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(nrows, ncols, squeeze=False)
    return fig, axes


def _a(values: Sequence[float | None] | None) -> np.ndarray:
    """Per-k values (null = undefined) as a float array with NaN, which matplotlib leaves as gaps."""
    return np.array([np.nan if v is None else v for v in (values or [])], dtype=np.float64)


def _style(curves: CurveSet, index: int) -> dict[str, object]:
    if curves.role == "oracle":
        return {"color": "black", "linestyle": "--", "linewidth": 1.6}
    if curves.role == "iid":
        return {"color": "tab:gray", "linestyle": "-", "linewidth": 1.8}
    return {"color": _POLICY_COLORS[index % len(_POLICY_COLORS)], "linestyle": "-", "linewidth": 2.0}


def _styled_sets(comparison: Comparison) -> list[tuple[CurveSet, dict[str, object]]]:
    out, n_policy = [], 0
    for c in comparison.curve_sets():
        out.append((c, _style(c, n_policy)))
        n_policy += c.role == "policy"
    return out


def _legend_label(c: CurveSet) -> str:
    extra = f" ({c.method})" if c.method and c.role != "policy" else ""
    return f"{c.label}{extra}"


def _title(comparison: Comparison, what: str) -> str:
    env = f" [{comparison.env_id}]" if comparison.env_id else ""
    return f"{comparison.task}{env}: {what}\nbudget K={comparison.budget}, {comparison.n_inputs} inputs"


def _budget_axis(ax: Axes, budget: int) -> None:
    ax.set_xlim(0.5, budget + 0.5)
    if budget <= 20:
        ax.set_xticks(range(1, budget + 1, max(1, budget // 10)))
    ax.grid(True, alpha=0.3)


def plot_coverage(comparison: Comparison, *, valid: bool = False) -> Figure:
    """Main figure: coverage C(k) with CI bands, policies vs iid vs oracle.

    Args:
        comparison: the comparison to draw.
        valid: draw valid-only coverage instead of raw coverage.
    """
    fig, axes = _figure()
    ax = axes[0, 0]
    for c, style in _styled_sets(comparison):
        y = c.valid_coverage if valid else c.coverage
        lo, hi = (c.valid_coverage_lo, c.valid_coverage_hi) if valid else (c.coverage_lo, c.coverage_hi)
        if y is None:
            continue
        label = _legend_label(c)
        if c.auc is not None:
            label += f", AUC={c.auc:.3f}"
        ax.plot(c.k, _a(y), label=label, marker="o" if len(c.k) <= 12 else None, markersize=3, **style)
        if lo is not None and hi is not None:
            ax.fill_between(c.k, _a(lo), _a(hi), color=style["color"], alpha=0.15, linewidth=0)
    ax.set_xlabel("sample budget k (samples per input)")
    ax.set_ylabel("valid-strategy coverage" if valid else "strategy coverage C(k) = E|S_k| / M")
    ax.set_ylim(-0.02, 1.05)
    _budget_axis(ax, comparison.budget)
    gains = [
        f"{p.label}: {p.gain.value:.2f} [{p.gain.lo:.2f}, {p.gain.hi:.2f}]"
        if p.gain and p.gain.value is not None and p.gain.lo is not None and p.gain.hi is not None
        else f"{p.label}: {p.gain.value:.2f}"
        if p.gain and p.gain.value is not None
        else f"{p.label}: n/a"
        for p in comparison.policies
        if p.gain is not None
    ]
    if gains:
        ax.text(
            0.98,
            0.04,
            "gain vs iid\n" + "\n".join(gains),
            transform=ax.transAxes,
            ha="right",
            va="bottom",
            fontsize=8,
            bbox={"boxstyle": "round", "facecolor": "white", "alpha": 0.8, "edgecolor": "0.7"},
        )
    ax.legend(loc="upper left", fontsize=8)
    ax.set_title(_title(comparison, "valid coverage" if valid else "strategy coverage (shaded: 95% CI)"))
    return fig


def plot_novelty(comparison: Comparison) -> Figure:
    """Marginal novelty N(i) = Pr[sample i reveals a new strategy] (expected new count if that is all)."""
    fig, axes = _figure()
    ax = axes[0, 0]
    what = "novelty N(i) = Pr[sample i is new]"
    for c, style in _styled_sets(comparison):
        y = c.novelty if c.novelty is not None else c.expected_new
        if y is None:
            continue
        suffix = "" if c.novelty is not None else " (expected # new)"
        ax.plot(c.k, _a(y), label=_legend_label(c) + suffix, **style)
    ax.set_xlabel("sample index i")
    ax.set_ylabel(what)
    ax.set_ylim(bottom=-0.02)
    _budget_axis(ax, comparison.budget)
    ax.legend(loc="upper right", fontsize=8)
    ax.set_title(_title(comparison, "marginal novelty"))
    return fig


def plot_time_to_coverage(comparison: Comparison, taus: Sequence[float] = (0.8, 1.0)) -> Figure:
    """Survival Pr[T(tau) > k] per tau, plus a box panel of per-run T (censored runs drawn at K+1)."""
    fig, axes = _figure(1, len(taus) + 1, size=(4.2 * (len(taus) + 1), 4.2))
    styled = _styled_sets(comparison)
    for ax, tau in zip(axes[0, :-1], taus, strict=True):
        for c, style in styled:
            t = c.ttc(tau)
            if t is None or t.survival is None:
                continue
            med = "" if t.median is None else f", median {t.median:g}"
            ax.step(c.k, _a(t.survival), where="post", label=f"{c.label}{med}", **style)
        ax.set_xlabel("sample budget k")
        ax.set_ylabel(f"Pr[T({tau:g}) > k]  (not yet at {tau:.0%} coverage)")
        ax.set_ylim(-0.02, 1.05)
        _budget_axis(ax, comparison.budget)
        ax.legend(loc="upper right", fontsize=8)
        ax.set_title(f"survival of T({tau:g})")
    box_ax = axes[0, -1]
    data, labels, colors = [], [], []
    for c, style in styled:
        for tau in taus:
            t = c.ttc(tau)
            if t is None or not t.values:
                continue
            # Censored runs sit at K+1 so the box shows them as "beyond the budget".
            data.append([comparison.budget + 1 if v is None else v for v in t.values])
            labels.append(f"{c.label}\nT({tau:g})")
            colors.append(style["color"])
    if data:
        parts = box_ax.boxplot(data, patch_artist=True, widths=0.6)
        box_ax.set_xticks(range(1, len(labels) + 1), labels, fontsize=7)
        for patch, color in zip(parts["boxes"], colors, strict=True):
            patch.set_facecolor(color)
            patch.set_alpha(0.35)
        box_ax.axhline(comparison.budget + 1, color="0.5", linestyle=":", linewidth=1)
        box_ax.text(0.5, comparison.budget + 1, " censored (> K)", va="bottom", fontsize=7, color="0.4")
    else:
        box_ax.text(0.5, 0.5, "no per-run values", ha="center", va="center", transform=box_ax.transAxes)
    box_ax.set_ylabel("samples needed T(tau)")
    box_ax.set_title("T per run")
    box_ax.grid(True, axis="y", alpha=0.3)
    fig.suptitle(_title(comparison, "time to coverage"))
    return fig


def plot_barcode(barcode: Barcode, *, title: str = "strategy barcode", max_rows: int = 60) -> Figure:
    """Strategy barcode: rows inputs, columns sample index, colour = strategy, dot at first appearance.

    Cells with no match are white; cells past a row's end are light grey. Only the first
    ``max_rows`` inputs are drawn (stated in the title) so the figure stays legible.
    """
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    rows = barcode.matrix[:max_rows]
    n_rows = len(rows)
    width = max((len(r) for r in rows), default=1)
    m = len(barcode.strategies)
    grid = np.full((max(n_rows, 1), max(width, 1)), -2, dtype=int)
    for i, r in enumerate(rows):
        grid[i, : len(r)] = r
    base = ["0.92", "white"]  # -2 = beyond the row, -1 = no match
    import matplotlib

    cmap_src = matplotlib.colormaps["tab20" if m > 10 else "tab10"]
    colors = base + [cmap_src(j % cmap_src.N) for j in range(m)]
    cmap = ListedColormap(colors)
    fig, axes = _figure(size=(min(14.0, 3.0 + 0.25 * width), min(12.0, 2.0 + 0.28 * max(n_rows, 1))))
    ax = axes[0, 0]
    # 1-based columns so "sample index i" means the same here as in N(i) and C(k).
    extent = (0.5, grid.shape[1] + 0.5, grid.shape[0] - 0.5, -0.5)
    ax.imshow(grid + 2, cmap=cmap, vmin=0, vmax=m + 1, aspect="auto", interpolation="nearest", extent=extent)
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
    ax.scatter(fx, fy, marker="o", s=14, facecolor="white", edgecolor="black", linewidth=0.7, zorder=3)
    ax.set_xlabel("sample index i")
    ax.set_ylabel("input")
    ids = barcode.input_ids[:max_rows]
    if n_rows <= 30:
        ax.set_yticks(range(n_rows), [i[:12] for i in ids], fontsize=7)
    handles = [Patch(facecolor=colors[j + 2], label=s) for j, s in enumerate(barcode.strategies)]
    handles.append(Patch(facecolor="white", edgecolor="0.6", label="no match"))
    handles.append(
        matplotlib.lines.Line2D(
            [],
            [],
            marker="o",
            linestyle="",
            markerfacecolor="white",
            markeredgecolor="black",
            label="first appearance",
        )
    )
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False)
    shown = "" if len(barcode.matrix) <= max_rows else f" (first {max_rows} of {len(barcode.matrix)} inputs)"
    ax.set_title(title + shown)
    return fig


def plot_valid_vs_raw(comparison: Comparison) -> Figure:
    """Raw strategy coverage (solid) vs valid-only coverage (dotted), same colour per sampler.

    A method should not look good by producing many invalid modes: a gap between the two lines is
    coverage earned by incorrect solutions.
    """
    fig, axes = _figure()
    ax = axes[0, 0]
    for c, style in _styled_sets(comparison):
        ax.plot(c.k, _a(c.coverage), label=f"{c.label} raw", **style)
        if c.valid_coverage is not None:
            vs = dict(style, linestyle=":", linewidth=2.2)
            rate = "" if c.valid_rate is None else f" (valid rate {c.valid_rate:.0%})"
            ax.plot(c.k, _a(c.valid_coverage), label=f"{c.label} valid{rate}", **vs)
    ax.set_xlabel("sample budget k")
    ax.set_ylabel("coverage")
    ax.set_ylim(-0.02, 1.05)
    _budget_axis(ax, comparison.budget)
    ax.legend(loc="upper left", fontsize=8)
    ax.set_title(_title(comparison, "raw vs valid coverage (solid raw, dotted valid)"))
    return fig


def plot_latent(comparison: Comparison) -> Figure | None:
    """Latent-code coverage of router policies: a method diagnostic, drawn apart from strategy coverage.

    Returns:
        The figure, or None when no policy carries a latent curve.
    """
    latents = [(i, p.latent) for i, p in enumerate(comparison.policies) if p.latent is not None]
    if not latents:
        return None
    fig, axes = _figure()
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
    ax.legend(loc="upper left", fontsize=8)
    ax.set_title(_title(comparison, "DIAGNOSTIC: router latent coverage (not strategy coverage)"))
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
    fig, axes = _figure(1, len(tasks), size=(6.0 * len(tasks), 4.5))
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
        ax.legend(loc="lower right", fontsize=7)
        ax.set_title(f"{task}: coverage across runs (K={budget})")
    return fig


def save_figure(fig: Figure, path: str | Path, *, dpi: int = 110) -> Path:
    """Write ``fig`` as PNG (parent folders created) and release it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # No "Software" metadata: equal figures give equal bytes across matplotlib patch versions.
    fig.savefig(path, dpi=dpi, metadata={"Software": None})
    fig.clear()
    return path


def render_report_plots(report: Report, out_dir: str | Path) -> dict[str, Path]:
    """Write every plot of ``report`` under ``out_dir/plots/``.

    Returns:
        ``{"<slug>/<plot>": path}`` with plot in coverage, novelty, time_to_coverage, valid_vs_raw,
        barcode_<policy>, latent (those that apply).
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

        _save("coverage", plot_coverage(comp))
        if any(c.novelty is not None or c.expected_new is not None for c in comp.curve_sets()):
            _save("novelty", plot_novelty(comp))
        if any(c.time_to_coverage for c in comp.curve_sets()):
            _save("time_to_coverage", plot_time_to_coverage(comp))
        if any(c.valid_coverage is not None for c in comp.curve_sets()):
            _save("valid_vs_raw", plot_valid_vs_raw(comp))
        for pol in comp.policies:
            if pol.barcode is not None:
                safe = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in pol.label)
                _save(
                    f"barcode_{safe}",
                    plot_barcode(pol.barcode, title=_title(comp, f"strategy barcode, {pol.label}")),
                )
        _save("latent", plot_latent(comp))
    return files
