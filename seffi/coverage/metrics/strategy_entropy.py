"""Strategy entropy: how many strategies a policy effectively spreads its samples over, per input.

The approach-level counterpart of the token entropy RL trainers log: for each input, the Shannon
entropy H of the distribution of matched strategies over its recorded samples (a sample that
matches several strategies counts once for each), reported as the effective number of strategies
exp(H) — 1 for a policy that always follows one strategy, M for one that spreads evenly over M.
The plug-in entropy is biased low at small sample sizes; the Miller–Madow correction adds
(m - 1) / (2 N), m the strategies observed and N the observations of the input (Miller 1955). The
figure is the mean of exp(H) over inputs with at least one match, with a t interval over inputs
(stratified by task); the iid figure beside it is exp(H) of the base sampler's own law of matched
strategies (exact, no sampling) over the same inputs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from seffi.coverage.input_metrics import Estimate, InputMetric
from seffi.coverage.resampling import stratified_mean_variance, t_quantile

__all__ = ["StrategyEntropy", "effective_strategies"]


def effective_strategies(counts: np.ndarray, *, corrected: bool = True) -> np.ndarray:
    """exp(H) of each row of strategy counts, Miller–Madow corrected unless ``corrected`` is False.

    Args:
        counts: int array, shape (U, C): observations of each strategy per input; rows sum > 0.
        corrected: add the Miller–Madow term (m - 1) / (2 N) to each row's entropy.

    Returns:
        float array, shape (U,).
    """
    counts = np.asarray(counts, dtype=np.float64)
    n = counts.sum(axis=1, keepdims=True)
    p = counts / n
    with np.errstate(divide="ignore", invalid="ignore"):
        h = -np.where(p > 0, p * np.log(p), 0.0).sum(axis=1)
    if corrected:
        h = h + ((counts > 0).sum(axis=1) - 1) / (2.0 * n[:, 0])
    return np.exp(h)


class StrategyEntropy(InputMetric):
    """Effective number of strategies per input (exp of the Miller–Madow entropy), mean over inputs."""

    name = "strategy_entropy"
    level = 0.95

    def setup(self) -> None:
        self.add_state("counts", per_strategy=True, merge="sum")

    def update(self, codes: np.ndarray, hits: np.ndarray, valid: np.ndarray) -> None:
        rows, cols = np.nonzero(hits)
        np.add.at(self.counts, (codes[rows], cols), 1)

    def compute(
        self, strata: np.ndarray, base_laws: Sequence[Mapping[str, float] | None] | None = None
    ) -> Estimate:
        counts = self.rows("counts")
        use = np.flatnonzero(counts.sum(axis=1) > 0)
        if use.size == 0:
            return Estimate(reason="no recorded sample matched a strategy")
        y = effective_strategies(counts[use])
        value, lo, hi = float(y.mean()), None, None
        groups = np.unique(strata[use], return_inverse=True)[1].reshape(-1)
        df = use.size - int(groups.max()) - 1
        if df >= 1:
            half = t_quantile(self.level, df) * math.sqrt(float(stratified_mean_variance(y, groups)))
            lo, hi = max(value - half, 1.0), value + half  # exp(H) >= 1 for every input
        iid = None
        if base_laws is not None and all(base_laws[c] is not None for c in use.tolist()):
            iid = float(np.mean([_law_effective(base_laws[c]) for c in use.tolist()]))  # type: ignore[arg-type]
        return Estimate(value=value, lo=lo, hi=hi, iid=iid, n_inputs=int(use.size))


def _law_effective(law: Mapping[str, float]) -> float:
    """exp(H) of a base law's matched strategies: P(s matched) normalised over s."""
    p = np.array([v for v in law.values() if v > 0], dtype=np.float64)
    q = p / p.sum()
    return float(np.exp(-(q * np.log(q)).sum()))
