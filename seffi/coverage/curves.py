"""Coverage curves: the result container and the pure metric functions over arrays.

Everything here is a pure numpy function of arrays (no trackers, no randomness), in the style of
rliable: metrics live here, resampling lives in :mod:`seffi.coverage.resampling`.

Conventions used in every docstring: ``K`` is the sample budget and arrays indexed by budget hold
k = 1..K in positions 0..K-1; ``R`` is a number of runs, ``U`` of units (inputs), ``M`` of strategy
columns, ``B`` of bootstrap replicates.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

#: The coverage thresholds tau reported for time-to-coverage, as the string keys used in ``Curves``.
TAUS: tuple[float, ...] = (0.5, 0.8, 1.0)
#: Format tag of ``Curves.to_dict``; ``from_dict`` refuses anything else.
CURVES_FORMAT = "seffi.coverage.curves/1"

__all__ = [
    "CURVES_FORMAT",
    "TAUS",
    "Curves",
    "Gain",
    "TimeToCoverage",
    "auc",
    "check_budget",
    "gain_value",
    "survival_summary",
    "tau_key",
]


def tau_key(tau: float) -> str:
    """The dictionary key of a threshold in ``Curves.time_to_coverage`` (``0.5 -> "0.5"``)."""
    return f"{float(tau):g}" if float(tau) != 1.0 else "1.0"


def check_budget(K: Any) -> int:
    """Validate a sample budget ``K`` (a positive int) and return it as ``int``."""
    if isinstance(K, bool) or not isinstance(K, int | np.integer) or int(K) <= 0:
        raise ValueError(f"budget K must be a positive integer, got {K!r}")
    return int(K)


# -- pure metric functions -----------------------------------------------------------------------


def auc(coverage: np.ndarray) -> np.ndarray:
    """Coverage area under the curve, AUC(K) = (1/K) sum_k C(k).

    Args:
        coverage: float array, shape (..., K).

    Returns:
        float array, shape (...) (a 0-d array for a single curve).
    """
    return np.asarray(coverage, dtype=np.float64).mean(axis=-1)


def survival_summary(survival: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Median, restricted mean and censored fraction of a time-to-event survival curve.

    The survival curve is S(k) = Pr[T > k] for k = 1..K (S(0) = 1 is implied). The median is the
    smallest k with S(k) <= 1/2 (NaN when not reached by K: it is censored); the restricted mean is
    E[min(T, K)] = sum_{k=0}^{K-1} S(k); the censored fraction is S(K).

    Args:
        survival: float array, shape (..., K).

    Returns:
        (median, restricted_mean, censored): float arrays, shape (...).
    """
    s = np.asarray(survival, dtype=np.float64)
    K = s.shape[-1]
    reached = s <= 0.5 + 1e-12
    first = np.argmax(reached, axis=-1)
    median = np.where(reached.any(axis=-1), first + 1.0, np.nan)
    restricted_mean = 1.0 + s[..., : K - 1].sum(axis=-1)
    return median, restricted_mean, s[..., K - 1].copy()


def gain_value(auc_a: np.ndarray, auc_iid: np.ndarray, auc_oracle: np.ndarray) -> np.ndarray:
    """Gain(K) = (AUC_A - AUC_iid) / (AUC_oracle - AUC_iid); NaN where the denominator is <= 0.

    Args:
        auc_a: float array, shape (...): the method's AUC.
        auc_iid: float array, shape (...) (broadcastable): the iid AUC.
        auc_oracle: float array, shape (...) (broadcastable): the oracle AUC.

    Returns:
        float array, the broadcast shape (...).
    """
    a, i, o = (np.asarray(v, dtype=np.float64) for v in (auc_a, auc_iid, auc_oracle))
    den = o - i
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 1e-12, (a - i) / np.where(den > 1e-12, den, 1.0), np.nan)


# -- result containers ---------------------------------------------------------------------------


@dataclass
class Gain:
    """Normalised gain over iid, relative to the oracle. ``value``/``lo``/``hi`` are None with a reason."""

    value: float | None
    lo: float | None
    hi: float | None
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict."""
        return {"value": self.value, "lo": self.lo, "hi": self.hi, "reason": self.reason}


@dataclass
class TimeToCoverage:
    """Time to reach coverage tau, T(tau) = min{k : |S_k|/M >= tau}, censored at K.

    Attributes:
        tau: the threshold.
        survival: float array, shape (K,): Pr[T > k] for k = 1..K.
        median: smallest k with Pr[T > k] <= 1/2; None when not reached by K.
        restricted_mean: E[min(T, K)].
        censored: fraction not reaching tau by K, Pr[T > K].
        mean: the unrestricted E[T] when known exactly (iid with a known law, tau = 1), else None.
        *_lo, *_hi: bootstrap interval bounds (None for exact baselines or when undefined).
    """

    tau: float
    survival: np.ndarray
    median: float | None
    restricted_mean: float
    censored: float
    survival_lo: np.ndarray | None = None
    survival_hi: np.ndarray | None = None
    median_lo: float | None = None
    median_hi: float | None = None
    restricted_mean_lo: float | None = None
    restricted_mean_hi: float | None = None
    censored_lo: float | None = None
    censored_hi: float | None = None
    mean: float | None = None

    @classmethod
    def from_survival(
        cls,
        tau: float,
        survival: np.ndarray,
        reps: np.ndarray | None = None,
        *,
        level: float = 0.95,
        mean: float | None = None,
    ) -> TimeToCoverage:
        """Summaries of a survival curve, with percentile intervals from bootstrap replicates.

        Args:
            tau: the threshold.
            survival: float array, shape (K,).
            reps: float array, shape (B, K): replicate survival curves, or None.
            level: interval level.
            mean: the exact unrestricted mean, when known.
        """
        s = np.clip(np.asarray(survival, dtype=np.float64), 0.0, 1.0)
        med, rmean, cens = survival_summary(s)
        out = cls(
            tau=float(tau),
            survival=s,
            median=_opt(med),
            restricted_mean=float(rmean),
            censored=float(cens),
            mean=mean,
        )
        if reps is not None and len(reps):
            reps = np.clip(reps, 0.0, 1.0)
            out.survival_lo, out.survival_hi = _percentile(reps, level)
            rmed, rrm, rc = survival_summary(reps)
            # A replicate whose median is censored counts as +inf, so the interval is honest about it.
            # Medians are integers: take order statistics instead of interpolating between them.
            lo, hi = _percentile(np.where(np.isnan(rmed), np.inf, rmed), level, method="nearest")
            out.median_lo, out.median_hi = _opt(lo), _opt(hi)
            lo, hi = _percentile(rrm, level)
            out.restricted_mean_lo, out.restricted_mean_hi = float(lo), float(hi)
            lo, hi = _percentile(rc, level)
            out.censored_lo, out.censored_hi = float(lo), float(hi)
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict (arrays become lists)."""
        return {f.name: _jsonable(getattr(self, f.name)) for f in fields(self)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TimeToCoverage:
        """Inverse of :meth:`to_dict`."""
        kw = dict(d)
        for name in ("survival", "survival_lo", "survival_hi"):
            if kw.get(name) is not None:
                kw[name] = np.asarray(kw[name], dtype=np.float64)
        return cls(**kw)


#: Array-valued fields of ``Curves`` (float arrays of shape (K,) unless stated).
_ARRAY_FIELDS = (
    "coverage",
    "coverage_lo",
    "coverage_hi",
    "novelty",
    "novelty_lo",
    "novelty_hi",
    "expected_new",
    "expected_new_lo",
    "expected_new_hi",
    "full_coverage",
    "full_coverage_lo",
    "full_coverage_hi",
    "valid_coverage",
    "valid_coverage_lo",
    "valid_coverage_hi",
    "valid_at_k",
    "valid_at_k_lo",
    "valid_at_k_hi",
    "coverage_by_rarity",
    "extrapolated",
    "runs_at_k",
    "auc_reps",
    "valid_auc_reps",
)


@dataclass
class Curves:
    """Coverage curves for k = 1..K of one method (a policy, the iid baseline or the oracle).

    Every array indexed by budget has shape (K,) with position k-1 holding budget k. ``*_lo`` /
    ``*_hi`` are the bounds of a ``ci_level`` interval (bootstrap over runs stratified by task for a
    policy; iNEXT bootstrap assemblage for an estimated iid baseline); they are None for exact
    baselines and for quantities that were not measured (then the point value is None too).

    Attributes:
        kind: "policy", "iid" (exact law), "iid_estimated" (from base samples) or "oracle".
        K: the budget.
        coverage: float array, shape (K,): C(k) = E[|S_k| / M].
        novelty: float array, shape (K,): N(i) = Pr[sample i adds a strategy not seen before].
        expected_new: float array, shape (K,): expected number of new strategies at sample i.
        full_coverage: float array, shape (K,): F(k) = Pr[|S_k| = M].
        auc: AUC(K) = mean of coverage over k = 1..K.
        valid_coverage: float array, shape (K,): coverage counting only matches of correct samples.
        valid_auc: AUC of ``valid_coverage``.
        valid_at_k: float array, shape (K,): best-of-k correctness, Pr[some sample <= k is correct].
        time_to_coverage: {"0.5" | "0.8" | "1.0": TimeToCoverage}.
        coverage_by_rarity: float array, shape (n_bins, K): coverage contributed by strategies in each
            within-input quantile of base probability (row 0 = most common); rows sum to coverage.
            None when no base law was given.
        rarity_bins: labels of the rows of ``coverage_by_rarity``.
        extrapolated: bool array, shape (K,): True where the value is a model-based extrapolation.
        runs_at_k: int array, shape (K,): number of runs observed for at least k samples (policy).
        n_inputs, n_runs, samples: counts behind the curves (samples = total samples seen).
        ci_level, n_boot, seed: how the intervals were made.
        auc_reps, valid_auc_reps: float arrays, shape (B,): bootstrap replicates of the AUCs, used by
            :meth:`gain` for its interval.
        barcode: optional strategy barcode, see ``CoverageTracker.barcode``.
        notes: human-readable caveats (Monte Carlo error, extrapolation, undefined quantities).
    """

    kind: str
    K: int
    coverage: np.ndarray
    novelty: np.ndarray
    expected_new: np.ndarray
    full_coverage: np.ndarray
    auc: float
    time_to_coverage: dict[str, TimeToCoverage]
    coverage_lo: np.ndarray | None = None
    coverage_hi: np.ndarray | None = None
    novelty_lo: np.ndarray | None = None
    novelty_hi: np.ndarray | None = None
    expected_new_lo: np.ndarray | None = None
    expected_new_hi: np.ndarray | None = None
    full_coverage_lo: np.ndarray | None = None
    full_coverage_hi: np.ndarray | None = None
    auc_lo: float | None = None
    auc_hi: float | None = None
    valid_coverage: np.ndarray | None = None
    valid_coverage_lo: np.ndarray | None = None
    valid_coverage_hi: np.ndarray | None = None
    valid_auc: float | None = None
    valid_auc_lo: float | None = None
    valid_auc_hi: float | None = None
    valid_at_k: np.ndarray | None = None
    valid_at_k_lo: np.ndarray | None = None
    valid_at_k_hi: np.ndarray | None = None
    coverage_by_rarity: np.ndarray | None = None
    rarity_bins: list[str] | None = None
    extrapolated: np.ndarray | None = None
    runs_at_k: np.ndarray | None = None
    n_inputs: int = 0
    n_runs: int = 0
    samples: int = 0
    ci_level: float = 0.95
    n_boot: int = 0
    seed: int | None = None
    auc_reps: np.ndarray | None = None
    valid_auc_reps: np.ndarray | None = None
    barcode: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def k(self) -> np.ndarray:
        """The budgets 1..K: int array, shape (K,)."""
        return np.arange(1, self.K + 1)

    # -- comparison ------------------------------------------------------------------------------

    def gain(self, iid: Curves, oracle: Curves, *, valid: bool = False) -> Gain:
        """Gain(K) = (AUC - AUC_iid) / (AUC_oracle - AUC_iid), with a bootstrap interval.

        The interval is the percentile interval of the gain over paired bootstrap replicates of the
        AUCs (baselines without replicates are exact and held fixed). The gain may exceed 1 when
        traces match several strategies at once.

        Args:
            iid: the iid baseline's curves (same K).
            oracle: the oracle's curves (same K).
            valid: compare the valid-only AUCs instead of the raw ones.

        Returns:
            A :class:`Gain`; value/lo/hi are None with ``reason`` set when the gain is undefined.
        """
        for name, other in (("iid", iid), ("oracle", oracle)):
            if not isinstance(other, Curves):
                raise ValueError(f"gain: {name} must be Curves, got {type(other).__name__}")
            if other.K != self.K:
                raise ValueError(f"gain: {name} curves have K={other.K}, these have K={self.K}")
        attr, reps_attr = ("valid_auc", "valid_auc_reps") if valid else ("auc", "auc_reps")
        vals = [getattr(c, attr) for c in (self, iid, oracle)]
        if any(v is None for v in vals):
            missing = [n for n, v in zip(("policy", "iid", "oracle"), vals, strict=True) if v is None]
            return Gain(None, None, None, f"{attr} not available for: {', '.join(missing)}")
        den = vals[2] - vals[1]
        if den <= 1e-12:
            return Gain(
                None,
                None,
                None,
                f"oracle AUC ({vals[2]:.6g}) does not exceed iid AUC ({vals[1]:.6g}) at K={self.K}: "
                "there is no room for improvement, the gain is undefined",
            )
        value = float(gain_value(*vals))
        reps = [getattr(c, reps_attr) for c in (self, iid, oracle)]
        if all(r is None for r in reps):
            return Gain(value, None, None, None)
        B = max(len(r) for r in reps if r is not None)
        # Replicates of independent bootstraps are paired by index; exact baselines stay fixed.
        cols = [np.resize(r, B) if r is not None else np.full(B, v) for r, v in zip(reps, vals, strict=True)]
        g = gain_value(*cols)
        g = g[np.isfinite(g)]
        if g.size == 0:
            return Gain(value, None, None, "every bootstrap replicate had an undefined gain")
        lo, hi = _percentile(g, self.ci_level)
        return Gain(value, float(lo), float(hi), None)

    # -- serialisation ---------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict: arrays become lists, NaN becomes None; ``from_dict`` inverts it."""
        out: dict[str, Any] = {"format": CURVES_FORMAT}
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name == "time_to_coverage":
                out[f.name] = {k: t.to_dict() for k, t in v.items()}
            else:
                out[f.name] = _jsonable(v)
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Curves:
        """Rebuild curves from :meth:`to_dict` output; a foreign or corrupted dict raises ValueError."""
        if not isinstance(d, Mapping) or d.get("format") != CURVES_FORMAT:
            raise ValueError(f"not a seffi Curves dict (expected format {CURVES_FORMAT!r})")
        names = {f.name for f in fields(cls)}
        unknown = set(d) - names - {"format"}
        if unknown:
            raise ValueError(f"Curves dict has unknown fields: {sorted(unknown)}")
        kw: dict[str, Any] = {k: v for k, v in d.items() if k != "format"}
        try:
            kw["time_to_coverage"] = {
                k: TimeToCoverage.from_dict(t) for k, t in kw.get("time_to_coverage", {}).items()
            }
            for name in _ARRAY_FIELDS:
                if kw.get(name) is not None:
                    dtype = (
                        bool if name == "extrapolated" else np.int64 if name == "runs_at_k" else np.float64
                    )
                    arr = np.array(kw[name], dtype=object)
                    kw[name] = np.where(arr == None, np.nan, arr).astype(dtype)  # noqa: E711
            return cls(**kw)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"corrupted Curves dict: {exc}") from exc


# -- small helpers -------------------------------------------------------------------------------


def _percentile(reps: np.ndarray, level: float, method: str = "linear") -> tuple[np.ndarray, np.ndarray]:
    """Percentile interval of replicates along axis 0 (shape (B, ...) -> two arrays of shape (...))."""
    a = (1.0 - level) / 2.0
    lo, hi = np.quantile(np.asarray(reps, dtype=np.float64), [a, 1.0 - a], axis=0, method=method)
    return lo, hi


def _opt(v: Any) -> float | None:
    """A finite float, or None for NaN/inf (censored or undefined)."""
    v = float(v)
    return v if math.isfinite(v) else None


def _jsonable(v: Any) -> Any:
    """Arrays to nested lists and non-finite floats to None, recursively."""
    if isinstance(v, np.ndarray):
        if v.dtype == bool:
            return v.tolist()
        if np.issubdtype(v.dtype, np.integer):
            return v.astype(int).tolist()
        return [_jsonable(x) for x in v.tolist()] if v.ndim > 1 else [_opt(x) for x in v.tolist()]
    if isinstance(v, list):
        return [_jsonable(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, float | np.floating):
        return _opt(v)
    if isinstance(v, np.integer | np.bool_):
        return v.item()
    return v
