"""Match sets as bitmasks, their subsets, and how many samples meet each subset — linear in n.

The set-valued U-statistics need, for every non-empty subset B of every distinct match set, Y_B:
the samples whose match set meets B. By inclusion-exclusion over superset counts c(T) (samples
whose set contains T), Y_B = sum over non-empty T subset of B of (-1)^(|T|+1) c(T): linear in n,
exponential only in a match set's size. At most `MAX_SET_STRATEGIES` strategies may appear in one input.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

__all__ = ["MAX_SET_STRATEGIES", "distinct_sets", "meet_counts", "nonempty_subsets", "pair_ids", "used_masks"]

#: Distinct strategies set-valued match sets may name (bitmasks are int64).
MAX_SET_STRATEGIES = 62


def used_masks(X: np.ndarray) -> tuple[np.ndarray, int]:
    """(bitmasks, bits used) of boolean rows (..., n, m) over each dataset's own used columns.

    A dataset (the last two axes) may use at most `MAX_SET_STRATEGIES` columns, whatever m is.
    """
    X = np.asarray(X, dtype=bool)
    used = X.any(axis=-2)
    top = int(used.sum(axis=-1).max(initial=0))
    if top > MAX_SET_STRATEGIES:
        raise ValueError(
            f"set-valued match sets name {top} distinct strategies; set-valued novelty and its "
            f"intervals handle at most {MAX_SET_STRATEGIES} per input: record single-label samples "
            "(one strategy each, any M), or merge strategies that are always matched together"
        )
    bit = np.where(used, np.left_shift(np.int64(1), np.maximum(np.cumsum(used, axis=-1) - 1, 0)), 0)
    return (X.astype(np.int64) @ bit[..., :, None])[..., 0], top


def pair_ids(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Dense ids of the pairs (a, b) in sorted order, and the position of each id's first pair."""
    order = np.lexsort((b, a))
    new = np.r_[True, (a[order][1:] != a[order][:-1]) | (b[order][1:] != b[order][:-1])]
    ids = np.empty(a.size, dtype=np.int64)
    ids[order] = np.cumsum(new) - 1
    return ids, order[new]


def distinct_sets(masks: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct (dataset, mask) pairs of masks (D, n): (dataset of each, mask, multiplicity)."""
    ids, first = pair_ids(np.repeat(np.arange(masks.shape[0]), masks.shape[1]), masks.ravel())
    return first // masks.shape[1], masks.ravel()[first], np.bincount(ids)


def nonempty_subsets(sets: np.ndarray, m: int) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Every non-empty subset B of each distinct match set (masks ``sets`` (S,) over m bits), by size.

    Yields:
        ``(g, sub, sign)`` per set size r >= 1: the sets ``g`` (G,) of size r, their subsets' masks
        ``sub`` (G, 2^r - 1) (subset q takes the bits where q has ones), ``sign`` = ``-(-1)^|B|``.
    """
    bits = ((sets[:, None] >> np.arange(m, dtype=np.int64)) & 1).astype(bool)
    size = bits.sum(axis=1)
    for r in np.unique(size[size > 0]).tolist():
        g = np.flatnonzero(size == r)
        pos = np.nonzero(bits[g])[1].reshape(g.size, r)  # bit positions, ascending per row
        q = np.arange(1, 1 << r, dtype=np.int64)
        pattern = (q[None, :] >> np.arange(r, dtype=np.int64)[:, None]) & 1  # (r, 2^r - 1)
        yield g, (np.int64(1) << pos) @ pattern, np.where(pattern.sum(axis=0) % 2 == 1, 1.0, -1.0)


def meet_counts(
    d_of: np.ndarray, mult: np.ndarray, groups: list[tuple[np.ndarray, np.ndarray, np.ndarray]]
) -> list[np.ndarray]:
    """Y_B (samples of its dataset meeting B) per group of ``nonempty_subsets``, aligned with its ``sub``.

    ``d_of``, ``mult`` (S,): each distinct set's dataset and multiplicity.
    """
    if not groups:
        return []
    # c(T): the samples containing T, for every non-empty T that is a subset of some set.
    T = np.concatenate([sub.ravel() for _, sub, _ in groups])
    d = np.concatenate([np.repeat(d_of[g], sub.shape[1]) for g, sub, _ in groups])
    w = np.concatenate([np.repeat(mult[g], sub.shape[1]) for g, sub, _ in groups])
    values, tid = np.unique(T, return_inverse=True)
    kinv = np.unique(d * values.size + tid.reshape(-1), return_inverse=True)[1]
    count = np.bincount(kinv.reshape(-1), weights=w).astype(np.int64)
    out, at = [], 0
    for _, sub, sign in groups:
        G, P = sub.shape
        r = int(P + 1).bit_length() - 1
        c = count[kinv.reshape(-1)[at : at + G * P]].reshape(G, P)
        at += G * P
        F = np.zeros((G, P + 1), dtype=np.int64)
        F[:, 1:] = np.where(sign > 0, c, -c)  # (-1)^(|T|+1) c(T): sign is +1 for odd |T|
        idx = np.arange(1 << r)
        for b in range(r):  # in place: F[q] <- sum of F[t] over t subset of q
            has = idx[(idx >> b) & 1 == 1]
            F[:, has] += F[:, has ^ (1 << b)]
        out.append(F[:, 1:])
    return out
