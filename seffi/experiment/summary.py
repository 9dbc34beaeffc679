"""The console summary of a run: one row per (task, policy) with AUC, gain, T(0.8), F(K) and valid rate."""

from __future__ import annotations

from typing import Any

from seffi._convert import printable

__all__ = ["SUMMARY_HEADER", "summary_rows", "summary_table"]


def _cell(value: float | None, lo: float | None = None, hi: float | None = None) -> str:
    if value is None:
        return "—"
    if lo is None or hi is None:
        return f"{value:.3f}"
    return f"{value:.3f} [{lo:.3f}, {hi:.3f}]"


SUMMARY_HEADER = ("task", "policy", "AUC@K [CI]", "gain vs iid [CI]", "T(0.8) median", "F(K)", "valid rate")


def summary_rows(report: Any) -> list[list[str]]:
    """Summary rows: task, policy, AUC@K [CI], gain vs iid [CI], T(0.8) median, F(K), valid rate."""
    rows = []
    for comp in report.comparisons:
        entries = [(p.curves, p.gain) for p in comp.policies]
        entries += [(c, None) for c in (comp.iid, comp.oracle) if c is not None]
        for curves, gain in entries:
            ttc = curves.ttc(0.8)
            if gain is None:
                g = "—"
            elif gain.value is None:
                g = f"undefined ({gain.reason})"
            else:
                g = _cell(gain.value, gain.lo, gain.hi) + (" (fragile)" if gain.fragile else "")
            if ttc is None:
                median = "—"
            else:
                median = f"> {comp.budget} (censored)" if ttc.median is None else f"{ttc.median:g}"
            full = curves.full_coverage[-1] if curves.full_coverage else None
            rows.append(
                [
                    comp.task,
                    curves.label,
                    _cell(curves.auc, curves.auc_lo, curves.auc_hi),
                    g,
                    median,
                    _cell(full),
                    _cell(curves.valid_rate),
                ]
            )
    return rows


def summary_table(report: Any) -> Any:
    """The summary as a rich ``Table``."""
    from rich.table import Table
    from rich.text import Text

    budget = report.comparisons[0].budget if report.comparisons else "?"
    table = Table(title=f"seffi run: coverage at budget K={budget} (gain: 0 = iid, 1 = oracle)")
    for h in SUMMARY_HEADER:
        left = h in ("task", "policy")
        table.add_column(h, justify="left" if left else "right", no_wrap=left)
    for row in summary_rows(report):  # names from report.json: plain text (no rich markup, no escapes)
        table.add_row(*(Text(printable(cell)) for cell in row))
    return table
