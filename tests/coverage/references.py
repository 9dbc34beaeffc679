"""Per-replicate reference loops for the batched set-valued estimators (tests and benchmarks).

Each loops over one dataset's distinct match sets and their subsets in Python, the direct reading of
the inclusion-exclusion the batched code in `seffi.coverage.estimators` vectorises.
"""

from __future__ import annotations

import numpy as np

from seffi.coverage import estimators as est


def novelty_by_loops(X: np.ndarray, K: int) -> np.ndarray:
    """The per-replicate reference novelty: one Python step per distinct match set and subset B."""
    n = X.shape[0]
    i1 = np.arange(min(K, n))
    lf = est.log_factorial(n)
    masks = (X.astype(np.int64) << np.arange(X.shape[1], dtype=np.int64)).sum(axis=1)
    uniq, counts = np.unique(masks, return_counts=True)
    out = np.zeros(i1.size)
    for mask, c in zip(uniq, counts, strict=True):
        b = int(mask)
        while b:
            y_b = int(counts[(uniq & b) != 0].sum())
            sign = -((-1) ** bin(b).count("1"))
            out += c * sign * np.exp(est._log_binom_ratio(n - y_b, n - 1, i1, lf))
            b = (b - 1) & int(mask)
    return np.clip(out / n, 0.0, 1.0)


def full_coverage_by_loops(X: np.ndarray, m: int, K: int) -> np.ndarray:
    """The reference set-valued F(k): one inclusion-exclusion over the 2^m subsets per dataset."""
    n = X.shape[0]
    ks = np.arange(1, min(K, n) + 1)
    if m > X.shape[1] or not X[:, :m].any(axis=0).all():
        return np.zeros(ks.size)
    if X[:, :m].sum(axis=1).max() <= 1:
        return est.full_coverage_samples_many(X[None], m, K)[0]  # single-label DP, unchanged
    masks = (X[:, :m].astype(np.int64) << np.arange(m, dtype=np.int64)).sum(axis=1)
    disjoint, sign = est._subset_table(masks, np.ones(n), m)
    y_b = n - np.rint(disjoint).astype(np.int64)
    ratio = np.exp(est._log_binom_ratio(n - y_b[None, :], n, ks[:, None], est.log_factorial(n)))
    return np.clip((sign[None, :] * ratio).sum(axis=1), 0.0, 1.0)


def novelty_many_by_loops(X: np.ndarray, K: int) -> np.ndarray:
    """`novelty_by_loops` of each dataset in ``X`` (D, n, M): shape (D, min(K, n))."""
    return np.stack([novelty_by_loops(x, K) for x in X])


def full_coverage_many_by_loops(X: np.ndarray, m: int, K: int) -> np.ndarray:
    """`full_coverage_by_loops` of each dataset in ``X`` (D, n, M): shape (D, min(K, n))."""
    return np.stack([full_coverage_by_loops(x, m, K) for x in X])
