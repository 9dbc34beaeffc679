"""The one estimator of adaptive curves: runs -> per-input integer sums (exact in any order) -> curves.

`fold` records samples in the run table, `add_runs` adds each run that completes, `sums_from_runs`
derives the same integers from first hits; `GroupTotals` sums them per (complete runs, M_x) for logs.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from seffi.coverage.columns import COLUMNS, PER_K, SUM_STATS
from seffi.coverage.curves import TAUS
from seffi.coverage.room import grow, zeros
from seffi.coverage.state import RUN_TABLE_FIELDS

__all__ = ["GroupTotals", "InputSums", "RunTable", "fold", "sums_from_runs"]

BY_CURVES = {c.curves_name: c for c in COLUMNS if c.stat}
#: Statistics summed per (input, k) (the column table's); (risk, event) per tau follow.
BASE_STATS: tuple[str, ...] = SUM_STATS
#: Curve metrics (in ``Curves``) and the statistic each is the ratio of (to ``runs``).
METRICS: dict[str, int] = {name: SUM_STATS.index(str(BY_CURVES[name].stat)) for name in PER_K}
#: Statistics that count strategies: divided by M_x to become fractions.
PER_STRATEGY: tuple[int, ...] = tuple(j for name, j in METRICS.items() if BY_CURVES[name].per_strategy)
N_STATS = len(BASE_STATS) + 2 * len(TAUS)
_S = {name: j for j, name in enumerate(BASE_STATS)}
#: What `InputSums` stores per (input, k): ``BASE_STATS`` follow from them.
INC_STATS: tuple[str, ...] = ("new", "novel", "valid_new", "valid_first", *(f"event_{t:g}" for t in TAUS))
N_INC = len(INC_STATS)
_I = {name: j for j, name in enumerate(INC_STATS)}
if 1.0 not in TAUS:  # full coverage is the running sum of the tau = 1 event
    raise ImportError("seffi.coverage.sums needs tau = 1 in TAUS")
_EVENTS = slice(_I[f"event_{TAUS[0]:g}"], _I[f"event_{TAUS[0]:g}"] + len(TAUS))  # (risk, event) per tau
#: Statistics that are running sums of a stored one.
_RUNNING = {"covered": "new", "valid_covered": "valid_new", "valid_any": "valid_first", "full": "event_1"}
#: Statistics whose per-run value is a count (not 0/1): only their squares differ from their sums.
SQUARED: tuple[int, ...] = (_S["covered"], _S["new"], _S["valid_covered"])


def _need(m: np.ndarray) -> np.ndarray:
    """Strategies needed for each tau: (U, len(TAUS)) from M_x (U,)."""
    return np.ceil(np.asarray(m, dtype=np.float64)[:, None] * np.array(TAUS)[None, :] - 1e-9).astype(np.int64)


# -- the run table --------------------------------------------------------------------------------------


def int_type(top: int) -> np.dtype:
    """The narrowest signed integer type holding [-top, top]."""
    return next(np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64) if top <= np.iinfo(t).max)


_TOP = {np.dtype(t): np.iinfo(t).max for t in (np.int8, np.int16, np.int32, np.int64)}
_WIDEST = _TOP[np.dtype(np.int64)]


def fit(a: np.ndarray, values: Any) -> np.ndarray:
    """``a``, or a copy in the narrowest integer type holding ``values`` (ints) too when ``a``'s cannot."""
    held = _TOP[a.dtype]
    # The widest type already (a per-batch call: no reduction), or no values to hold.
    if held == _WIDEST or (not isinstance(values, int) and np.size(values) == 0):
        return a
    if isinstance(values, int):
        top = abs(values)
    else:  # the array's own reductions: quicker calls than np.max and np.min
        values = np.asarray(values)
        top = max(int(values.max()), -int(values.min()))
    return a if top <= held else a.astype(int_type(top))


class RunTable:
    """Per run slot, the declared per-run fields (`seffi.coverage.state.RUN_FIELDS`), each an attribute.

    Held in the narrowest type holding [-1, K] (int64 without a budget; ``beyond``: int64).
    """

    def __init__(self, columns: int, latents: int = 0, *, budget: int | None = None) -> None:
        self.columns, self.latents = int(columns), int(latents)
        self.dtype = np.dtype(np.int64) if budget is None else int_type(budget)
        self.fields = [p for p in RUN_TABLE_FIELDS if p.width != "num_latents" or self.latents > 0]
        self.filled = 0  # slots set to their fill values; the room above is never written (not resident)
        for p in self.fields:
            width = {None: (), "columns": (self.columns,)}.get(p.width, (self.latents,))
            setattr(self, p.key, np.full((0, *width), p.fill, dtype=np.int64 if p.wide else self.dtype))

    def grow(self, n_slots: int, n_columns: int | None = None) -> None:
        """Room for ``n_slots`` slots and ``n_columns`` columns; new slots hold their fill values."""
        top = self.filled
        if n_columns is not None and n_columns > self.columns:
            for p in self.fields:
                if p.width == "columns":
                    arr = getattr(self, p.key)
                    wide = zeros((arr.shape[0], n_columns), self.dtype)  # rows above ``filled`` stay zero
                    wide[:top, : self.columns] = arr[:top]
                    wide[:top, self.columns :] = p.fill
                    setattr(self, p.key, wide)
            self.columns = n_columns
        for p in self.fields:  # rows above ``filled`` are zero: never written
            grow(self, p.key, n_slots, 0, 64)
        if n_slots > top:
            for p in self.fields:
                if p.fill != 0:  # zero-filled fields hold 0 above ``filled`` already
                    getattr(self, p.key)[top:n_slots] = p.fill
            self.filled = n_slots


# -- per-input sums -------------------------------------------------------------------------------------


class InputSums:
    """Per-input sums over complete runs: ``inc`` (U, K, N_INC) of `INC_STATS`, ``n_runs`` (U,).

    With ``squares``: ``sq`` (U, K, 3) sums of squares of the `SQUARED` statistics, ``auc_sq`` (U, 2)
    sums of A_r^2 (A_r = sum_k covered_r(k), then valid_covered_r(k)). ``add_at`` widens ``inc``'s
    ``dtype`` when a count would leave it.
    """

    def __init__(self, budget: int, *, dtype: Any = np.int64, squares: bool = True, rows: int = 0) -> None:
        self.budget = int(budget)
        self.inc = zeros((rows, self.budget, N_INC), dtype=dtype)
        self.n_runs = zeros(rows, dtype=np.int64)
        self.sq = zeros((rows, self.budget, len(SQUARED)), dtype=np.int64) if squares else None
        self.auc_sq = zeros((rows, 2), dtype=np.int64) if squares else None

    def full(self, rows: np.ndarray | slice | None = None) -> np.ndarray:
        """The 13 statistics of ``rows`` (default all): int array, shape (R, K, N_STATS)."""
        rows = slice(None) if rows is None else rows
        return _rebuild(self.inc[rows].astype(np.int64), self.n_runs[rows])

    def stat(self, j: int, rows: np.ndarray) -> np.ndarray:
        """Statistic ``j`` of `BASE_STATS` alone for ``rows``: ``full(rows)[:, :, j]``, int (R, K)."""
        if j == _S["runs"]:
            return np.repeat(self.n_runs[rows][:, None], self.budget, axis=1)
        name = BASE_STATS[j]
        col = self.inc[rows, :, _I[_RUNNING.get(name, name)]]
        return np.cumsum(col, axis=1, dtype=np.int64) if name in _RUNNING else col.astype(np.int64)

    def squares(self, j: int, rows: np.ndarray | slice | None = None) -> np.ndarray:
        """Sums of squares of statistic ``j`` over each input's runs: (R, K)."""
        rows = slice(None) if rows is None else rows
        if j in SQUARED:
            if self.sq is None:
                raise ValueError("these sums keep no squares (derive them from the runs)")
            return self.sq[rows, :, SQUARED.index(j)]
        return self.full(rows)[:, :, j]

    def grow(self, n_inputs: int) -> None:
        """Room for ``n_inputs`` rows (new rows zero)."""
        for name in ("inc", "n_runs", "sq", "auc_sq"):
            if getattr(self, name) is not None:
                grow(self, name, n_inputs, 0, 16)

    def add_at(self, rows: np.ndarray, part: InputSums, sign: int = 1) -> None:
        """Add (``sign`` 1) or remove (-1) ``part``'s rows at distinct ``rows``; widens ``inc`` if needed."""
        if sign < 0:  # removing runs added before: every count stays within its type
            self.inc[rows] -= part.inc.astype(self.inc.dtype, copy=False)
            self.n_runs[rows] -= part.n_runs
            return
        if self.inc.dtype != np.int64 and rows.size:  # widen to a type holding every count after the add
            self.inc = fit(self.inc, int(part.inc.max(initial=0)) + int(self.inc[rows].max(initial=0)))
        self.inc[rows] += part.inc.astype(self.inc.dtype, copy=False)
        self.n_runs[rows] += part.n_runs
        if self.sq is not None and part.sq is not None:
            self.sq[rows] += part.sq
            self.auc_sq[rows] += part.auc_sq  # type: ignore[index]

    def take(self, order: np.ndarray) -> InputSums:
        """The sums of inputs ``order`` (in that order)."""
        out = InputSums(self.budget, dtype=self.inc.dtype, squares=self.sq is not None)
        for name in ("inc", "n_runs", "sq", "auc_sq"):
            arr = getattr(self, name)
            if arr is not None:
                setattr(out, name, arr[order])
        return out


def _rebuild(inc: np.ndarray, n_runs: np.ndarray) -> np.ndarray:
    """The 13 statistics (R, K, N_STATS) from the stored 7 (R, K, N_INC) and runs (R,): integer sums."""
    R, K = inc.shape[:2]
    out = np.empty((R, K, N_STATS), dtype=np.int64)
    runs = np.asarray(n_runs, dtype=np.int64)[:, None]
    total = np.cumsum(inc, axis=1, dtype=np.int64)  # every running sum in one pass
    out[:, :, _S["runs"]] = runs
    out[:, :, _S["novel"]] = inc[:, :, _I["novel"]]
    out[:, :, _S["new"]] = inc[:, :, _I["new"]]
    for stat, running in _RUNNING.items():
        out[:, :, _S[stat]] = total[:, :, _I[running]]
    events = inc[:, :, _EVENTS]
    out[:, :, 7::2] = runs[:, :, None] - (total[:, :, _EVENTS] - events)  # at risk: no event before k
    out[:, :, 8::2] = events
    return out


# -- the streaming update ---------------------------------------------------------------------------------


def _segment_starts(keys: np.ndarray) -> np.ndarray:
    """(N,) bool: True where a run of equal consecutive ``keys`` starts."""
    out = np.empty(keys.size, dtype=bool)
    if keys.size:  # np.r_ costs ~20 us a call: too much on the per-log path
        out[0] = True
        np.not_equal(keys[1:], keys[:-1], out=out[1:])
    return out


def _set_first(target: np.ndarray, cells: np.ndarray, k: np.ndarray) -> None:
    """Write first-hit indices ``k - 1`` into flat ``target`` where it still holds -1 (earlier hits stay)."""
    if cells.size == 0:
        return
    flat = target.reshape(-1)
    unset = flat[cells] < 0
    cells, k = cells[unset], k[unset]
    flat[cells] = _TOP[flat.dtype]  # above every index: the minimum below replaces it
    np.minimum.at(flat, cells, (k - 1).astype(flat.dtype))


def fold(runs: RunTable, slot: np.ndarray, k: np.ndarray, hits: np.ndarray, valid: np.ndarray) -> None:
    """Record samples (slot (N,), 1-based position k (N,), hits (N, C), valid (N,)) in order within a run."""
    if slot.shape[0] == 0:
        return
    C = runs.columns
    np.maximum.at(runs.n, slot, k.astype(runs.dtype))  # k <= K: it fits the table's type
    i, j = np.divmod(np.flatnonzero(hits), hits.shape[1])  # np.nonzero(hits), in fewer steps
    cells, ki = slot[i] * C + j, k[i]
    _set_first(runs.first_hit, cells, ki)
    vi = valid[i]  # the valid samples' hits: a subset of the hits just found
    _set_first(runs.first_valid_hit, cells[vi], ki[vi])
    v = np.flatnonzero(valid)
    np.add.at(runs.n_valid, slot[v], runs.n_valid.dtype.type(1))  # typed: ufunc.at's fast path
    _set_first(runs.first_valid, slot[v], k[v])


def fold_latent(runs: RunTable, slot: np.ndarray, k: np.ndarray, z: np.ndarray) -> bool:
    """Record each sample's latent code ``z`` (N,) (-1 or >= Z: none); True if any."""
    Z = runs.latents
    ok = np.flatnonzero((z >= 0) & (z < Z))
    _set_first(runs.latent_first_hit, slot[ok] * Z + z[ok], k[ok])
    return bool(ok.size)


# -- the same sums from finished runs ---------------------------------------------------------------------


def _first_hit_histogram(
    first_hit: np.ndarray, K: int, bins: np.ndarray | None = None, n_bins: int = 1
) -> np.ndarray:
    """Columns first matched at each sample index < K: (R, K), or (R, n_bins, K) with ``bins`` (R, C)."""
    fh = np.asarray(first_hit, dtype=np.int64)
    R = fh.shape[0]
    col = np.where((fh < 0) | (fh >= K), K, fh)  # column K collects "not within the budget"
    rows = np.arange(R)[:, None] * n_bins
    flat = (rows if bins is None else rows + np.asarray(bins, dtype=np.int64)) * (K + 1) + col
    hist = np.bincount(flat.ravel(), minlength=R * n_bins * (K + 1)).reshape(R, n_bins, K + 1)[:, :, :K]
    return hist[:, 0, :] if bins is None else hist


#: Runs per block in `sums_from_runs`: (block, K) int64 per statistic stays a few MB.
_CHUNK = 4096


def _run_increments(
    fh: np.ndarray,
    m: np.ndarray,
    K: int,
    fvh: np.ndarray | None,
    fv: np.ndarray | None,
    starts: np.ndarray,
    squares: bool,
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """Sums per group of runs (``starts``: first run of each): (P, K, N_INC), squares, A^2 (or None)."""
    R = fh.shape[0]
    new = _first_hit_histogram(fh, K)
    covered = np.cumsum(new, axis=1)
    inc = np.zeros((N_INC, R, K), dtype=np.int64)
    inc[_I["new"]] = new
    inc[_I["novel"]] = new > 0
    vnew = None
    if fvh is not None:
        vnew = _first_hit_histogram(fvh, K)
        inc[_I["valid_new"]] = vnew
    if fv is not None:
        first = (fv >= 0) & (fv < K)
        inc[_I["valid_first"], np.flatnonzero(first), fv[first]] = 1
    before = covered - new
    need = _need(m)  # (R, T)
    for t in range(need.shape[1]):
        inc[_I["new"] + 4 + t] = (before < need[:, t : t + 1]) & (covered >= need[:, t : t + 1])
    total = np.add.reduceat(inc, starts, axis=1).transpose(1, 2, 0)  # (P, K, N_INC)
    if not squares:
        return total, None, None
    sq = np.zeros((starts.size, K, len(SQUARED)), dtype=np.int64)
    sq[:, :, 0] = np.add.reduceat(covered * covered, starts, axis=0)
    sq[:, :, 1] = np.add.reduceat(new * new, starts, axis=0)
    A = np.zeros((R, 2), dtype=np.int64)
    A[:, 0] = covered.sum(axis=1)
    if vnew is not None:
        valid_covered = np.cumsum(vnew, axis=1)
        sq[:, :, 2] = np.add.reduceat(valid_covered * valid_covered, starts, axis=0)
        A[:, 1] = valid_covered.sum(axis=1)
    return total, sq, np.add.reduceat(A * A, starts, axis=0)


def _grouped_runs(runs: np.ndarray, unit: np.ndarray) -> Iterator[tuple[np.ndarray, ...]]:
    """(present inputs, starts, counts, units, runs) of ``runs`` sorted by ``unit``, ``_CHUNK`` at a time."""
    order = np.argsort(unit, kind="stable")
    unit, runs = unit[order], runs[order]
    for a in range(0, unit.size, _CHUNK):
        b = min(a + _CHUNK, unit.size)
        starts = np.flatnonzero(_segment_starts(unit[a:b]))
        counts = np.diff(starts, append=b - a)
        yield unit[a:b][starts], starts, counts, unit[a:b], runs[a:b]


def _rows64(arr: np.ndarray | None, rows: np.ndarray) -> np.ndarray | None:
    """Rows ``rows`` of a per-run field (any integer type) as int64, or None."""
    return None if arr is None else np.asarray(arr)[rows].astype(np.int64, copy=False)


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
    squares: bool = True,
    runs: np.ndarray | None = None,
) -> tuple[InputSums, np.ndarray | None]:
    """The per-input sums of the runs that reached K (shorter runs left out: C(k) stays monotone).

    Args:
        first_hit: (S, C): first sample of run r matching column c, or -1.
        lengths: (S,): samples in each run.
        unit: (R,): input index (0..U-1) of each run (of each of ``runs``).
        m: (U,): M_x of each input.
        K: budget.
        first_valid_hit: (S, C), or None (valid statistics stay 0).
        first_valid: (S,), or None.
        rarity_bin: (S, C): base-probability quantile bin of each column, or None.
        n_bins: number of rarity bins.
        squares: also sum the squares (`InputSums.sq`).
        runs: (R,): the rows of the per-run arrays to read (default all S).

    Returns:
        (sums with U rows, rarity (U, n_bins, K) covered strategies per bin, or None).
    """
    runs = np.arange(np.shape(lengths)[0]) if runs is None else np.asarray(runs, dtype=np.int64)
    keep = np.asarray(lengths)[runs] >= K
    m = np.asarray(m, dtype=np.int64)
    U = m.shape[0]
    out = InputSums(K, squares=squares, rows=U)
    rarity = None if rarity_bin is None else np.zeros((U, n_bins, K), dtype=np.int64)
    if not keep.any():
        return out, rarity
    unit = np.asarray(unit, dtype=np.int64)[keep]
    for present, starts, counts, units, rows in _grouped_runs(runs[keep], unit):
        bfh = _rows64(first_hit, rows)
        bfvh, bfv = _rows64(first_valid_hit, rows), _rows64(first_valid, rows)
        total, sq, a_sq = _run_increments(bfh, m[units], K, bfvh, bfv, starts, squares)  # type: ignore[arg-type]
        out.inc[present] += total
        out.n_runs[present] += counts
        if squares:
            out.sq[present] += sq  # type: ignore[index]
            out.auc_sq[present] += a_sq  # type: ignore[index]
        if rarity is not None:
            by_bin = _first_hit_histogram(bfh, K, _rows64(rarity_bin, rows), n_bins).cumsum(axis=2)  # type: ignore[arg-type]
            rarity[present] += np.add.reduceat(by_bin, starts, axis=0)
    return out, rarity


def run_sums(
    runs: RunTable,
    slots: np.ndarray,
    unit: np.ndarray,
    m: np.ndarray,
    K: int,
    *,
    latent: bool = False,
) -> InputSums:
    """Per-input sums (P rows; ``unit`` (R,) in 0..P-1, ``m`` (P,)) of the complete runs among ``slots``.

    ``latent``: sums of the latent codes tried (coverage only; ``m`` is Z) instead of the strategies.
    """
    C = runs.columns
    if latent:
        fh, fvh, fv = runs.latent_first_hit, None, None
    else:  # views: sums_from_runs reads the slots' rows block by block
        fh, fvh, fv = runs.first_hit[:, :C], runs.first_valid_hit[:, :C], runs.first_valid
    sums, _ = sums_from_runs(
        fh, runs.n, unit, m, K, first_valid_hit=fvh, first_valid=fv, squares=False, runs=slots
    )
    return sums


# -- totals by group, for logs ----------------------------------------------------------------------------


class GroupTotals:
    """The per-input sums added up per (complete runs, M_x): a group's inputs weigh the same in a log."""

    _BITS = 21  # M_x < 2^21 (MAX_STRATEGIES): a group's key is runs << 21 | M_x

    def __init__(self, budget: int) -> None:
        self.budget = int(budget)
        self.keys = np.zeros(0, dtype=np.int64)  # sorted group keys
        self.count = np.zeros(0, dtype=np.int64)  # inputs per group
        self.total = np.zeros((0, self.budget, N_INC), dtype=np.int64)

    def _apply(self, n: np.ndarray, m: np.ndarray, inc: np.ndarray, sign: np.ndarray | int) -> None:
        """Add ``sign`` x each input's sums (R, K, N_INC) to its group (runs ``n``, M_x ``m``)."""
        keep = np.flatnonzero(n > 0)
        if not keep.size:
            return
        key = (n[keep].astype(np.int64) << self._BITS) | m[keep].astype(np.int64)
        keys = np.union1d(self.keys, key)
        if keys.size > self.keys.size:  # groups not seen yet: inserted in key order
            at = np.searchsorted(keys, self.keys)
            count = np.zeros(keys.size, dtype=np.int64)
            total = np.zeros((keys.size, self.budget, N_INC), dtype=np.int64)
            count[at], total[at] = self.count, self.total
            self.keys, self.count, self.total = keys, count, total
        pos = np.searchsorted(self.keys, key)
        sign = np.asarray(sign, dtype=np.int64)
        sign = sign[keep] if sign.ndim else sign  # np.broadcast_to costs more than the rest
        np.add.at(self.count, pos, sign)  # integer sums: exact in any order
        np.add.at(self.total, pos, inc[keep] * sign[..., None, None])
        held = self.count != 0
        if not held.all():
            self.keys, self.count, self.total = self.keys[held], self.count[held], self.total[held]

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(runs, M_x, inputs, totals (G, K, N_INC)) of the groups in sorted (runs, M_x) order."""
        mask = (np.int64(1) << self._BITS) - 1
        return self.keys >> self._BITS, self.keys & mask, self.count, self.total

    @classmethod
    def of(cls, sums: InputSums, m: np.ndarray) -> GroupTotals:
        """The group totals of ``sums`` (rows with M_x ``m``)."""
        out = cls(sums.budget)
        out._apply(sums.n_runs, np.asarray(m, dtype=np.int64), sums.inc, 1)
        return out


def add_runs(
    sums: InputSums, totals: GroupTotals, rows: np.ndarray, part: InputSums, m: np.ndarray, sign: int = 1
) -> None:
    """Add (``sign`` 1) or remove (-1) runs' sums ``part`` at distinct ``rows`` (M_x ``m``) and ``totals``."""
    old_n, old = sums.n_runs[rows].copy(), sums.inc[rows].copy()
    sums.add_at(rows, part, sign)
    both = np.repeat(np.array([-1, 1], dtype=np.int64), rows.size)  # the inputs leave their groups, then join
    n, inc = np.concatenate([old_n, sums.n_runs[rows]]), np.concatenate([old, sums.inc[rows]])
    totals._apply(n, np.concatenate([m, m]), inc, both)
