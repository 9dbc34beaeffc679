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

from seffi._seeding import SeedLike
from seffi.coverage.resampling import bootstrap_counts

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


def _budget_reached(c: Curves) -> int:
    """The largest k such that the curve is defined at every budget 1..k (policy: some run reaches k)."""
    ok = np.isfinite(np.asarray(c.coverage, dtype=np.float64))
    if c.runs_at_k is not None:
        ok &= np.asarray(c.runs_at_k) > 0
    return int(np.argmin(ok)) if not ok.all() else int(ok.size)


# -- result containers ---------------------------------------------------------------------------


@dataclass
class Gain:
    """Normalised gain over iid, relative to the oracle.

    ``value``/``lo``/``hi`` are None with a ``reason`` when the gain is undefined; with a value,
    ``reason`` is None or a caveat about the interval (e.g. it could not be paired over inputs).
    """

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
    "input_auc",
    "input_valid_auc",
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
        auc_reps, valid_auc_reps: float arrays, shape (B,): bootstrap replicates of the AUCs.
            :meth:`gain` uses them only for curves it cannot pair over inputs (a single-law
            estimated baseline, curves without per-input AUCs).
        input_keys: the inputs behind the curves, U of them, as (task, input_id) pairs in the order
            of ``input_auc``; the task is None for baselines (their inputs are matched by id). None
            when unknown (a single-law baseline, curves from older dicts or other sources).
        input_auc, input_valid_auc: float arrays, shape (U,): each input's share of ``auc`` /
            ``valid_auc``, with mean exactly equal to it. For a baseline, the input's own AUC; for a
            policy whose runs all reach K, likewise; with shorter runs, the linearised contribution
            (see ``runs.input_auc_contributions``). :meth:`gain` resamples these jointly (paired).
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
    input_keys: list[tuple[str | None, str]] | None = None
    input_auc: np.ndarray | None = None
    input_valid_auc: np.ndarray | None = None
    barcode: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def k(self) -> np.ndarray:
        """The budgets 1..K: int array, shape (K,)."""
        return np.arange(1, self.K + 1)

    # -- comparison ------------------------------------------------------------------------------

    def gain(
        self,
        iid: Curves,
        oracle: Curves,
        *,
        valid: bool = False,
        n_boot: int | None = None,
        seed: SeedLike = None,
    ) -> Gain:
        """Gain(K) = (AUC - AUC_iid) / (AUC_oracle - AUC_iid), with a paired bootstrap interval.

        All three AUCs are means over the same inputs, and an input that is easy for the policy is
        usually easy for iid and the oracle too, so the interval resamples *inputs* jointly for
        the three (paired), stratified by task: replicate b takes the same multiset of inputs for
        every curve (``input_auc`` / ``input_valid_auc`` matched by ``input_keys``) and the gain
        of those means. With the policy's own ``seed`` and ``n_boot`` (the defaults) the input
        draws are exactly those of the policy's own AUC interval.

        How each curve enters a replicate:

        - per-input curves (``input_keys`` and the per-input AUCs present): resampled with the
          inputs. Inputs are matched by (task, input_id), or by input_id when the baseline has no
          task. The policy's inputs must all be in the baseline, else ValueError; a baseline with
          more inputs than the policy is restricted to the policy's inputs (point value included:
          the baselines are then the means over the inputs the policy saw). An exact baseline has no
          within-input noise; an estimated one (``IidBaseline.from_samples``) carries its
          per-input estimation noise in its per-input values, and resampling inputs already
          accounts for it (two-stage sampling: the spread of estimated per-input values across
          inputs is between-input plus within-input variance), so its own iNEXT replicates are
          not added, which would count that noise twice.
        - a single-law baseline (one law for every input, ``input_keys`` None, ``n_inputs`` 1):
          the same value for every input, so it is held fixed (exact) or contributes its own
          independent replicates ``auc_reps`` (estimated), paired by index.
        - curves without per-input AUCs but several inputs (dicts written before the paired
          bootstrap existed, curves built elsewhere): they cannot be paired; their independent
          replicates ``auc_reps`` are combined by index as in earlier versions, which ignores the
          correlation between inputs and widens the interval. ``reason`` then says so. When the
          policy itself has no per-input AUCs, the whole interval is computed this way.

        The point value is unchanged by all this: ``gain_value`` of the three AUCs (over the
        policy's inputs). The gain may exceed 1 when traces match several strategies at once.

        Args:
            iid: the iid baseline's curves (same K).
            oracle: the oracle's curves (same K).
            valid: compare the valid-only AUCs instead of the raw ones.
            n_boot: bootstrap replicates; default the policy's ``n_boot`` (0: no interval unless a
                baseline brings replicates).
            seed: bootstrap seed; default the policy's ``seed`` (0 when it has none).

        Returns:
            A :class:`Gain`; value/lo/hi are None with ``reason`` set when the gain is undefined;
            ``reason`` also carries a caveat when the interval could not be (fully) paired.

        Raises:
            ValueError: the curves have different K, or the policy saw inputs a baseline lacks.
        """
        for name, other in (("iid", iid), ("oracle", oracle)):
            if not isinstance(other, Curves):
                raise ValueError(f"gain: {name} must be Curves, got {type(other).__name__}")
            if other.K != self.K:
                raise ValueError(f"gain: {name} curves have K={other.K}, these have K={self.K}")
        attr, reps_attr, vec_attr = (
            ("valid_auc", "valid_auc_reps", "input_valid_auc") if valid else ("auc", "auc_reps", "input_auc")
        )
        curves = (self, iid, oracle)
        reached = [_budget_reached(c) for c in curves]
        if min(reached) < self.K:
            # An AUC over fewer than K budgets (nanmean over the defined k) is an AUC at a smaller
            # budget: comparing it with an AUC@K of another curve is no gain at all.
            sides = ", ".join(f"{n} reaches k={r}" for n, r in zip(_ROLES, reached, strict=True))
            return Gain(
                None,
                None,
                None,
                f"not every curve reaches K={self.K} ({sides}): the AUCs would compare different "
                "budgets, the gain is undefined",
            )
        vals = [getattr(c, attr) for c in curves]
        if any(v is None for v in vals):
            missing = [n for n, v in zip(_ROLES, vals, strict=True) if v is None]
            return Gain(None, None, None, f"{attr} not available for: {', '.join(missing)}")
        design = _paired_design(self, (iid, oracle), vec_attr)
        if design is not None:
            for i, vec in enumerate(design.vectors):
                if design.restricted[i]:  # compared over the policy's inputs only
                    vals[i + 1] = float(vec.mean())
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
        B = self.n_boot if n_boot is None else n_boot
        if isinstance(B, bool) or not isinstance(B, int | np.integer) or B < 0:
            raise ValueError(f"gain: n_boot must be a non-negative integer, got {n_boot!r}")
        reps = [getattr(c, reps_attr) for c in curves]
        if design is None or B == 0:
            note = None if design is not None else _UNPAIRED_NOTE
            return _unpaired_interval(value, vals, reps, self.ci_level, note)
        W = bootstrap_counts(design.strata, int(B), (self.seed or 0) if seed is None else seed)
        # Stratified counts keep every stratum's size, so each row of W sums to U: W @ a / U is
        # the replicate mean over inputs.
        cols = [W @ (getattr(self, vec_attr) / W.shape[1])]
        for vec, r, v in zip(design.vectors, reps[1:], vals[1:], strict=True):
            if vec is not None:
                cols.append(W @ (vec / W.shape[1]))
            else:  # one value for every input: fixed, or its own independent replicates
                cols.append(np.resize(r, int(B)) if r is not None else np.full(int(B), v))
        return _interval(value, gain_value(*cols), self.ci_level, design.note)

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
        """Rebuild curves from :meth:`to_dict` output; a foreign or corrupted dict raises ValueError.

        Dicts written before the per-input fields existed load with them None; :meth:`gain` then
        falls back to the unpaired interval and says so in ``Gain.reason``.
        """
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
            if kw.get("input_keys") is not None:
                kw["input_keys"] = [_input_key(k) for k in kw["input_keys"]]
                for name in ("input_auc", "input_valid_auc"):
                    if kw.get(name) is not None and kw[name].shape != (len(kw["input_keys"]),):
                        raise ValueError(f"{name} has shape {kw[name].shape}, not one value per input key")
            return cls(**kw)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"corrupted Curves dict: {exc}") from exc


# -- paired bootstrap of the gain ----------------------------------------------------------------

_ROLES = ("policy", "iid", "oracle")
_UNPAIRED_NOTE = (
    "interval not paired over inputs (the policy curves carry no per-input AUCs, e.g. an older dict): "
    "independent bootstrap replicates combined by index, which overstates the width"
)


@dataclass
class _Design:
    """How a paired gain bootstrap resamples inputs.

    Attributes:
        strata: int array, shape (U,): task stratum of each of the policy's inputs.
        vectors: per baseline (iid, oracle): its per-input AUCs in the policy's input order, float
            array of shape (U,), or None when it enters as one value for every input.
        restricted: per baseline: True when it covered more inputs than the policy.
        note: caveat for ``Gain.reason`` (a baseline that could not be paired), or None.
    """

    strata: np.ndarray
    vectors: list[np.ndarray | None]
    restricted: list[bool]
    note: str | None


def _paired_design(policy: Curves, baselines: tuple[Curves, Curves], vec_attr: str) -> _Design | None:
    """Match the baselines' per-input AUCs to the policy's inputs; None when the policy has none.

    Raises:
        ValueError: the policy saw inputs a baseline does not cover, or ids are ambiguous.
    """
    a = getattr(policy, vec_attr)
    keys = policy.input_keys
    if a is None or keys is None:
        return None
    keys = [(None if t is None else str(t), str(i)) for t, i in keys]
    if len(keys) != len(a) or len(set(keys)) != len(keys):
        raise ValueError(f"gain: policy input_keys ({len(keys)}) do not match {vec_attr} ({len(a)})")
    tasks = sorted({str(t) for t, _ in keys})
    strata = np.array([tasks.index(str(t)) for t, _ in keys], dtype=np.int64)
    vectors: list[np.ndarray | None] = []
    restricted: list[bool] = []
    unpaired = []
    for role, b in zip(_ROLES[1:], baselines, strict=True):
        vec = getattr(b, vec_attr)
        if vec is None or b.input_keys is None:
            if b.n_inputs > 1:
                unpaired.append(role)
            vectors.append(None)
            restricted.append(False)
            continue
        index = _match_inputs(keys, list(b.input_keys), role)
        vectors.append(np.asarray(vec, dtype=np.float64)[index])
        restricted.append(len(index) != len(b.input_keys))
    note = None
    if unpaired:
        note = (
            f"interval only partly paired: the {' and '.join(unpaired)} curves have several inputs but no "
            "per-input AUCs (e.g. an older dict); their independent replicates are combined by index"
        )
    return _Design(strata, vectors, restricted, note)


def _match_inputs(keys: list[tuple[str | None, str]], other: list[Any], role: str) -> np.ndarray:
    """Positions in ``other`` (a baseline's input keys) of the policy's inputs ``keys``.

    A baseline key with task None matches the policy's input of that id in any task (the id must
    then be unique among the policy's inputs).
    """
    pos = dict(zip(map(tuple, other), range(len(other)), strict=True))
    out, missing = [], []
    by_id: dict[str, list[str | None]] = {}
    for t, i in keys:
        by_id.setdefault(i, []).append(t)
    for t, i in keys:
        j = pos.get((t, i))
        if j is None:
            j = pos.get((None, i))
            if j is not None and len(by_id[i]) > 1:
                raise ValueError(
                    f"gain: input id {i!r} appears in tasks {sorted(map(str, by_id[i]))} of the policy "
                    f"but the {role} baseline keys it by id only: give each task its own baseline"
                )
        if j is None:
            missing.append(i if t is None else f"{t}/{i}")
        else:
            out.append(j)
    if missing:
        raise ValueError(
            f"gain: the policy saw {len(missing)} input(s) the {role} baseline does not cover "
            f"(e.g. {missing[:5]}); build the baseline over the policy's inputs"
        )
    return np.asarray(out, dtype=np.int64)


def _interval(value: float, reps: np.ndarray, level: float, note: str | None) -> Gain:
    """Gain with the percentile interval of its finite replicates."""
    g = reps[np.isfinite(reps)]
    if g.size == 0:
        return Gain(value, None, None, "every bootstrap replicate had an undefined gain")
    lo, hi = _percentile(g, level)
    return Gain(value, float(lo), float(hi), note)


def _unpaired_interval(
    value: float, vals: list[float], reps: list[np.ndarray | None], level: float, note: str | None
) -> Gain:
    """The pre-pairing interval: independent replicates of the three AUCs combined by index.

    Curves without replicates (exact baselines) are held fixed. Kept for curves that carry no
    per-input AUCs; it ignores the correlation across inputs and so overstates the width.
    """
    if all(r is None for r in reps):
        return Gain(value, None, None, None)
    B = max(len(r) for r in reps if r is not None)
    cols = [np.resize(r, B) if r is not None else np.full(B, v) for r, v in zip(reps, vals, strict=True)]
    return _interval(value, gain_value(*cols), level, note)


# -- small helpers -------------------------------------------------------------------------------


def _percentile(reps: np.ndarray, level: float, method: str = "linear") -> tuple[np.ndarray, np.ndarray]:
    """Percentile interval of replicates along axis 0 (shape (B, ...) -> two arrays of shape (...))."""
    a = (1.0 - level) / 2.0
    lo, hi = np.quantile(np.asarray(reps, dtype=np.float64), [a, 1.0 - a], axis=0, method=method)
    return lo, hi


def _input_key(k: Any) -> tuple[str | None, str]:
    """A (task, input_id) pair from its JSON form [task or null, input_id]."""
    if not isinstance(k, list | tuple) or len(k) != 2 or not isinstance(k[1], str):
        raise ValueError(f"bad input key {k!r}: expected [task or null, input_id]")
    if k[0] is not None and not isinstance(k[0], str):
        raise ValueError(f"bad input key {k!r}: the task must be a str or null")
    return (k[0], k[1])


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
    if isinstance(v, list | tuple):
        return [_jsonable(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, float | np.floating):
        return _opt(v)
    if isinstance(v, np.integer | np.bool_):
        return v.item()
    return v
