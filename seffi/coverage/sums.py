"""The one estimator of adaptive curves: runs -> per-input sums -> curves.

Every per-k quantity of a run (coverage after k samples, whether sample k was new, the Kaplan-Meier
event and at-risk indicators at k, ...) is fixed the moment the run's k-th sample arrives, so the
curves need only, per input, integer *sums over runs* of those contributions: an array of shape
(U, K, N_STATS), whose statistics are the column table's (``seffi.coverage.columns``). They come
from two places that give the same integers — :func:`fold` adds a batch of samples as they arrive
(the streaming path), :func:`sums_from_runs` derives them from per-run first-hit indices for any K.
:mod:`seffi.coverage.sums_curves` turns them into curves. Integer sums merge exactly in any order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from seffi.coverage.columns import COLUMNS, PER_K, SUM_STATS
from seffi.coverage.curves import TAUS

__all__ = ["BASE_STATS", "METRICS", "N_STATS", "InputSums", "RunTable", "fold", "sums_from_runs"]

BY_CURVES = {c.curves_name: c for c in COLUMNS if c.stat}
#: Statistics summed per (input, k), in storage order (the column table's); ``risk``/``event`` follow
#: once per tau.
BASE_STATS: tuple[str, ...] = SUM_STATS
#: Curve metrics (in ``Curves``) and the statistic each is the ratio of (to ``runs``).
METRICS: dict[str, int] = {name: SUM_STATS.index(str(BY_CURVES[name].stat)) for name in PER_K}
#: Statistics that count strategies: divided by M_x to become fractions.
PER_STRATEGY: tuple[int, ...] = tuple(j for name, j in METRICS.items() if BY_CURVES[name].per_strategy)
N_STATS = len(BASE_STATS) + 2 * len(TAUS)
_S = {name: j for j, name in enumerate(BASE_STATS)}


def _need(m: np.ndarray) -> np.ndarray:
    """Strategies needed for each tau: int array, shape (U, len(TAUS)), from M_x, shape (U,)."""
    return np.ceil(np.asarray(m, dtype=np.float64)[:, None] * np.array(TAUS)[None, :] - 1e-9).astype(np.int64)


# -- state -----------------------------------------------------------------------------------------------


@dataclass
class RunTable:
    """Per run slot, what the curves need: first-hit indices (-1 = never) and lengths.

    Attributes:
        first_hit: int array, shape (S, C): 0-based index of the run's first sample matching column c.
        first_valid_hit: int array, shape (S, C): the same over correct samples only.
        n: int array, shape (S,): samples in the run.
        n_valid: int array, shape (S,): correct samples.
        first_valid: int array, shape (S,): index of the first correct sample, -1 if none.
    """

    columns: int
    first_hit: np.ndarray = field(init=False)
    first_valid_hit: np.ndarray = field(init=False)
    n: np.ndarray = field(init=False)
    n_valid: np.ndarray = field(init=False)
    first_valid: np.ndarray = field(init=False)

    #: Field -> fill value of a fresh slot; the per-run state is declared here once.
    FIELDS: ClassVar[dict[str, int]] = {
        "first_hit": -1,
        "first_valid_hit": -1,
        "n": 0,
        "n_valid": 0,
        "first_valid": -1,
    }
    MATRIX_FIELDS: ClassVar[tuple[str, ...]] = ("first_hit", "first_valid_hit")

    def __post_init__(self) -> None:
        for name, fill in self.FIELDS.items():
            shape = (0, self.columns) if name in self.MATRIX_FIELDS else (0,)
            setattr(self, name, np.full(shape, fill, dtype=np.int64))

    def grow(self, n_slots: int, n_columns: int | None = None) -> None:
        """Room for ``n_slots`` slots (amortised doubling) and ``n_columns`` columns."""
        if n_columns is not None and n_columns > self.columns:
            for name in self.MATRIX_FIELDS:
                arr = getattr(self, name)
                pad = np.full((arr.shape[0], n_columns - self.columns), self.FIELDS[name], dtype=np.int64)
                setattr(self, name, np.concatenate([arr, pad], axis=1))
            self.columns = n_columns
        have = self.n.shape[0]
        if n_slots > have:
            extra = max(n_slots, 2 * have, 64) - have
            for name, fill in self.FIELDS.items():
                shape = (extra, self.columns) if name in self.MATRIX_FIELDS else (extra,)
                grown = np.full(shape, fill, dtype=np.int64)
                setattr(self, name, np.concatenate([getattr(self, name), grown]))

    def take(self, slots: np.ndarray) -> dict[str, np.ndarray]:
        """Copies of every field at ``slots``."""
        return {name: getattr(self, name)[slots].copy() for name in self.FIELDS}


@dataclass
class InputSums:
    """Per-input sums of per-run contributions (the sufficient statistics of the curves).

    Attributes:
        sums: int array, shape (U, K, N_STATS): for input u and budget k, the sums over runs of
            ``BASE_STATS`` then (risk, event) per tau in ``TAUS``.
        n_runs: int array, shape (U,): runs per input.
    """

    budget: int
    sums: np.ndarray = field(init=False)
    n_runs: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.sums = np.zeros((0, self.budget, N_STATS), dtype=np.int64)
        self.n_runs = np.zeros(0, dtype=np.int64)

    def grow(self, n_inputs: int) -> None:
        """Room for ``n_inputs`` inputs (amortised doubling)."""
        have = self.sums.shape[0]
        if n_inputs > have:
            extra = max(n_inputs, 2 * have, 16) - have
            self.sums = np.concatenate([self.sums, np.zeros((extra, self.budget, N_STATS), dtype=np.int64)])
            self.n_runs = np.concatenate([self.n_runs, np.zeros(extra, dtype=np.int64)])


# -- the streaming update ---------------------------------------------------------------------------------


def _segment_starts(keys: np.ndarray) -> np.ndarray:
    """Bool array, shape (N,): True where a run of equal consecutive ``keys`` starts."""
    return np.r_[True, keys[1:] != keys[:-1]] if keys.size else np.zeros(0, dtype=bool)


def _cum_or(x: np.ndarray, starts: np.ndarray, seg: np.ndarray, init: np.ndarray) -> np.ndarray:
    """Cumulative OR along axis 0 restarted at each segment, OR-ed with each segment's initial row.

    Args:
        x: bool array, shape (N, C).
        starts: int array, shape (G,): first row of each segment.
        seg: int array, shape (N,): segment of each row.
        init: bool array, shape (G, C).
    """
    c = np.cumsum(x, axis=0, dtype=np.int64)
    before = c[starts] - x[starts]
    return ((c - before[seg]) > 0) | init[seg]


def _add_rows(target: np.ndarray, index: np.ndarray, values: np.ndarray) -> None:
    """``np.add.at(target, index, values)`` for rows, exact in integers and several times faster."""
    if index.size == 0:
        return
    order = np.argsort(index, kind="stable")
    index = index[order]
    starts = np.flatnonzero(_segment_starts(index))
    target[index[starts]] += np.add.reduceat(values[order], starts, axis=0)


def fold(
    runs: RunTable,
    sums: InputSums | None,
    u: np.ndarray,
    slot: np.ndarray,
    k: np.ndarray,
    hits: np.ndarray,
    valid: np.ndarray,
    m: np.ndarray,
    *,
    coverage_only: bool = False,
) -> None:
    """Add samples to the run table and (when given) the per-input sums, in place.

    Samples may come in any order across runs, in order within a run; ``k`` must not exceed
    ``sums.budget``. With ``coverage_only`` only ``runs``/``covered`` and ``first_hit``/``n`` are
    kept (the latent-code diagnostic: about half the work).

    Args:
        runs: The run table (slots must exist: ``runs.grow`` first).
        sums: The per-input sums (inputs must exist), or ``None`` to update the run table only.
        u: int array, shape (N,): input index of each sample.
        slot: int array, shape (N,): run slot.
        k: int array, shape (N,): 1-based position of the sample in its run.
        hits: bool array, shape (N, C): the columns each sample matched.
        valid: bool array, shape (N,): the sample was correct.
        m: int array, shape (U,): M_x of every input.
        coverage_only: Keep only what a coverage curve needs.
    """
    n = u.shape[0]
    if n == 0:
        return
    order = np.lexsort((k, slot))
    u, slot, k, hits, valid = u[order], slot[order], k[order], hits[order], valid[order]
    first = _segment_starts(slot)
    starts = np.flatnonzero(first)
    seg = np.cumsum(first) - 1
    s0 = slot[starts]
    init = runs.first_hit[s0] >= 0
    cov = _cum_or(hits, starts, seg, init)
    before = np.empty_like(cov)
    before[1:] = cov[:-1]
    before[starts] = init
    ends = np.r_[starts[1:], n] - 1
    runs.n[s0] = k[ends]
    i, j = np.nonzero(hits & ~before)
    runs.first_hit[slot[i], j] = k[i] - 1  # each (run, column) is first hit once: plain scatters
    if coverage_only:
        if sums is not None:
            view = sums.sums.reshape(-1, N_STATS)
            flat = u * sums.budget + (k - 1)
            view[:, 0] += np.bincount(flat, minlength=view.shape[0])
            view[:, 1] += np.bincount(flat, weights=cov.sum(axis=1), minlength=view.shape[0]).astype(np.int64)
            sums.n_runs += np.bincount(u[k == 1], minlength=sums.n_runs.shape[0])
        return
    vhits = hits & valid[:, None]
    vinit = runs.first_valid_hit[s0] >= 0
    vcov = _cum_or(vhits, starts, seg, vinit)
    vbefore = np.empty_like(vcov)
    vbefore[1:] = vcov[:-1]
    vbefore[starts] = vinit
    any_valid = _cum_or(valid[:, None], starts, seg, (runs.first_valid[s0] >= 0)[:, None])[:, 0]
    if sums is not None:
        n_after, n_before = cov.sum(axis=1), before.sum(axis=1)
        new = n_after - n_before
        need = _need(m)[u]
        vals = np.empty((n, N_STATS), dtype=np.int64)
        per_stat = {
            "runs": 1,
            "covered": n_after,
            "novel": new > 0,
            "new": new,
            "full": n_after >= m[u],
            "valid_covered": vcov.sum(axis=1),
            "valid_any": any_valid,
        }
        for name, value in per_stat.items():
            vals[:, _S[name]] = value
        risk = n_before[:, None] < need
        vals[:, 7::2] = risk
        vals[:, 8::2] = risk & (n_after[:, None] >= need)
        _add_rows(sums.sums.reshape(-1, N_STATS), u * sums.budget + (k - 1), vals)
        sums.n_runs += np.bincount(u[k == 1], minlength=sums.n_runs.shape[0])
    i, j = np.nonzero(vhits & ~vbefore)
    runs.first_valid_hit[slot[i], j] = k[i] - 1
    cells, times = np.unique(slot[valid], return_counts=True)
    runs.n_valid[cells] += times
    first_valid_now = valid & ~np.r_[False, any_valid[:-1]]
    first_valid_now[starts] = valid[starts] & (runs.first_valid[s0] < 0)
    runs.first_valid[slot[first_valid_now]] = k[first_valid_now] - 1


# -- the same sums from finished runs ---------------------------------------------------------------------


def _first_hit_histogram(
    first_hit: np.ndarray, K: int, bins: np.ndarray | None = None, n_bins: int = 1
) -> np.ndarray:
    """Per run (and per bin), how many columns were first matched at each sample index < K.

    Args:
        first_hit: int array, shape (R, C) (-1 = never).
        K: budget.
        bins: int array, shape (R, C) with values in 0..n_bins-1, or None.
        n_bins: number of bins.

    Returns:
        int array, shape (R, K), or (R, n_bins, K) when ``bins`` is given.
    """
    fh = np.asarray(first_hit, dtype=np.int64)
    R = fh.shape[0]
    col = np.where((fh < 0) | (fh >= K), K, fh)  # column K collects "not within the budget"
    b = np.zeros_like(col) if bins is None else np.asarray(bins, dtype=np.int64)
    flat = (np.arange(R)[:, None] * n_bins + b) * (K + 1) + col
    hist = np.bincount(flat.ravel(), minlength=R * n_bins * (K + 1)).reshape(R, n_bins, K + 1)[:, :, :K]
    return hist[:, 0, :] if bins is None else hist


def sums_from_runs(
    first_hit: np.ndarray,
    lengths: np.ndarray,
    unit: np.ndarray,
    m: np.ndarray,
    K: int,
    *,
    first_valid_hit: np.ndarray | None = None,
    first_valid: np.ndarray | None = None,
    rarity_bin: np.ndarray | None = None,
    n_bins: int = 4,
) -> tuple[InputSums, np.ndarray | None]:
    """The per-input sums :func:`fold` would have added, derived from finished runs, for budget K.

    Args:
        first_hit: int array, shape (R, C): 0-based index of the first sample of run r matching
            column c, or -1.
        lengths: int array, shape (R,): samples in each run.
        unit: int array, shape (R,): input index (0..U-1) of each run.
        m: int array, shape (U,): M_x of each input.
        K: budget.
        first_valid_hit: int array, shape (R, C), or None (valid statistics stay 0).
        first_valid: int array, shape (R,), or None.
        rarity_bin: int array, shape (R, C): base-probability quantile bin of each column, or None.
        n_bins: number of rarity bins.

    Returns:
        (sums, rarity): ``rarity`` is an int array, shape (U, n_bins, K), of covered strategies per
        rarity bin summed per input (None without ``rarity_bin``).
    """
    fh = np.asarray(first_hit, dtype=np.int64)
    unit = np.asarray(unit, dtype=np.int64)
    m = np.asarray(m, dtype=np.int64)
    U = m.shape[0]
    ks = np.arange(1, K + 1)
    avail = np.asarray(lengths, dtype=np.int64)[:, None] >= ks[None, :]  # (R, K)
    new = _first_hit_histogram(fh, K)
    covered = np.cumsum(new, axis=1)
    mr = m[unit][:, None]
    order = np.argsort(unit, kind="stable")
    starts = np.flatnonzero(_segment_starts(unit[order]))
    present = unit[order][starts]
    out = InputSums(K)
    out.grow(U)
    out.sums = np.zeros((U, K, N_STATS), dtype=np.int64)

    def put(stat: int, x: np.ndarray) -> None:
        # Per-input sums of one (R, K) statistic of the runs observed at k (one sort for all).
        out.sums[present, :, stat] = np.add.reduceat((x * avail).astype(np.int64)[order], starts, axis=0)

    put(_S["runs"], np.ones_like(covered))
    put(_S["covered"], covered)
    put(_S["novel"], new > 0)
    put(_S["new"], new)
    put(_S["full"], covered >= mr)
    if first_valid_hit is not None:
        put(_S["valid_covered"], np.cumsum(_first_hit_histogram(first_valid_hit, K), axis=1))
    if first_valid is not None:
        fv = np.asarray(first_valid, dtype=np.int64)[:, None]
        put(_S["valid_any"], (fv >= 0) & (fv < ks[None, :]))
    before = covered - new
    need = _need(m)[unit]  # (R, T)
    for t in range(len(TAUS)):
        risk = before < need[:, t : t + 1]
        put(7 + 2 * t, risk)
        put(8 + 2 * t, risk & (covered >= need[:, t : t + 1]))
    out.n_runs = np.bincount(unit, minlength=U).astype(np.int64)
    rarity = None
    if rarity_bin is not None:
        by_bin = _first_hit_histogram(fh, K, rarity_bin, n_bins).cumsum(axis=2) * avail[:, None, :]
        rarity = np.zeros((U, n_bins, K), dtype=np.int64)
        rarity[present] = np.add.reduceat(by_bin.astype(np.int64)[order], starts, axis=0)
    return out, rarity
