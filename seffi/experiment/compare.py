"""``seffi compare DIR...``: several saved runs in one figure and one table.

Each run folder holds a report.json (`seffi.report.schema`). The figure
([`seffi.report.plots.plot_compare`][seffi.report.plots.plot_compare]) has one axes per task found in
any run; it overlays every run's policy coverage curves with their CI bands (a colour per run) and each
run's own iid and oracle curves (runs may use other priors). Runs that measured a task at different budgets K
are refused with one line. The table lists, per task, run and policy, AUC@K and gain vs iid with their CIs.
Both go to a folder of their own, ``runs/compare-<UTC timestamp>`` unless another is given.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from seffi._io import write_atomic
from seffi.errors import SeffiError
from seffi.report.caveats import gain_caveat
from seffi.report.files import load_report
from seffi.report.markdown import text
from seffi.report.plots import FORMATS, PRINT_DPI, check_format, check_overlay, plot_compare, save_figure
from seffi.report.run_folder import default_out_dir, prepare_run_folder

COMPARE_MD = "compare.md"
#: Every file ``seffi compare`` writes into its folder (the figure in each format, and the table).
COMPARE_FILES = (*(f"compare.{fmt}" for fmt in FORMATS), COMPARE_MD)


def _fmt(value: float | None, lo: float | None = None, hi: float | None = None, digits: int = 3) -> str:
    if value is None:
        return "—"
    text = f"{value:.{digits}f}"
    if lo is not None and hi is not None:
        text += f" [{lo:.{digits}f}, {hi:.{digits}f}]"
    return text


def _run_names(dirs: list[Path]) -> list[str]:
    """Short, distinct legend names: the folder name, or the full path when names collide."""
    names = [d.name or str(d) for d in dirs]
    if len(set(names)) != len(names):
        names = [str(d) for d in dirs]
    return names


def compare_table(reports: list[Any], names: list[str]) -> list[dict[str, Any]]:
    """One row per (task, run, policy): AUC@K and gain vs iid with CIs.

    Args:
        reports: loaded [`seffi.report.schema.Report`][seffi.report.Report] objects.
        names: one display name per report.

    Returns:
        Rows with keys task, run, policy, budget, auc, auc_lo, auc_hi, gain, gain_lo, gain_hi, fragile
        (the gain's fragility note, or None), unbounded and note.
    """
    rows: list[dict[str, Any]] = []
    for report, name in zip(reports, names, strict=True):
        for comp in report.comparisons:
            for pol in comp.policies:
                c, g = pol.curves, pol.gain
                aucs = (comp.iid.auc if comp.iid else None, comp.oracle.auc if comp.oracle else None)
                rows.append(
                    {
                        "task": comp.task,
                        "run": name,
                        "policy": c.label,
                        "budget": comp.budget,
                        "auc": c.auc,
                        "auc_lo": c.auc_lo,
                        "auc_hi": c.auc_hi,
                        "gain": g.value if g else None,
                        "gain_lo": g.lo if g else None,
                        "gain_hi": g.hi if g else None,
                        "fragile": gain_caveat(g, *aucs),
                        "unbounded": bool(g and g.unbounded),
                        "note": (g.reason or "") if g else "",
                    }
                )
    rows.sort(key=lambda r: (r["task"], r["policy"], names.index(r["run"])))
    return rows


def table_markdown(rows: list[dict[str, Any]]) -> str:
    """The compare table as GitHub markdown; a fragile gain is marked and its reason listed below."""
    lines = [
        "| task | run | policy | K | AUC@K [CI] | gain vs iid [CI] |",
        "|---|---|---|---:|---|---|",
    ]
    notes = []
    for r in rows:
        note = text(r["note"])  # report text: inert on a terminal too
        if r["gain"] is None:
            gain = f"— {note}"
        elif r.get("unbounded"):
            gain = f"{r['gain']:.3f} [unbounded]"
        else:
            gain = _fmt(r["gain"], r["gain_lo"], r["gain_hi"])
        names = (text(r["task"]), text(r["run"]), text(r["policy"]))
        if r.get("fragile"):
            gain += " (fragile)"
            notes.append(f"- {' / '.join(names)}: {text(r['fragile'])}")
        auc = _fmt(r["auc"], r["auc_lo"], r["auc_hi"])
        lines.append(f"| {' | '.join(names)} | {r['budget']} | {auc} | {gain} |")
    return "\n".join(lines) + "\n" + ("\n" + "\n".join(notes) + "\n" if notes else "")


def compare_runs(
    dirs: list[Path],
    out: Path | None = None,
    *,
    overwrite: bool = False,
    format: str = "png",
    dpi: int = PRINT_DPI,
) -> tuple[str, list[Path]]:
    """Load several run folders, write compare.<format> and compare.md, return (table, files written).

    Args:
        dirs: The run folders, in legend order.
        out: The folder to write to; None gives a fresh ``runs/compare-<UTC timestamp>``. It may hold a
            run: only an earlier compare figure or compare.md there is refused, unless ``overwrite``.
        overwrite: Replace an earlier compare figure and compare.md in ``out``.
        format: Of the figure, one of `seffi.report.plots.FORMATS` ("png", "pdf", "svg").
        dpi: Of a PNG figure.

    Raises:
        IncompatibleRuns: Two runs measured one task at different budgets K.
        RunFolderExists: The target already holds a compare figure or compare.md and ``overwrite`` is False.
        SeffiError: A folder is missing or holds no valid report.json, ``out`` is not writable, or
            ``format`` is unknown.
    """
    if not dirs:
        raise SeffiError("give at least one run folder")
    fmt = check_format(format)
    reports = [load_report(d) for d in dirs]
    if not any(r.comparisons for r in reports):
        raise SeffiError("none of the run folders holds any comparison to plot")
    names = _run_names(dirs)
    # Before the target folder is touched: a refused overlay leaves nothing behind.
    check_overlay(dict(zip(names, reports, strict=True)))
    target = out if out is not None else default_out_dir("compare")
    prepare_run_folder(target, overwrite=overwrite, owned=COMPARE_FILES)
    table = table_markdown(compare_table(reports, names))
    figure = f"compare.{fmt}"
    try:
        fig = plot_compare(dict(zip(names, reports, strict=True)))
        written = save_figure(fig, target / figure, dpi=dpi)
        md = target / COMPARE_MD
        write_atomic(md, f"# seffi compare\n\n![coverage]({figure})\n\n{table}")
    except OSError as exc:
        raise SeffiError(f"cannot write to {target}: {exc.strerror or exc}") from None
    return table, [written, md]
