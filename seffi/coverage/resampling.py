"""Bootstrap resampling over inputs (stratified by task, seeded through ``SeedSequence``) and intervals.

A replicate is a count vector (how often each unit was drawn), so a ratio of sums over units is one
matrix product for all replicates: ``(W @ num) / (W @ den)`` with W of shape (B, U).
"""

from __future__ import annotations

import itertools
import math
from collections import deque
from collections.abc import Iterator, Sequence
from statistics import NormalDist
from typing import Any

import numpy as np

from seffi._seeding import SeedLike, as_seed_sequence

#: Counts (replicates x units) a bootstrap block may hold: ~30 MB with the draws behind them.
_BLOCK_CELLS = 1 << 20
#: Cells (units x columns) per block of `mean_score_interval`.
_CHUNK_CELLS = 1 << 20
#: Below this many inputs, intervals cover run-to-run noise only (a percentile bootstrap over 2 or 4
#: inputs covered the truth 48% and 79% of the time).
MIN_INPUTS = 8


def bootstrap_counts(strata: Sequence[int] | np.ndarray, n_boot: int, seed: SeedLike = 0) -> np.ndarray:
    """Multinomial resampling counts (B, U) of units ``strata`` (U,); each stratum keeps its size."""
    strata = np.asarray(strata)
    W = np.zeros((_n_boot(n_boot), strata.size), dtype=np.float64)
    for _, idx, rows, part in bootstrap_blocks(strata, n_boot, seed, int(n_boot)):
        W[rows, idx] = part
    return W


def _n_boot(n_boot: object) -> int:
    if isinstance(n_boot, bool) or not isinstance(n_boot, int | np.integer) or n_boot < 1:
        raise ValueError(f"n_boot must be a positive integer, got {n_boot!r}")
    return int(n_boot)


def bootstrap_blocks(
    strata: Sequence[int] | np.ndarray, n_boot: int, seed: SeedLike = 0, block: int = 64
) -> Iterator[tuple[Any, np.ndarray, slice, np.ndarray]]:
    """The counts of `bootstrap_counts`, at least ``block`` replicates of one stratum at a time.

    One generator, stratum by stratum, replicates in order: any block size gives the same counts.

    Yields:
        ``(stratum, idx, rows, W)``: the stratum, its units, the replicates (a slice of 0..B-1)
        and their counts, shape (len(rows), len(idx)).
    """
    strata = np.asarray(strata)
    if strata.ndim != 1:
        raise ValueError("strata must be a 1-D array")
    B = _n_boot(n_boot)
    rng = np.random.default_rng(as_seed_sequence(seed))
    for h in np.unique(strata):
        idx = np.flatnonzero(strata == h)
        n = idx.size
        step = max(block, _BLOCK_CELLS // max(n, 1)) if block < B else B
        for a in range(0, B, step):
            b = min(a + step, B)
            # Multinomial(n, 1/n) counts by one bincount of n uniform draws: several times faster.
            draws = rng.integers(0, n, size=(b - a, n)) + (np.arange(b - a) * n)[:, None]
            part = np.bincount(draws.ravel(), minlength=(b - a) * n).reshape(b - a, n)
            yield h, idx, slice(a, b), part.astype(np.float64)


def strata_codes(strata: Sequence[int] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(strata, return_inverse=True)``: the strata and each unit's index among them.

    One stratum (the usual case) takes neither a sort nor memory: its indices are a zero broadcast.
    """
    strata = np.asarray(strata)
    if strata.ndim == 1 and strata.size and (strata == strata[0]).all():
        return strata[:1], np.broadcast_to(np.intp(0), strata.shape)
    return np.unique(strata, return_inverse=True)


def percentile_interval(
    reps: np.ndarray, level: float = 0.95, method: str = "linear", *, skip_nan: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """Equal-tailed percentile interval (lo, hi) over replicates (B, ...) on axis 0.

    ``skip_nan``: ignore NaN replicates (an all-NaN column gets NaN bounds); False: a NaN makes
    its column's bounds NaN. ``method``: ``np.quantile``'s.
    """
    if not 0.0 < level < 1.0:
        raise ValueError(f"ci level must be in (0, 1), got {level!r}")
    a = (1.0 - level) / 2.0
    reps = np.asarray(reps, dtype=np.float64)
    if not skip_nan or not np.isnan(reps).any():  # the usual case: plain quantiles
        lo, hi = np.quantile(reps, [a, 1.0 - a], axis=0, method=method)
        return lo, hi
    flat = reps.reshape(reps.shape[0], -1)
    some = ~np.all(np.isnan(flat), axis=0)  # no all-NaN slice for numpy to warn about
    lo, hi = np.full(flat.shape[1], np.nan), np.full(flat.shape[1], np.nan)
    if some.any():
        lo[some], hi[some] = np.nanquantile(flat[:, some], [a, 1.0 - a], axis=0, method=method)
    return lo.reshape(reps.shape[1:]), hi.reshape(reps.shape[1:])


def expanded_level(level: float, n: int) -> float:
    """The level whose percentile interval is Hesterberg's *expanded percentile* interval for n units.

    alpha' / 2 = Phi(-sqrt(n / (n - 1)) t_{alpha / 2, n - 1}) (Hesterberg 2015, Am. Stat. 69(4)).
    """
    if n < 2:
        return level
    t = t_quantile(level, n - 1)
    return 1.0 - 2.0 * NormalDist().cdf(-math.sqrt(n / (n - 1)) * t)


def normal_quantile(level: float) -> float:
    """The standard normal quantile of a two-sided ``level`` interval (1.959964 for 0.95)."""
    return NormalDist().inv_cdf(0.5 + level / 2.0)


def t_quantile(level: float, df: int) -> float:
    """Student t quantile of a two-sided ``level`` interval, no scipy.

    Exact at df = 1 and 2; Abramowitz & Stegun 26.7.5 above (|error| < 1e-4 at df >= 5, < 4e-3 at 3, 4).
    """
    p = 0.5 + level / 2.0
    if df <= 1:
        return math.tan(math.pi * (p - 0.5))
    if df == 2:
        return (2.0 * p - 1.0) * math.sqrt(2.0 / (4.0 * p * (1.0 - p)))
    z = normal_quantile(level)
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
    g4 = (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160
    return z + g1 / df + g2 / df**2 + g3 / df**3 + g4 / df**4


def mean_score_interval(
    values: np.ndarray,
    level: float = 0.95,
    *,
    strata: Sequence[int] | np.ndarray | None = None,
    runs: Sequence[int] | np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Score interval for the mean over units (inputs) of values in [0, 1], with an estimated dispersion.

    Wilson's score interval with the effective sample size U / phi, phi the (stratified) variance of
    the mean over mu (1 - mu) / U, at most 1 and, with ``runs``, at least the noise of 0/1 runs; the
    quantile is Student's t on U - H degrees of freedom (H strata). Details:
    [Means of per-input values](../statistics.md#means-of-per-input-values).

    Args:
        values: (U, ...): per-input values in [0, 1] (a column with a NaN gets NaN bounds).
        level: Interval level in (0, 1).
        strata: (U,): stratum (task) of each input (the variance is the stratified one).
        runs: (U,): complete runs per input, when each run's value is 0 or 1.

    Returns:
        (lo, hi), each of shape (...).

    Examples:
        Eight inputs, none of whose 4 runs reached full coverage:

        >>> lo, hi = mean_score_interval(np.zeros((8, 1)), runs=np.full(8, 4))
        >>> float(lo[0]), round(float(hi[0]), 2)
        (0.0, 0.41)
    """
    if not 0.0 < level < 1.0:
        raise ValueError(f"ci level must be in (0, 1), got {level!r}")
    x = np.asarray(values, dtype=np.float64)
    U = x.shape[0]
    sums = ScoreSums(
        np.zeros(U, dtype=np.int64) if strata is None else strata, [x[0].size if U else 1], [runs]
    )
    step = max(1, _CHUNK_CELLS // sums.width)  # units per block: no (units x all columns) copy
    for add in (sums.add, sums.add_squares):
        for a in range(0, U, step):
            add(a, [x[a : a + step]])
    lo, hi = sums.bounds(level)[0]
    return lo.reshape(x.shape[1:]), hi.reshape(x.shape[1:])


def stratified_mean_variance(y: np.ndarray, strata: np.ndarray) -> np.ndarray:
    """Stratified variance of the mean over units ``sum_h U_h s_h^2 / U^2`` of y (U, ...), strata (U,)."""
    U = y.shape[0]
    var = np.zeros(y.shape[1:])
    if U and strata.min() == strata.max():  # one stratum (the usual case): no masks
        return var + y.shape[0] * y.var(axis=0, ddof=1) / U**2 if U > 1 else var
    for h in np.unique(strata):
        yh = y[strata == h]
        if yh.shape[0] > 1:  # a stratum of one unit adds nothing: the bootstrap draws it as itself
            var += yh.shape[0] * yh.var(axis=0, ddof=1) / U**2
    return var


def add_rows(acc: np.ndarray | None, y: np.ndarray) -> np.ndarray:
    """``acc`` plus the rows of ``y``, row after row: over blocks, the digits of one sum over all rows."""
    return y.sum(axis=0) if acc is None else np.concatenate([acc[None], y]).sum(axis=0)


class ColumnSum:
    """Column sums of n rows fed block by block, with the digits of numpy's sum of a column in memory.

    numpy sums a contiguous column pairwise: halves (cut at a multiple of 8) down to at most 128
    values, each summed in 8 interleaved partial sums; the same tree is walked over the rows as they
    come, holding fewer than 128 of them.
    """

    def __init__(self, n: int) -> None:
        self.plan: deque[int] = deque()  # leaf sizes and -1 = "add the last two", in postfix order
        todo = [n]
        while todo:
            m = todo.pop()
            if m <= 128:  # a leaf, or -1
                self.plan.append(m)
            else:
                half = m // 2 - (m // 2) % 8
                todo += [-1, m - half, half]
        self.stack: list[np.ndarray] = []
        self.rows: np.ndarray | None = None

    def add(self, y: np.ndarray) -> None:
        """The next rows, (B, columns)."""
        buf = y if self.rows is None else np.concatenate([self.rows, y])
        while self.plan and (self.plan[0] < 0 or self.plan[0] <= buf.shape[0]):
            n = self.plan.popleft()
            if n < 0:
                right = self.stack.pop()
                self.stack.append(self.stack.pop() + right)
                continue
            a, buf = buf[:n], buf[n:]
            if n < 8:
                res = a.sum(axis=0)
            else:
                r = a[: n - n % 8].reshape(-1, 8, *a.shape[1:]).sum(axis=0)  # the 8 partial sums
                res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
                for row in a[n - n % 8 :]:
                    res = res + row
            self.stack.append(res)
        self.rows = buf

    def result(self) -> np.ndarray:
        """The column sums, once all n rows are in."""
        if self.plan or len(self.stack) != 1:
            raise ValueError("ColumnSum: not every row was added")
        return self.stack[0]


class ScoreSums:
    """The sums behind `mean_score_interval` for several blocks of columns over the same units.

    Two passes over the units in the same order: `add` (the means), then `add_squares` (the spread
    about them); each column is summed row after row, so any blocking gives the same digits.

    Args:
        strata: (U,): stratum of each unit.
        widths: columns of each block of values.
        runs: per block, (U,) complete runs per unit when each run's value is 0 or 1, else None.
    """

    def __init__(
        self,
        strata: Sequence[int] | np.ndarray,
        widths: Sequence[int],
        runs: Sequence[Sequence[int] | np.ndarray | None],
    ) -> None:
        self.code = strata_codes(strata)[1]
        self.U, self.count = self.code.size, np.bincount(self.code).tolist()
        if self.U < 2:
            raise ValueError(f"a score interval over units needs at least 2 units, got {self.U}")
        self.cols = np.cumsum([0, *widths]).tolist()
        # A single column is padded to two: numpy sums one column pairwise, wider ones row by row.
        self.width = max(self.cols[-1], 2)
        self.runs = [None if r is None else np.asarray(r) for r in runs]
        self.total: np.ndarray | None = None
        self.sums: list[np.ndarray | None] = [None] * len(self.count)
        self.squares: list[np.ndarray | None] = [None] * len(self.count)

    def _rows(self, a: int, values: Sequence[np.ndarray]) -> tuple[np.ndarray, list[tuple[int, np.ndarray]]]:
        n = values[0].shape[0]
        y = np.zeros((n, self.width))
        for v, c0, c1 in zip(values, self.cols[:-1], self.cols[1:], strict=True):
            y[:, c0:c1] = np.reshape(v, (n, -1))
        if len(self.count) == 1:  # one stratum (the usual case): no masks, no copies
            return y, [(0, y)]
        code = self.code[a : a + n]
        parts = [(g, y[code == g]) for g in range(len(self.count))]
        return y, [(g, part) for g, part in parts if part.shape[0]]

    def add(self, a: int, values: Sequence[np.ndarray]) -> None:
        """Values of units ``a .. a + n``, one (n, width) array per block (first pass, in order)."""
        y, parts = self._rows(a, values)
        self.total = add_rows(self.total, y)
        for g, part in parts:
            self.sums[g] = add_rows(self.sums[g], part)

    def add_squares(self, a: int, values: Sequence[np.ndarray]) -> None:
        """The same values again, after every `add` (second pass, in the same order)."""
        for g, part in self._rows(a, values)[1]:
            self.squares[g] = add_rows(self.squares[g], (part - self.sums[g] / self.count[g]) ** 2)

    def bounds(self, level: float) -> list[tuple[np.ndarray, np.ndarray]]:
        """The score interval of each block's columns: (lo, hi) per block, flat."""
        U, w = self.U, self.cols[-1]
        mu, var, floor = self.total[:w] / U, np.zeros(w), np.zeros(w)  # type: ignore[index]
        for g, n in enumerate(self.count):
            if n > 1:  # a stratum of one unit adds nothing (drawn as itself)
                var += (n * (self.squares[g] / (n - 1)) / U**2)[:w]
            mh = self.sums[g][:w] / n  # type: ignore[index]
            for runs, c0, c1 in zip(self.runs, self.cols[:-1], self.cols[1:], strict=True):
                if runs is not None:  # the binomial floor of 0/1 runs
                    r_max = float(np.max(runs if len(self.count) == 1 else runs[self.code == g]))
                    floor[c0:c1] += n * mh[c0:c1] * (1.0 - mh[c0:c1]) / r_max / U**2
        bern = mu * (1.0 - mu) / U  # Var(mean) when every value is 0 or 1: the largest possible
        with np.errstate(divide="ignore", invalid="ignore"):
            phi = np.where(bern > 0, np.maximum(var, floor) / np.where(bern > 0, bern, 1.0), 1.0)
        phi = np.clip(phi, 0.0, 1.0)
        c2 = t_quantile(level, max(U - len(self.count), 1)) ** 2
        # Wilson's interval with n_eff = U / phi depends on c^2 / n_eff = c^2 phi / U only.
        g = c2 * phi / U
        centre = (mu + g / 2.0) / (1.0 + g)
        half = np.sqrt(g * mu * (1.0 - mu) + g * g / 4.0) / (1.0 + g)
        lo = np.clip(centre - half, 0.0, 1.0)
        hi = np.clip(centre + half, 0.0, 1.0)
        # Wilson's bound is too high (coverage dips) at <= 3 effective events x = mean * n_eff: there the
        # Poisson one (Brown, Cai & DasGupta 2001, sec. 4.1.1); likewise at the top for 1 - mean.
        with np.errstate(divide="ignore", invalid="ignore"):
            n_eff = np.where(g > 0, c2 / np.where(g > 0, g, 1.0), np.inf)
        x_lo, x_hi = mu * n_eff, (1.0 - mu) * n_eff
        few_lo, few_hi = (np.isfinite(x) & (x > 0) & (x <= 3.0) for x in (x_lo, x_hi))
        if few_lo.any() or few_hi.any():  # both sides in one bisection
            got = _poisson_lower(np.concatenate([x_lo[few_lo], x_hi[few_hi]]), 1.0 - level)
            n_lo = int(few_lo.sum())
            lo[few_lo] = np.minimum(lo[few_lo], got[:n_lo] / n_eff[few_lo])
            hi[few_hi] = np.maximum(hi[few_hi], 1.0 - got[n_lo:] / n_eff[few_hi])
        return [(lo[c0:c1], hi[c0:c1]) for c0, c1 in itertools.pairwise(self.cols)]


def _poisson_lower(x: np.ndarray, alpha: float) -> np.ndarray:
    """The lower ``alpha`` quantile of Gamma(x, 1), 0 < x <= 3, by bisection on its power series."""
    x = np.asarray(x, dtype=np.float64).ravel()
    lgam = np.array([math.lgamma(v + 1.0) for v in x])
    den = x[:, None] + np.arange(1, 31, dtype=np.float64)[None, :]  # 30 terms: error < 1e-18
    terms = np.empty_like(den)

    def cdf(lam: np.ndarray) -> np.ndarray:
        np.cumprod(np.divide(lam[:, None], den, out=terms), axis=1, out=terms)
        return np.exp(-lam + x * np.log(lam) - lgam) * (1.0 + terms.sum(axis=1))

    a, b = np.zeros_like(x), x.copy()  # the alpha quantile (alpha < 1/2) lies below the mean x
    with np.errstate(divide="ignore"):
        for _ in range(40):  # 3 / 2^40 ~ 3e-12
            mid = (a + b) / 2.0
            below = cdf(mid) < alpha
            np.copyto(a, mid, where=below)
            np.copyto(b, mid, where=~below)
    return (a + b) / 2.0
