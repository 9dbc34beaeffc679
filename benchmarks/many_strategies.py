"""The iid baseline from samples at many declared strategies: cost of ``curves()`` and interval coverage.

1. **Cost**: ``IidBaseline.from_samples(...).curves(K)`` (200 replicates) on one input of n samples,
   single-label (a Zipf(1.0) law over M) and set-valued (each sample names 0-3 of 12 strategies, all
   M declared), at K = n and K = 2n; goal at M = 1,000, n = 2,000: <= 5 s.
2. **Coverage**: over ``--datasets`` simulated single-label datasets per law, how often the 95 %
   interval of C(n/2), C(n) and AUC(n) contains the exact truth sum_s 1 - (1 - pi_s)^k, and the
   interval's mean width over the width that would cover 95 % (twice the 0.95 quantile of
   |estimate - truth|). Goal: coverage 0.93-0.97 (binomial SE 0.011 at 400 datasets).

    python benchmarks/many_strategies.py                   # both parts, 400 datasets per law
    python benchmarks/many_strategies.py --only cost
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from seffi.coverage import IidBaseline

LAWS = (  # (label, M, n, Zipf exponent): single-label, every sample names one strategy
    ("Zipf(1.0), M=100, n=200", 100, 200, 1.0),
    ("Zipf(1.0), M=100, n=1000", 100, 1000, 1.0),
    ("Zipf(0.5), M=1000, n=500", 1000, 500, 0.5),
    ("Zipf(1.0), M=1000, n=2000", 1000, 2000, 1.0),
)


def zipf(M: int, s: float) -> np.ndarray:
    p = 1.0 / np.arange(1, M + 1) ** s
    return p / p.sum()


def single_label(M: int, n: int, s: float, rng: np.random.Generator) -> list[list[str]]:
    return [[f"s{j}"] for j in rng.choice(M, size=n, p=zipf(M, s))]


def set_valued(n: int, rng: np.random.Generator) -> list[list[str]]:
    X = rng.random((n, 12)) < 0.6 / np.arange(1, 13) ** 0.7
    return [[f"s{j}" for j in np.flatnonzero(row)] for row in X]


def bench_cost() -> None:
    rng = np.random.default_rng(0)
    print("curves() of one input, 200 replicates (CPU s; goal at M = 1,000, n = 2,000: <= 5 s)")
    print(f"{'data':12s} {'M':>6s} {'n':>6s} {'K = n':>8s} {'K = 2n':>8s}")
    for M, n in ((100, 1000), (1000, 1000), (1000, 2000)):
        names = [f"s{j}" for j in range(M)]
        for kind, rows in (
            ("single-label", single_label(M, n, 1.0, rng)),
            ("set-valued", set_valued(n, rng)),
        ):
            base = IidBaseline.from_samples(rows, strategies=names)
            times = []
            for K in (n, 2 * n):
                t = time.process_time()
                base.curves(K, n_boot=200, seed=1)
                times.append(time.process_time() - t)
            print(f"{kind:12s} {M:6d} {n:6d} {times[0]:8.2f} {times[1]:8.2f}")


def bench_coverage(datasets: int) -> None:
    print(f"single-label 95% interval coverage ({datasets} datasets per law, 200 replicates; SE ~0.011)")
    print(f"{'law':28s} {'C(n/2)':>7s} {'C(n)':>7s} {'AUC(n)':>7s}   width / needed: C(n/2) C(n) AUC(n)")
    for label, M, n, s in LAWS:
        p = zipf(M, s)
        names = [f"s{j}" for j in range(M)]
        ks = np.array([n // 2, n])
        truth_c = (1.0 - (1.0 - p[None, :]) ** ks[:, None]).sum(axis=1) / M
        truth_auc = ((1.0 - (1.0 - p[None, :]) ** np.arange(1, n + 1)[:, None]).sum(axis=1) / M).mean()
        rng = np.random.default_rng(7)
        est, lo, hi = np.zeros((datasets, 3)), np.zeros((datasets, 3)), np.zeros((datasets, 3))
        for d in range(datasets):
            c = IidBaseline.from_samples(single_label(M, n, s, rng), strategies=names).curves(n, seed=d)
            est[d] = [*c.coverage[ks - 1], c.auc]
            lo[d] = [*c.coverage_lo[ks - 1], c.auc_lo]
            hi[d] = [*c.coverage_hi[ks - 1], c.auc_hi]
        truth = np.array([*truth_c, truth_auc])
        cover = ((lo <= truth) & (truth <= hi)).mean(axis=0)
        needed = 2 * np.quantile(np.abs(est - truth), 0.95, axis=0)
        ratio = (hi - lo).mean(axis=0) / needed
        print(
            f"{label:28s} "
            + " ".join(f"{v:7.3f}" for v in cover)
            + "   "
            + " ".join(f"{v:5.2f}x" for v in ratio)
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", type=int, default=400)
    ap.add_argument("--only", choices=("cost", "coverage"))
    args = ap.parse_args()
    if args.only != "coverage":
        bench_cost()
    if args.only != "cost":
        bench_coverage(args.datasets)


if __name__ == "__main__":
    main()
