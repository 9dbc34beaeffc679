"""Analytic coverage curves: iid sampling from a skewed base model vs the no-repeat oracle (no training).

A base model picks one of M strategies with Zipf probabilities p_s ∝ s^(-skew). Sampled k times iid it
covers E|S_k| = Σ_s 1 - (1 - p_s)^k strategies; the oracle never repeats, so it covers min(k, M). The
gap between the two is all an exploration policy can win. This script prints both curves, the time
to cover 80% and 100% of the strategies, and saves the coverage plot.

    python examples/analytic_iid_vs_oracle.py --strategies 8 --skew 1.5 --budget 32
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from seffi.coverage import IidBaseline, OracleBaseline
from seffi.experiment.example_args import parse_args
from seffi.report.plots import plot_coverage, save_figure
from seffi.report.schema import Comparison


@dataclass
class Args:
    """Analytic iid vs oracle coverage curves for a chosen skew."""

    strategies: int = 8  # M, the number of strategies
    skew: float = 1.0  # Zipf exponent of the base model (0 = uniform)
    budget: int = 32  # K, the largest sample budget shown
    out: str = "runs/analytic"  # folder for coverage.png
    smoke: bool = False  # tiny sizes, for CI


def main(args: Args) -> None:
    if args.smoke:
        args.strategies, args.budget = 4, 8
    m, K = args.strategies, args.budget
    names = [f"s{i + 1}" for i in range(m)]
    p = np.arange(1, m + 1, dtype=float) ** -args.skew
    p /= p.sum()

    iid = IidBaseline.from_probabilities(dict(zip(names, p, strict=True)), strategies=names).curves(K)
    oracle = OracleBaseline(strategies=names).curves(K)

    # Sanity check against the closed form (the library uses DPs and exact formulas internally).
    closed = np.array([(1 - (1 - p) ** k).sum() / m for k in range(1, K + 1)])
    assert np.allclose(iid.coverage, closed), "exact iid coverage disagrees with the closed form"

    print(f"M={m} strategies, Zipf skew {args.skew:g}: p = {np.round(p, 3).tolist()}")
    print(f"{'k':>4} {'C_iid(k)':>9} {'C_oracle(k)':>12} {'F_iid(k)':>9} {'N_iid(k)':>9}")
    for k in sorted({1, 2, 4, 8, 16, 32, 64, K} & set(range(1, K + 1))):
        i = k - 1
        print(
            f"{k:>4} {iid.coverage[i]:>9.3f} {oracle.coverage[i]:>12.3f} "
            f"{iid.full_coverage[i]:>9.3f} {iid.novelty[i]:>9.3f}"
        )
    for tau in ("0.8", "1.0"):
        t_iid, t_or = iid.time_to_coverage[tau], oracle.time_to_coverage[tau]
        print(f"T({tau}) median: iid {t_iid.median}, oracle {t_or.median}  (None = not reached by K={K})")
    mean_t1 = iid.time_to_coverage["1.0"].mean
    if mean_t1 is not None:
        print(f"E[T(1)] of iid (expected samples to see every strategy): {mean_t1:.2f}; oracle: {m}")
    print(f"AUC@{K}: iid {iid.auc:.3f}, oracle {oracle.auc:.3f}")

    comparison = Comparison.from_curves(
        task=f"Zipf(M={m}, skew={args.skew:g}) base model, exact curves", policies={}, iid=iid, oracle=oracle
    )
    path = save_figure(plot_coverage(comparison), Path(args.out) / "coverage.png")
    print(f"plot: {path}")


if __name__ == "__main__":
    main(parse_args(Args))
