"""Surface diversity of a group of completions, and Spearman's rank correlation to compare it with coverage.

Lee et al. (2026, "Are We Measuring Strategy or Phrasing?") find that surface metrics are unreliable
proxies for approach-level diversity. seffi measures the approach level exactly (its validators
attribute every trace); these functions give the surface level of the same groups, so the two can be
put side by side (`rank_correlation` across methods and checkpoints).

A *group* is the sequence of G completion strings sampled for one prompt. Tokens are the
whitespace-separated words of a text (``text.split()``, so newlines separate tokens too). Metrics:

* `distinct_n` — distinct n-grams / total n-grams, pooled over the group (Li et al. 2016);
* `pairwise_edit_distance` — mean over pairs ``i < j`` of the token-level Levenshtein distance
  divided by the longer token count;
* `distinct_rate` — distinct strings / G;
* `surface_metrics` — all of them as one flat dict.

This module needs numpy only (no torch).

Examples:
    >>> group = ["right down answer 1 1", "down right answer 1 1", "right down answer 1 1"]
    >>> round(distinct_n(group, 1), 3)  # 4 distinct words (right down answer 1) of 15
    0.267
    >>> distinct_rate(group)  # doctest: +ELLIPSIS
    0.666...
    >>> round(pairwise_edit_distance(group), 3)  # pairs: 2/5, 0/5, 2/5
    0.267
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from seffi.errors import SeffiError

__all__ = [
    "SURFACE_KEYS",
    "distinct_n",
    "distinct_rate",
    "pairwise_edit_distance",
    "rank_correlation",
    "surface_metrics",
]

#: The keys of `surface_metrics`, in order.
SURFACE_KEYS = ("distinct_1", "distinct_2", "distinct_3", "distinct_4", "edit_distance", "distinct_rate")

# Pairs are processed in chunks so one DP row over a chunk holds at most this many cells (~8 MB).
_DP_CELLS = 1 << 20


def _group(texts: Any) -> list[str]:
    """The group as a list of strings, or one clear error."""
    if isinstance(texts, (str, bytes)):
        raise SeffiError("texts must be a sequence of completion strings (a group), not one string")
    try:
        group = list(texts)
    except TypeError:
        raise SeffiError(f"texts must be a sequence of strings, got {type(texts).__name__}") from None
    for i, t in enumerate(group):
        if not isinstance(t, str):
            raise SeffiError(f"texts must be strings; element {i} is {type(t).__name__}")
    return group


def distinct_n(texts: Sequence[str], n: int) -> float:
    """Distinct n-grams over total n-grams, pooled over the group.

    Every text contributes its ``len(tokens) - n + 1`` n-grams (none when it has fewer than ``n``
    tokens); the n-grams of all texts are pooled, so a phrase repeated across the group counts once
    among the distinct ones. When the group has no n-gram at all (an empty group, or every text shorter
    than ``n`` tokens) the value is ``0.0``: no n-gram, no surface diversity — and every group gets a
    number, which keeps rank correlations over groups defined.

    Args:
        texts: The group's completion strings.
        n: The n-gram length, ``n >= 1``.

    Returns:
        A value in ``[0, 1]``; 1 when no n-gram repeats anywhere in the group.

    Raises:
        SeffiError: ``n`` is not a positive int, or ``texts`` is not a sequence of strings.
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise SeffiError(f"n must be a positive int, got {n!r}")
    n = int(n)
    seen: set[tuple[str, ...]] = set()
    total = 0
    for text in _group(texts):
        tokens = text.split()
        grams = [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]
        total += len(grams)
        seen.update(grams)
    return len(seen) / total if total else 0.0


def distinct_rate(texts: Sequence[str]) -> float:
    """Distinct strings over the group size G (exact string equality, whitespace included).

    Args:
        texts: The group's completion strings.

    Returns:
        A value in ``(0, 1]`` (``1/G`` when every completion is the same); ``0.0`` for an empty group.

    Raises:
        SeffiError: ``texts`` is not a sequence of strings.
    """
    group = _group(texts)
    return len(set(group)) / len(group) if group else 0.0


def _token_ids(group: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Each text's tokens as ints, padded with -1 to the longest, and the token counts."""
    vocab: dict[str, int] = {}
    seqs = [[vocab.setdefault(w, len(vocab)) for w in text.split()] for text in group]
    lengths = np.array([len(s) for s in seqs], dtype=np.int64)
    ids = np.full((len(seqs), int(lengths.max(initial=0))), -1, dtype=np.int64)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = s
    return ids, lengths


def _levenshtein_pairs(a: np.ndarray, la: np.ndarray, b: np.ndarray, lb: np.ndarray) -> np.ndarray:
    """Token Levenshtein distance of each row pair ``(a[p, :la[p]], b[p, :lb[p]])``.

    One DP row per token of ``a``, computed for every pair at once. Within a row, the insertion term
    makes ``D[i, j]`` depend on ``D[i, j - 1]``; it is resolved without a Python loop as
    ``D[i, j] = j + min_{k <= j} (t[k] - k)``, where ``t`` is the row before insertions. Because
    ``D[i, j]`` depends on the prefixes ``a[:i]`` and ``b[:j]`` only, the padding beyond a sequence's
    length never reaches the entry read out at ``(la[p], lb[p])``.
    """
    # Layout (column j, pair p): the running minimum then runs over contiguous rows of length ``pairs``.
    pairs, width = b.shape
    bt = np.ascontiguousarray(b.T)
    cols = np.arange(width + 1, dtype=np.int32)[:, None]
    out = np.empty(pairs, dtype=np.int64)
    prev = np.repeat(cols, pairs, axis=1)
    t = np.empty_like(prev)
    done = la == 0
    out[done] = lb[done]
    for i in range(1, a.shape[1] + 1):
        cost = a[:, i - 1] != bt  # padded b (-1) vs padded a (-1) compare equal: never read out
        t[0] = i
        np.minimum(prev[1:] + 1, prev[:-1] + cost, out=t[1:])
        t -= cols
        np.minimum.accumulate(t, axis=0, out=prev)
        prev += cols
        end = np.flatnonzero(la == i)
        out[end] = prev[lb[end], end]
    return out


def pairwise_edit_distance(texts: Sequence[str]) -> float:
    """Mean normalised token-level Levenshtein distance over all pairs ``i < j`` of the group.

    The distance of a pair is the minimum number of token insertions, deletions and substitutions
    turning one token sequence (``text.split()``) into the other, divided by the longer sequence's
    token count, so it lies in ``[0, 1]``. Two texts without tokens are at distance 0. A group of fewer
    than two texts has no pair and gives ``0.0``.

    Cost: ``G (G - 1) / 2`` DPs of ``L_i x L_j`` cells, vectorised over pairs with numpy (one pass per
    token position of the longer text).

    Args:
        texts: The group's completion strings.

    Returns:
        The mean over pairs, in ``[0, 1]``.

    Raises:
        SeffiError: ``texts`` is not a sequence of strings.
    """
    group = _group(texts)
    if len(group) < 2:
        return 0.0
    ids, lengths = _token_ids(group)
    left, right = np.triu_indices(len(group), k=1)
    # The longer text of a pair goes on the DP's row axis: the loop then runs to the longest text once.
    swap = lengths[left] < lengths[right]
    left, right = np.where(swap, right, left), np.where(swap, left, right)
    chunk = max(1, _DP_CELLS // (ids.shape[1] + 1))
    total = 0.0
    for s in range(0, len(left), chunk):
        li, ri = left[s : s + chunk], right[s : s + chunk]
        dist = _levenshtein_pairs(ids[li], lengths[li], ids[ri], lengths[ri])
        longer = np.maximum(lengths[li], lengths[ri])
        total += float(np.sum(np.divide(dist, longer, out=np.zeros(len(li)), where=longer > 0)))
    return total / len(left)


def surface_metrics(texts: Sequence[str]) -> dict[str, float]:
    """Every surface metric of one group.

    Args:
        texts: The group's completion strings.

    Returns:
        ``{"distinct_1".."distinct_4", "edit_distance", "distinct_rate"}`` (keys `SURFACE_KEYS`).

    Raises:
        SeffiError: ``texts`` is not a sequence of strings.
    """
    group = _group(texts)
    out = {f"distinct_{n}": distinct_n(group, n) for n in (1, 2, 3, 4)}
    out["edit_distance"] = pairwise_edit_distance(group)
    out["distinct_rate"] = distinct_rate(group)
    return out


def _average_ranks(x: np.ndarray) -> np.ndarray:
    """1-based ranks with tied values sharing the mean of the ranks they occupy."""
    _, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    start = np.cumsum(counts) - counts  # 0-based position of each distinct value's first copy
    return (start + (counts + 1) / 2.0)[inverse.reshape(-1)]


def rank_correlation(a: Sequence[float], b: Sequence[float]) -> float:
    """Spearman's rho: the Pearson correlation of the average ranks of ``a`` and ``b``.

    Ties get the mean of the ranks they span (as ``scipy.stats.spearmanr``). The value is a point
    estimate with no interval and no bootstrap: across a handful of methods and checkpoints it is a
    description, not a test. For reading it, under independence rho has mean 0 and standard deviation
    ``1 / sqrt(n - 1)`` (0.33 at n = 10), so only values well beyond that say the two orders agree.

    Args:
        a: One value per item (e.g. a surface metric per method and checkpoint).
        b: The other value of the same items (e.g. C(k) or the gain).

    Returns:
        rho in ``[-1, 1]``; ``nan`` when a side is constant, has fewer than 2 items, or holds a NaN.

    Raises:
        SeffiError: ``a`` and ``b`` are not 1-D sequences of numbers of the same length.
    """
    try:
        x = np.asarray(a, dtype=np.float64)
        y = np.asarray(b, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise SeffiError(f"rank_correlation needs two sequences of numbers: {exc}") from None
    if x.ndim != 1 or y.ndim != 1 or x.shape != y.shape:
        raise SeffiError(
            f"rank_correlation needs two 1-D sequences of one length, got {x.shape} and {y.shape}"
        )
    if x.size < 2 or np.isnan(x).any() or np.isnan(y).any():
        return float("nan")
    rx, ry = _average_ranks(x), _average_ranks(y)
    rx, ry = rx - rx.mean(), ry - ry.mean()
    denom = float(np.sqrt(np.dot(rx, rx) * np.dot(ry, ry)))
    if denom == 0.0:
        return float("nan")
    return float(np.clip(np.dot(rx, ry) / denom, -1.0, 1.0))
