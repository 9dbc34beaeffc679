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


@dataclass
class InputSums:
    """Per-input sums over an input's complete runs (the sufficient statistics of the curves).

    Attributes:
        sums: int array, shape (U, K, N_STATS): for input u and budget k, the sums over its runs of
            ``BASE_STATS`` then (risk, event) per tau in ``TAUS``.
        sq: int array, shape (U, K, N_STATS): the sums of squares (within-input variances).
        auc_sq: int array, shape (U, 2): sums over runs of A_r^2, A_r = sum_k covered_r(k) (column
            0) or valid_covered_r(k) (column 1): a run's AUC is A_r / (K M_x).
        n_runs: int array, shape (U,): complete runs per input.
    """

    budget: int
    sums: np.ndarray = field(init=False)
    sq: np.ndarray = field(init=False)
    auc_sq: np.ndarray = field(init=False)
    n_runs: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.sums = np.zeros((0, self.budget, N_STATS), dtype=np.int64)
        self.sq = np.zeros((0, self.budget, N_STATS), dtype=np.int64)
        self.auc_sq = np.zeros((0, 2), dtype=np.int64)
        self.n_runs = np.zeros(0, dtype=np.int64)

    def grow(self, n_inputs: int) -> None:
        """Room for ``n_inputs`` inputs (amortised doubling)."""
        have = self.sums.shape[0]
        if n_inputs > have:
            extra = max(n_inputs, 2 * have, 16) - have
            for name in ("sums", "sq", "auc_sq", "n_runs"):
                arr = getattr(self, name)
                setattr(self, name, np.concatenate([arr, np.zeros((extra, *arr.shape[1:]), dtype=np.int64)]))

    def add(self, other: InputSums) -> None:
        """Add another set of sums over the same inputs (exact: integers)."""
        U = other.sums.shape[0]
        self.grow(U)
        for name in ("sums", "sq", "auc_sq", "n_runs"):
            getattr(self, name)[:U] += getattr(other, name)

    def take(self, order: np.ndarray) -> InputSums:
        """The sums of inputs ``order`` (in that order)."""
        out = InputSums(self.budget)
        for name in ("sums", "sq", "auc_sq", "n_runs"):
            setattr(out, name, getattr(self, name)[order])
        return out


# -- the streaming update ---------------------------------------------------------------------------------


def _segment_starts(keys: np.ndarray) -> np.ndarray:
    """Bool array, shape (N,): True where a run of equal consecutive ``keys`` starts."""
    out = np.empty(keys.size, dtype=bool)
    if keys.size:  # np.r_ costs ~20 us a call: too much on the per-log path
        out[0] = True
        np.not_equal(keys[1:], keys[:-1], out=out[1:])
    return out


_NEVER_YET = np.iinfo(np.int64).max


def _set_first(target: np.ndarray, cells: np.ndarray, k: np.ndarray) -> None:
    """Write first-hit indices (0-based) into flat ``target`` where it still holds -1 (never).

    The smallest k per cell by ``np.minimum.at`` on the cells still unset (a hit in an earlier batch
    came first: a run's samples come in order): the same integers as sorting the hits by (cell, k),
    in a third of the numpy calls.
    """
    if cells.size == 0:
        return
    flat = target.reshape(-1)
    unset = flat[cells] < 0
    cells, k = cells[unset], k[unset]
    flat[cells] = _NEVER_YET
    np.minimum.at(flat, cells, k - 1)


def fold(
    runs: RunTable,
    sums: InputSums | None,
    u: np.ndarray,
    slot: np.ndarray,
    k: np.ndarray,
    hits: np.ndarray | None,
    valid: np.ndarray,
    m: np.ndarray,
    *,
    coverage_only: bool = False,
    hit: tuple[np.ndarray, np.ndarray] | None = None,
) -> None:
    """Add samples to the run table, and each run that completes (reaches K) to the per-input sums.

    Samples may come in any order across runs, in order within a run; ``k`` must not exceed
    ``sums.budget``. A run enters the sums only once complete, so every curve uses the same runs at
    every k (incomplete runs are counted by the caller, never mixed in). With ``coverage_only`` the
    correct-sample fields are not kept (the latent-code diagnostic).

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
        hit: ``np.nonzero(hits)`` when already known (``hits`` may then be None): row-major
            (sample, column) pairs, e.g. the one latent code of each sample.
    """
    if u.shape[0] == 0:
        return
    C = runs.columns
    np.maximum.at(runs.n, slot, k)
    i, j = np.nonzero(hits) if hit is None else hit
    cells, ki = slot[i] * C + j, k[i]
    _set_first(runs.first_hit, cells, ki)
    if not coverage_only:
        vi = valid[i]  # the valid samples' hits: a subset of the hits just found
        _set_first(runs.first_valid_hit, cells[vi], ki[vi])
        v = np.flatnonzero(valid)
        np.add.at(runs.n_valid, slot[v], 1)
        _set_first(runs.first_valid, slot[v], k[v])
    if sums is not None:  # a run enters the sums once complete: its K-th sample just arrived
        done = k == sums.budget
        if done.any():
            sl, uu = slot[done], u[done]
            part, _ = sums_from_runs(
                runs.first_hit[sl],
                runs.n[sl],
                uu,
                m[: int(uu.max()) + 1],
                sums.budget,
                first_valid_hit=None if coverage_only else runs.first_valid_hit[sl],
                first_valid=None if coverage_only else runs.first_valid[sl],
            )
            sums.add(part)


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


#: Runs per block in :func:`sums_from_runs`: (block, K, N_STATS) int64 stays a few MB.
_CHUNK = 4096


#: Statistics whose per-run value is 0 or 1: their sums of squares are their sums.
_COUNTS = ("covered", "new", "valid_covered")
_INDICATOR = np.array([name not in _COUNTS for name in BASE_STATS] + [True] * 2 * len(TAUS))


def _run_stats(
    fh: np.ndarray,
    m: np.ndarray,
    K: int,
    fvh: np.ndarray | None,
    fv: np.ndarray | None,
    starts: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-input sums, sums of squares (both (P, K, N_STATS)) and A_r^2 sums (P, 2) of complete runs.

    Runs come grouped by input, ``starts`` the first run of each of the P groups. Each statistic is
    one contiguous (R, K) block (strided writes into (R, K, N_STATS) cost several times more), and
    only the three count statistics are squared: an indicator's square is itself.
    """
    R = fh.shape[0]
    new = _first_hit_histogram(fh, K)
    covered = np.cumsum(new, axis=1)
    stats = np.zeros((N_STATS, R, K), dtype=np.int64)
    stats[_S["runs"]] = 1
    stats[_S["covered"]] = covered
    stats[_S["novel"]] = new > 0
    stats[_S["new"]] = new
    stats[_S["full"]] = covered >= m[:, None]
    A = np.zeros((R, 2), dtype=np.int64)
    A[:, 0] = covered.sum(axis=1)
    if fvh is not None:
        valid_covered = np.cumsum(_first_hit_histogram(fvh, K), axis=1)
        stats[_S["valid_covered"]] = valid_covered
        A[:, 1] = valid_covered.sum(axis=1)
    if fv is not None:
        stats[_S["valid_any"]] = (fv[:, None] >= 0) & (fv[:, None] < np.arange(1, K + 1)[None, :])
    before = covered - new
    need = _need(m)  # (R, T)
    for t in range(need.shape[1]):
        risk = before < need[:, t : t + 1]
        stats[7 + 2 * t] = risk
        stats[8 + 2 * t] = risk & (covered >= need[:, t : t + 1])
    total = np.add.reduceat(stats, starts, axis=1)  # (N_STATS, P, K)
    sq = total.copy()
    for j in np.flatnonzero(~_INDICATOR).tolist():
        sq[j] = np.add.reduceat(stats[j] * stats[j], starts, axis=0)
    return total.transpose(1, 2, 0), sq.transpose(1, 2, 0), np.add.reduceat(A * A, starts, axis=0)


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
    """The per-input sums of the runs that reached K (what :func:`fold` adds), for any budget K.

    Runs shorter than K are left out: the curves use the same runs at every k, so every input
    weighs the same at every k and C(k) is monotone.

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
    keep = np.asarray(lengths, dtype=np.int64) >= K
    fh = np.asarray(first_hit, dtype=np.int64)[keep]
    unit = np.asarray(unit, dtype=np.int64)[keep]
    m = np.asarray(m, dtype=np.int64)
    U = m.shape[0]
    out = InputSums(K)
    out.grow(U)
    for name in ("sums", "sq", "auc_sq", "n_runs"):  # exactly U rows
        setattr(out, name, getattr(out, name)[:U])
    rarity = None if rarity_bin is None else np.zeros((U, n_bins, K), dtype=np.int64)
    if not keep.any():
        return out, rarity
    fvh = None if first_valid_hit is None else np.asarray(first_valid_hit, dtype=np.int64)[keep]
    fv = None if first_valid is None else np.asarray(first_valid, dtype=np.int64)[keep]
    rb = None if rarity_bin is None else np.asarray(rarity_bin)[keep]
    order = np.argsort(unit, kind="stable")
    fh, unit = fh[order], unit[order]
    fvh = None if fvh is None else fvh[order]
    fv = None if fv is None else fv[order]
    rb = None if rb is None else rb[order]
    # Runs in chunks, all statistics at once: a (chunk, K, N_STATS) block and one reduction per chunk.
    for a in range(0, fh.shape[0], _CHUNK):
        b = min(a + _CHUNK, fh.shape[0])
        part_fvh, part_fv = (None if x is None else x[a:b] for x in (fvh, fv))
        starts = np.flatnonzero(_segment_starts(unit[a:b]))
        present = unit[a:b][starts]
        total, sq, a_sq = _run_stats(fh[a:b], m[unit[a:b]], K, part_fvh, part_fv, starts)
        out.sums[present] += total
        out.sq[present] += sq
        out.auc_sq[present] += a_sq
        out.n_runs[present] += np.diff(np.r_[starts, b - a])
        if rarity is not None:
            by_bin = _first_hit_histogram(fh[a:b], K, rb[a:b], n_bins).cumsum(axis=2)  # type: ignore[index]
            rarity[present] += np.add.reduceat(by_bin, starts, axis=0)
    return out, rarity
