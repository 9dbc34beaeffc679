"""Match sets as bitmasks, their subsets, and how many samples meet each subset — linear in n.

The set-valued U-statistics (novelty from samples, its delete-one jackknife) need, for every
non-empty subset B of every distinct match set A, Y_B: the number of samples whose match set meets
B. Comparing every subset with every sample costs (distinct sets x 2^|A| x n), quadratic in n on a
flat law where most match sets differ. Here Y_B comes from inclusion-exclusion over superset
counts instead: with c(T) the number of samples whose match set contains T (every sample adds one
to each of its own subsets: sum_j 2^|A_j| additions), Y_B = sum over non-empty T subset of B of
(-1)^(|T|+1) c(T), a signed subset-sum over the |A| bits of each set. The work is linear in n and
exponential only in the size of a match set, never in the number of strategies M. Bitmasks are
taken over the strategies some sample matches, so M itself is unbounded; at most
`MAX_SET_STRATEGIES` distinct strategies may appear in set-valued match sets.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

__all__ = ["MAX_SET_STRATEGIES", "distinct_sets", "meet_counts", "nonempty_subsets", "used_masks"]

#: Distinct strategies set-valued match sets may name (bitmasks are int64).
MAX_SET_STRATEGIES = 62


def used_masks(X: np.ndarray) -> tuple[np.ndarray, int]:
    """Bitmasks of boolean rows over the columns some row uses: (int64 array, shape (N,), bits used).

    Raises:
        ValueError: more than `MAX_SET_STRATEGIES` columns are used (one line, what to do).
    """
    X = np.asarray(X, dtype=bool)
    used = np.flatnonzero(X.any(axis=0))
    if used.size > MAX_SET_STRATEGIES:
        raise ValueError(
            f"set-valued match sets name {used.size} distinct strategies; set-valued novelty and its "
            f"intervals handle at most {MAX_SET_STRATEGIES}: record single-label samples (one strategy "
            "each, any M), or merge strategies that are always matched together"
        )
    bits = np.arange(used.size, dtype=np.int64)
    return (X[:, used].astype(np.int64) << bits).sum(axis=1), int(used.size)


def distinct_sets(masks: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct (dataset, mask) pairs of masks (D, n): (dataset of each, mask, multiplicity)."""
    D, n = masks.shape
    d_all, m_all = np.repeat(np.arange(D), n), masks.ravel()
    order = np.lexsort((m_all, d_all))
    d_s, m_s = d_all[order], m_all[order]
    first = np.flatnonzero(np.r_[True, (d_s[1:] != d_s[:-1]) | (m_s[1:] != m_s[:-1])])
    return d_s[first], m_s[first], np.diff(np.r_[first, d_s.size])


def nonempty_subsets(sets: np.ndarray, m: int) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Every non-empty subset B of each distinct match set A, grouped by |A| (the U-statistics' terms).

    Args:
        sets: int64 array, shape (S,): match-set bitmasks over m strategies.
        m: Number of strategies (bits).

    Yields:
        ``(g, sub, sign)`` per set size r >= 1 (an empty set has no term): ``g`` int array, shape
        (G,): the sets of size r; ``sub`` int64 array, shape (G, 2^r - 1): their subsets' masks,
        subset q (1 .. 2^r - 1) taking the set's bits where q has ones; ``sign`` float array,
        shape (2^r - 1,): ``-(-1)^|B|``.
    """
    bits = ((sets[:, None] >> np.arange(m, dtype=np.int64)) & 1).astype(bool)
    size = bits.sum(axis=1)
    for r in np.unique(size[size > 0]).tolist():
        g = np.flatnonzero(size == r)
        pos = np.nonzero(bits[g])[1].reshape(g.size, r)  # bit positions, ascending per row
        q = np.arange(1, 1 << r, dtype=np.int64)
        pattern = (q[None, :] >> np.arange(r, dtype=np.int64)[:, None]) & 1  # (r, 2^r - 1)
        yield g, (np.int64(1) << pos) @ pattern, np.where(pattern.sum(axis=0) % 2 == 1, 1.0, -1.0)


def subset_sum(F: np.ndarray, r: int) -> np.ndarray:
    """In place over the last axis (2^r patterns): F[q] <- sum of F[t] over t subset of q."""
    idx = np.arange(1 << r)
    for b in range(r):
        has = idx[(idx >> b) & 1 == 1]
        F[..., has] += F[..., has ^ (1 << b)]
    return F


def meet_counts(
    d_of: np.ndarray,
    sets: np.ndarray,
    mult: np.ndarray,
    groups: list[tuple[np.ndarray, np.ndarray, np.ndarray]],
) -> list[np.ndarray]:
    """Y_B, the samples of its dataset meeting B, for every subset of every distinct set, per group.

    Args:
        d_of: int array, shape (S,): dataset of each distinct set.
        sets: int64 array, shape (S,): the distinct sets' masks.
        mult: int array, shape (S,): how many samples hold each.
        groups: ``list(nonempty_subsets(sets, m))``.

    Returns:
        One int64 array per group, shape (G, 2^r - 1), aligned with the group's ``sub``.
    """
    del sets
    if not groups:
        return []
    # c(T): the samples containing T, for every non-empty T that is a subset of some set.
    T = np.concatenate([sub.ravel() for _, sub, _ in groups])
    d = np.concatenate([np.repeat(d_of[g], sub.shape[1]) for g, sub, _ in groups])
    w = np.concatenate([np.repeat(mult[g], sub.shape[1]) for g, sub, _ in groups])
    values, tid = np.unique(T, return_inverse=True)
    keys, kinv = np.unique(d * values.size + tid.reshape(-1), return_inverse=True)
    del keys
    count = np.bincount(kinv.reshape(-1), weights=w).astype(np.int64)
    out, at = [], 0
    for _, sub, sign in groups:
        G, P = sub.shape
        r = int(P + 1).bit_length() - 1
        c = count[kinv.reshape(-1)[at : at + G * P]].reshape(G, P)
        at += G * P
        F = np.zeros((G, P + 1), dtype=np.int64)
        F[:, 1:] = np.where(sign > 0, c, -c)  # (-1)^(|T|+1) c(T): sign is +1 for odd |T|
        out.append(subset_sum(F, r)[:, 1:])
    return out
