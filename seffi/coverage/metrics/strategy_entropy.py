"""Strategy entropy: how many strategies a policy effectively spreads its samples over, per input.

exp(H) of each input's distribution of matched strategies (a sample counts once per strategy it
matches), Miller–Madow corrected: 1 for a policy that always follows one strategy, M for one that
spreads evenly over M. The figure is its mean over inputs with a match, with a t interval over
inputs (stratified by task), beside the same figure of the base sampler's exact law.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import numpy as np

from seffi.coverage.input_metrics import Estimate, InputMetric
from seffi.coverage.resampling import stratified_mean_variance, t_quantile
from seffi.coverage.room import grow


def effective_strategies(counts: np.ndarray) -> np.ndarray:
    """exp(H) (U,) of each row of strategy counts (U, C) (rows sum > 0), Miller–Madow corrected.

    The correction adds (m - 1) / (2 N) to H: m strategies observed, N observations (Miller 1955).
    """
    counts = np.asarray(counts, dtype=np.float64)
    n = counts.sum(axis=1, keepdims=True)
    p = counts / n
    h = -(p * np.log(p, out=np.zeros_like(p), where=p > 0)).sum(axis=1)  # 0 log 0 = 0
    return np.exp(h + ((counts > 0).sum(axis=1) - 1) / (2.0 * n[:, 0]))


class StrategyEntropy(InputMetric):
    """Effective number of strategies per input (exp of the Miller–Madow entropy), mean over inputs.

    Per-input values are recomputed only for the inputs a batch touched and each iid figure once:
    a log costs O(inputs), not O(inputs x strategies).
    """

    name = "strategy_entropy"
    level = 0.95

    def setup(self) -> None:
        self.add_state("counts", per_strategy=True, merge="sum")
        # Derived, not state: exp(H) per input code, the codes updated since (a mask), iid figures by code.
        self._cache: np.ndarray | None = None
        self._cached_cols = -1
        self._stale = np.zeros(0, dtype=bool)
        self._iid: dict[int, float] = {}

    def update(self, codes: np.ndarray, hits: np.ndarray, valid: np.ndarray) -> None:
        rows, cols = np.divmod(np.flatnonzero(hits), hits.shape[1])  # np.nonzero(hits), in fewer steps
        if rows.size == 0:
            return
        # counts is C-contiguous, so cells are flat indices; its type holds every count (the tracker's fit).
        u = codes[rows]
        np.add.at(self.counts.reshape(-1), u * self.counts.shape[1] + cols, self.counts.dtype.type(1))
        grow(self, "_stale", self.n_inputs)
        self._stale[u] = True

    def _values(self) -> np.ndarray:
        """exp(H) per input code (NaN where no sample matched), brought up to date."""
        cached, U = self._cache, self.n_inputs
        if cached is None or self._cached_cols != self.n_columns:
            cached, stale = np.full(U, np.nan), np.arange(U)  # a load, a merge or a new strategy column
            self._stale[:] = False
        else:
            del cached  # held here, the cache could not grow in place
            grow(self, "_cache", U, np.nan)
            cached = self._cache
            stale = np.flatnonzero(self._stale[:U])
            self._stale[stale] = False
        if stale.size:
            counts = self.rows("counts")[stale]
            hit = counts.sum(axis=1) > 0
            cached[stale[hit]] = effective_strategies(counts[hit])
        self._cache, self._cached_cols = cached, self.n_columns
        return cached[:U]

    def _iid_values(self, use: np.ndarray, law_of: Callable[[int], Mapping[str, float]]) -> np.ndarray:
        """exp(H) of each input's base law of matched strategies, each computed once."""
        for c in use.tolist():
            if c not in self._iid:
                self._iid[c] = _law_effective(law_of(c))
        return np.array([self._iid[c] for c in use.tolist()])

    def compute(
        self, strata: np.ndarray, law_of: Callable[[int], Mapping[str, float]] | None = None
    ) -> Estimate:
        values = self._values()
        use = ~np.isnan(values)  # a mask, not indices: a log's temporaries stay small
        y = values[use]
        if y.size == 0:
            return Estimate(reason="no recorded sample matched a strategy")
        value, lo, hi = float(y.mean()), None, None
        # One stratum among every input is one among those used: no copy of the strata then.
        one = bool(strata.min() == strata.max()) or bool((s := strata[use]).min() == s.max())
        groups = np.zeros(y.size, dtype=np.int64) if one else np.unique(s, return_inverse=True)[1]
        df = y.size - (0 if one else int(groups.max())) - 1
        if df >= 1:
            half = t_quantile(self.level, df) * math.sqrt(float(stratified_mean_variance(y, groups)))
            lo, hi = max(value - half, 1.0), value + half  # exp(H) >= 1 for every input
        iid = None if law_of is None else float(self._iid_values(np.flatnonzero(use), law_of).mean())
        return Estimate(value=value, lo=lo, hi=hi, iid=iid, n_inputs=int(y.size))


def _law_effective(law: Mapping[str, float]) -> float:
    """exp(H) of a base law's matched strategies: P(s matched) normalised over s."""
    p = np.array([v for v in law.values() if v > 0], dtype=np.float64)
    q = p / p.sum()
    return float(np.exp(-(q * np.log(q)).sum()))
