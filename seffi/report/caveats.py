"""Caveats: when a reported number does not mean what it seems to, say so next to it.

One place decides the rules, as pure functions over the report schema, so the console, report.md and
the W&B summary say the same thing:

- **No room for a gain.** gain = (AUC − AUC_iid) / (AUC_oracle − AUC_iid). When the oracle is barely
  better than iid (AUC_oracle − AUC_iid below `GAIN_ROOM_THRESHOLD`), the denominator is tiny:
  a small AUC difference (noise) becomes a large gain of either sign, and the CI is wide. The gain is
  still shown, with this warning.
- **Infeasible strategies.** M_x counts every declared strategy, but some are infeasible on some inputs
  (coin_sum's ``greedy`` gets stuck on some amounts). Then even the oracle cannot cover them all: its
  C(K) stays below 1 and F(K) below 1 although K ≥ M. Coverage is a share of the *declared* strategies.
"""

from __future__ import annotations

from typing import Any

from seffi._convert import printable
from seffi.report import keys

#: Smallest AUC_oracle − AUC_iid at which a gain vs iid is read without a warning. At 0.05, a policy
#: AUC 0.01 above iid (about one more strategy found in one of 20 runs of M = 4, K = 8) already
#: reads as a gain of 0.2.
GAIN_ROOM_THRESHOLD = 0.05


def gain_room_caveat(
    auc_iid: float | None, auc_oracle: float | None, threshold: float = GAIN_ROOM_THRESHOLD
) -> str | None:
    """A warning when AUC_oracle − AUC_iid is below ``threshold`` (None otherwise or without an AUC)."""
    if auc_iid is None or auc_oracle is None or auc_oracle - auc_iid >= threshold:
        return None
    return (
        f"gain vs iid is unreliable here: AUC_oracle − AUC_iid = {auc_oracle:.3f} − {auc_iid:.3f} = "
        f"{auc_oracle - auc_iid:.3f} < {threshold:g}, so iid already covers nearly everything the oracle "
        "does and small AUC differences become large gains"
    )


def infeasible_caveat(
    oracle_coverage_at_k: float | None,
    num_strategies: int | None,
    budget: int,
    oracle_full_coverage_at_k: float | None = None,
) -> str | None:
    """A note naming the mean feasible count per input when the oracle's C(K) < 1 although K ≥ M.

    Args:
        oracle_coverage_at_k: the oracle's C(K).
        num_strategies: M, the declared strategies per input.
        budget: K.
        oracle_full_coverage_at_k: the oracle's F(K), quoted when known.
    """
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


def comparison_caveats(comparison: Any, threshold: float = GAIN_ROOM_THRESHOLD) -> list[str]:
    """Every caveat of one [`Comparison`][seffi.report.Comparison] (empty when there is none)."""
    iid, oracle = comparison.iid, comparison.oracle
    notes: list[str | None] = []
    has_gain = any(p.gain is not None and p.gain.value is not None for p in comparison.policies)
    if has_gain and iid is not None and oracle is not None:
        notes.append(gain_room_caveat(iid.auc, oracle.auc, threshold))
    if oracle is not None and oracle.coverage:
        full = oracle.full_coverage[-1] if oracle.full_coverage else None
        notes.append(
            infeasible_caveat(oracle.coverage[-1], comparison.num_strategies, comparison.budget, full)
        )
    return [n for n in notes if n]


def console_lines(report: Any, threshold: float = GAIN_ROOM_THRESHOLD) -> list[str]:
    """The caveats as console lines, ``"warning (<task>): <caveat>"`` (control characters a space)."""
    return [
        printable(f"warning ({c.task}): {note}")
        for c in report.comparisons
        for note in comparison_caveats(c, threshold)
    ]


def summary_notes(report: Any, threshold: float = GAIN_ROOM_THRESHOLD) -> dict[str, str]:
    """The caveats for ``run.summary``: ``seffi/caveats`` (``seffi/<task>/caveats`` if several), joined."""
    many = len(report.comparisons) > 1
    out = {}
    for comp, name in zip(report.comparisons, keys.comparison_names(report.comparisons), strict=True):
        notes = comparison_caveats(comp, threshold)
        if notes:
            out[f"seffi/{name}/caveats" if many else "seffi/caveats"] = " | ".join(notes)
    return out
