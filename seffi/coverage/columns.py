"""The metric column table: every quantity the curves report, declared once.

Each `Column` says where it shows (`Curves`, report.json, W&B, report.md) and what its estimator needs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["BY_NAME", "COLUMNS", "MARKDOWN_TAU", "PER_K", "SUM_STATS", "Column", "column", "curves_arrays"]

#: What an estimator sums over runs per (input, k), in storage order: the runs that reached k, then
#: the statistics a per-k column is the ratio of (``Column.stat``); (risk, event) per tau follow.
SUM_STATS: tuple[str, ...] = ("runs", "covered", "novel", "new", "full", "valid_covered", "valid_any")

#: How a column is indexed: per k, per rarity bin and k, per tau, one number, a count, or a gain.
Shape = Literal["k", "bins_k", "tau", "scalar", "count", "gain"]
#: Which budgets a per-k column is logged to W&B at: log-spaced k, or only at K.
WandbAt = Literal["log_k", "budget"]
#: What the estimator needs beyond first hits: correctness, the base law, extrapolation, the caller.
Needs = Literal["valid", "base_law", "extrapolation", "caller"]


@dataclass(frozen=True)
class Column:
    """One reported quantity and everything that shows it."""

    name: str  # field of report.json's curve set; for shape "gain", of the policy result
    shape: Shape
    doc: str  # one line saying what it is
    curves: str | None = None  # attribute of ``Curves`` ("": none); default ``name``
    dtype: Literal["float", "bool", "int"] = "float"
    ci: bool = False  # ``Curves`` holds ``<curves>_lo`` / ``<curves>_hi``
    report_ci: bool = False  # report.json holds ``<name>_lo`` / ``<name>_hi`` too
    unit: bool = False  # values in [0, 1] (checked by the schema); else >= 0
    required: bool = False  # report.json's curve set must have it
    wandb: str | None = None  # W&B key stem under ``seffi/`` (``coverage/k=<k>``); None: not logged
    wandb_at: WandbAt | None = None
    wandb_index: str = "k"  # the letter of the budget in the key (``novelty/i=<i>``)
    header: str | None = None  # report.md table header ("{K}": the budget); None: not in the table
    needs: Needs | None = None
    stat: str | None = None  # the statistic of `SUM_STATS` whose ratio to ``runs`` a per-k column is
    per_strategy: bool = False  # the statistic counts strategies: divided by M_x

    @property
    def curves_name(self) -> str:
        """The attribute of ``Curves`` ("" when ``Curves`` does not hold it)."""
        return self.name if self.curves is None else self.curves


#: report.md shows time to coverage at this threshold.
MARKDOWN_TAU = 0.8


def _rate(name: str, doc: str, stat: str, *, wandb_at: WandbAt | None = None, **extra: Any) -> Column:
    """A per-k probability with an interval, the ratio of ``stat`` to ``runs``; logged under ``name``."""
    wandb = None if wandb_at is None else name
    return Column(name, "k", doc, ci=True, unit=True, wandb=wandb, wandb_at=wandb_at, stat=stat, **extra)


def _coverage(name: str, doc: str, stat: str, **extra: Any) -> Column:
    """A coverage curve: a `_rate` over the M_x strategies, logged at log-spaced k, its interval reported."""
    return _rate(name, doc, stat, wandb_at="log_k", report_ci=True, per_strategy=True, **extra)


def _auc(name: str, doc: str, **extra: Any) -> Column:
    """An area under a coverage curve: a [0, 1] number with its interval, in report.json too."""
    return Column(name, "scalar", doc, ci=True, report_ci=True, unit=True, **extra)


#: Every column; those with a header appear in report.md's table in this order.
COLUMNS: tuple[Column, ...] = (
    _coverage("coverage", "C(k) = E[|S_k| / M]", "covered", required=True),
    _rate(
        "novelty",
        "N(i) = Pr[sample i adds a strategy not seen before]",
        "novel",
        wandb_at="log_k",
        wandb_index="i",
    ),
    Column("expected_new", "k", "expected number of new strategies at sample i", ci=True, stat="new"),
    _coverage(
        "valid_coverage",
        "coverage counting only the strategies of correct samples",
        "valid_covered",
        needs="valid",
    ),
    _rate("valid_at_k", "best-of-k correctness, Pr[some sample <= k is correct]", "valid_any", needs="valid"),
    Column(
        "coverage_by_rarity",
        "bins_k",
        "coverage contributed per base-probability bin (row 0 = most common)",
        unit=True,
        needs="base_law",
    ),
    Column(
        "extrapolated",
        "k",
        "True where the value is a model-based extrapolation",
        dtype="bool",
        needs="extrapolation",
    ),
    _auc("auc", "AUC(K) = (1/K) sum_k C(k)", wandb="auc", header="AUC@{K} [95% CI]"),
    Column(
        "gain",
        "gain",
        "(AUC - AUC_iid) / (AUC_oracle - AUC_iid)",
        curves="",
        ci=True,
        wandb="gain_vs_iid",
        header="gain vs iid [95% CI]",
    ),
    Column(
        "time_to_coverage",
        "tau",
        "T(tau) = min{k : |S_k|/M >= tau}: survival Pr[T > k], median, restricted mean, censored",
        wandb="time_to_coverage",
        header=f"T({MARKDOWN_TAU:g}) median",
    ),
    _rate(
        "full_coverage", "F(k) = Pr[|S_k| = M]", "full", wandb_at="budget", header="full coverage at K={K}"
    ),
    _auc("valid_auc", "AUC of valid_coverage", needs="valid"),
    Column(
        "valid_rate",
        "scalar",
        "share of samples that were correct",
        curves="",
        unit=True,
        wandb="valid_rate",
        header="valid rate",
        needs="caller",
    ),
    Column(
        "n_samples", "count", "samples behind the curves", curves="samples", dtype="int", wandb="episodes"
    ),
    Column("n_inputs", "count", "inputs behind the curves", dtype="int", wandb="inputs"),
    Column("n_runs", "count", "runs behind the curves", dtype="int"),
)

#: Column by name.
BY_NAME: dict[str, Column] = {c.name: c for c in COLUMNS}

#: The per-k curves an estimator computes from runs (``Curves`` attribute names), in the storage
#: order of their statistics in `SUM_STATS`.
PER_K: tuple[str, ...] = tuple(
    c.curves_name for c in sorted((c for c in COLUMNS if c.stat), key=lambda c: SUM_STATS.index(str(c.stat)))
)


def column(name: str) -> Column:
    """The column called ``name`` (KeyError names the known ones)."""
    try:
        return BY_NAME[name]
    except KeyError:
        raise KeyError(f"no metric column {name!r}; known: {sorted(BY_NAME)}") from None


def curves_arrays() -> tuple[str, ...]:
    """``Curves`` attributes that hold arrays of a column: per-k values, their bounds, rarity rows."""
    out: list[str] = []
    for c in COLUMNS:
        if c.shape not in ("k", "bins_k") or not c.curves_name:
            continue
        out.append(c.curves_name)
        if c.ci:
            out += [f"{c.curves_name}_lo", f"{c.curves_name}_hi"]
    return tuple(out)
