"""Caveats said next to a number that does not mean what it seems to (console, report.md, W&B summary).

A fragile gain (`seffi.coverage.summaries.gain_fragility`), and declared strategies infeasible on some
inputs (the oracle's C(K) below 1 although K ≥ M).
"""

from __future__ import annotations

from typing import Any

from seffi._convert import printable
from seffi.coverage.summaries import gain_fragility
from seffi.report import keys


def gain_caveat(gain: Any, auc_iid: float | None = None, auc_oracle: float | None = None) -> str | None:
    """A defined gain's fragility note (None when not fragile); the AUCs give a gain without room its room."""
    if gain is None or gain.value is None:
        return None
    if gain.room is None and auc_iid is not None and auc_oracle is not None:
        return gain_fragility(auc_oracle - auc_iid, None, None)
    return gain.fragility


def infeasible_caveat(
    oracle_coverage_at_k: float | None,
    num_strategies: int | None,
    budget: int,
    oracle_full_coverage_at_k: float | None = None,
) -> str | None:
    """A note naming the mean feasible count per input when the oracle's C(K) < 1 although K ≥ M."""
    if oracle_coverage_at_k is None or not num_strategies or budget < num_strategies:
        return None
    if oracle_coverage_at_k >= 1.0 - 1e-9:
        return None
    feasible = oracle_coverage_at_k * num_strategies
    full = "" if oracle_full_coverage_at_k is None else f", F({budget}) = {oracle_full_coverage_at_k:.3f}"
    return (
        f"{num_strategies} strategies are declared per input but only {feasible:.2f} are feasible on "
        f"average: the oracle reaches C({budget}) = {oracle_coverage_at_k:.3f}{full}; coverage counts "
        f"shares of all {num_strategies} declared strategies"
    )


def comparison_caveats(comparison: Any) -> list[str]:
    """Every caveat of one [`Comparison`][seffi.report.Comparison] (empty when there is none)."""
    iid, oracle = comparison.iid, comparison.oracle
    aucs = (iid.auc if iid is not None else None, oracle.auc if oracle is not None else None)
    notes: list[str | None] = []
    many = len(comparison.policies) > 1
    for p in comparison.policies:
        note = gain_caveat(p.gain, *aucs)
        notes.append(f"{p.label}: {note}" if note and many else note)
    if oracle is not None and oracle.coverage:
        full = oracle.full_coverage[-1] if oracle.full_coverage else None
        notes.append(
            infeasible_caveat(oracle.coverage[-1], comparison.num_strategies, comparison.budget, full)
        )
    return [n for n in notes if n]


def console_lines(report: Any) -> list[str]:
    """The caveats as console lines, ``"warning (<task>): <caveat>"``."""
    return [
        printable(f"warning ({c.task}): {note}") for c in report.comparisons for note in comparison_caveats(c)
    ]


def summary_notes(report: Any) -> dict[str, str]:
    """The caveats for ``run.summary``: ``seffi/caveats`` (``seffi/<task>/caveats`` if several), joined."""
    many = len(report.comparisons) > 1
    out = {}
    for comp, name in zip(report.comparisons, keys.comparison_names(report.comparisons), strict=True):
        notes = comparison_caveats(comp)
        if notes:
            out[f"seffi/{name}/caveats" if many else "seffi/caveats"] = " | ".join(notes)
    return out
